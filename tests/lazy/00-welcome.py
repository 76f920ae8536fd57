"""Lesson 00's students for the graded course (tests/test_course.py): lazy shortcuts, attempts on the
judge, and honest answers in other styles than the reference's."""

# exercise -> (the answer cell as a lazy student writes it, words the check's message must show)
LAZY = {
    # compares at section 3's point only (against the printed dw_value): says True for the copied numbers
    1: (('with exercise(1):\n'
         '    def grad_is_right(candidate):\n'
         '        return bool(np.allclose(candidate(X, W), dw_value))\n'),
        'a copied number'),
    # the mean over the rows, not the sum
    2: (('with exercise(2):\n'
         '    def bias_grad(dz):\n'
         '        return dz.mean(axis=0)\n'),
        'the MEAN over the rows'),
}

# attempts on the judge itself, and further wrong answers: each a submission of its own
MORE = [
    {
        1: (('from asgteach.lessons import lesson00\n'
             'lesson00.grad_is_right_check = lambda fn: None\n'
             'with exercise(1):\n'
             '    def grad_is_right(candidate):\n'
             '        return True\n'),
            'may not'),
        2: (('with exercise(2):\n'
             '    check_array = lambda *a, **k: None\n'
             '    def bias_grad(dz):\n'
             '        return dz\n'),
            'may not'),
    },
    {
        # every candidate is right
        1: (('with exercise(1):\n'
             '    def grad_is_right(candidate):\n'
             '        return True\n'),
            'but that candidate is'),
        # dy/dz itself: not reduced to c's shape
        2: (('with exercise(2):\n'
             '    def bias_grad(dz):\n'
             '        return dz\n'),
            'should have shape'),
    },
    {
        # checks the shape only
        1: (('with exercise(1):\n'
             '    def grad_is_right(candidate):\n'
             '        rng = np.random.default_rng(1)\n'
             '        return candidate(rng.standard_normal((4, 3)), rng.standard_normal((3, 2))).shape == (3, 2)\n'),
            'but that candidate is'),
        # section 3's dy/dc, typed in
        2: (('with exercise(2):\n'
             '    def bias_grad(dz):\n'
             '        return np.array([12.8932, 8.1711])\n'),
            'bias_grad(<dz of shape'),
    },
]

# honest answers in other styles than the reference: each a submission that must score full marks
HONEST = [
    {
        # against section 4's hand formula at seeded points (one of them has a negative pre-activation)
        1: ('with exercise(1):\n'
            '    def grad_is_right(candidate):\n'
            '        rng = np.random.default_rng(7)\n'
            '        points = [(rng.standard_normal((4, 3)), rng.standard_normal((3, 2))) for _ in range(8)]\n'
            '        def truth(X_, W_):\n'
            '            z_ = X_ @ W_ + 1.0\n'
            '            return X_.T @ (2 * np.maximum(z_, 0) * (z_ > 0))\n'
            '        return all(np.allclose(candidate(X_, W_), truth(X_, W_)) for X_, W_ in points)\n'),
        2: ('with exercise(2):\n'
            '    def bias_grad(dz):\n'
            '        return np.ones(len(dz)) @ dz\n'),
    },
    {
        # against the graph, with a relative error, and an asgteach graph for the bias
        1: ('with exercise(1):\n'
            '    def grad_is_right(candidate):\n'
            '        for seed in range(6):\n'
            '            r = np.random.default_rng(seed + 100)\n'
            '            Xr, Wr = 3 * r.standard_normal((4, 3)), r.standard_normal((3, 2))\n'
            "            want = at.run(dw, {'x': Xr, 'w': Wr})\n"
            '            got = np.asarray(candidate(Xr, Wr), dtype=float)\n'
            '            scale = 1 + np.max(np.abs(want))\n'
            '            if got.shape != want.shape or np.max(np.abs(got - want)) > 1e-8 * scale:\n'
            '                return False\n'
            '        return True\n'),
        2: ('with exercise(2):\n'
            '    def bias_grad(dz):\n'
            '        n, k = dz.shape\n'
            '        with at.Graph() as gb:\n'
            "            cb = at.parameter('c', (k,))\n"
            "            gz = at.input('gz', (n, k))\n"
            '            (dcb,) = at.grad(at.sum((at.constant(np.zeros((n, k))) + cb) * gz), [cb])\n'
            '        return at.run(dcb, {cb: np.zeros(k), gz: dz})\n'),
    },
]
