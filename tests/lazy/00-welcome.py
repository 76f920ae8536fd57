"""Lesson 00's students for the graded course (tests/test_course.py): lazy shortcuts, attempts on the
judge, and honest answers in other styles than the reference's."""

# exercise -> (the answer cell as a lazy student writes it, words the check's message must show)
LAZY = {
    1: (('A = np.array([-1.0, 0.5, 2.0])\n'
         'with exercise(1):\n'
         '    with at.Graph() as g1:\n'
         '        a = at.input("a", (3,))\n'
         '        da = at.tanh(a) + a * (1 - at.tanh(a) ** 2)\n'
         '    df_value = np.tanh(A) + A * (1 - np.tanh(A) ** 2)\n'),
        'holds no backward node'),
    2: (('with exercise(2):\n'
         '    dc_value = dz.sum(axis=0)\n'),
        'did not define what the check needs'),
}

# attempts on the judge itself: each a submission of its own
MORE = [
    {
        1: (('from asgteach.lessons import checks\n'
             'checks.check_tensor = lambda *a, **k: None\n'
             'A = np.array([-1.0, 0.5, 2.0])\n'
             'with exercise(1):\n'
             '    df_value = np.zeros(3)\n'),
            'may not'),
        2: (('with exercise(2):\n'
             '    check_array = lambda *a, **k: None\n'
             '    dc_value = np.zeros(2)\n'),
            'may not'),
    },
]

# honest answers in other styles than the reference: each a submission that must score full marks
HONEST = [
    {
        1: ('A = np.array([-1.0, 0.5, 2.0])\n'
             'with exercise(1):\n'
             '    with at.Graph() as g1:\n'
             "        a = at.input('a', (3,))\n"
             '        (da,) = at.grad(at.sum(a * at.tanh(a)), [a])\n'
             '    df_value = at.run(da, {a: A})\n'),
        2: ('with exercise(2):\n'
             '    with at.Graph() as g2:\n'
             "        x2, w2 = at.input('x', (4, 3)), at.parameter('w', (3, 2))\n"
             "        c2 = at.parameter('c', (2,))\n"
             '        z = at.relu(x2 @ w2 + c2)\n'
             '        dc2 = at.grad(at.sum(z * z), c2)\n'
             '    dc_value = at.run(dc2, {x2: X, w2: W, c2: np.array([1.0, 1.0])})\n'),
    },
    {
        1: ('A = np.array([-1.0, 0.5, 2.0])\n'
             'with exercise(1):\n'
             "    with at.Graph(name='mine') as g1:\n"
             "        a = at.input('a', (3,))\n"
             "        f = (at.tanh(a) * a).sum() if hasattr(at.Tensor, 'sum') else at.sum(at.tanh(a) * a)\n"
             '        da = at.grad(f, a)\n'
             '    df_value = np.asarray(at.run(da, {a: A}))\n'),
        2: ('with exercise(2):\n'
             '    with at.Graph() as g2:\n'
             "        x2 = at.input('x', (4, 3))\n"
             "        w2 = at.parameter('w', (3, 2))\n"
             "        c2 = at.parameter('c', (2,))\n"
             '        y2 = at.sum(at.relu(at.matmul(x2, w2) + c2) ** 2)\n'
             '        (dc2,) = at.grad(y2, [c2])\n'
             '    dc_value = at.run(dc2, {x2: X, w2: W, c2: np.ones(2)})\n'),
    },
]
