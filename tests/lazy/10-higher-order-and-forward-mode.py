"""Lesson 10's students (loaded by tests/test_course.py): LAZY (one shortcut per exercise, and words the judge's
message must show), MORE (attempts on the judge itself, each a submission of its own) and HONEST (right answers in
other styles than the reference's, each a submission that must score full marks)."""

LAZY = {
    2: ("with exercise(2):\n    def hessian_from_hvp(hv, x, v, x0):\n        return H_exact\n\n    H = H_exact\n",
        "hessian_from_hvp("),
    3: ("with exercise(3):\n    def jacobian_by_jvp(jt, a, t, a0):\n        return np.diag(deriv)\n\n"
        "    J_forward = np.diag(deriv)\n", "jacobian_by_jvp("),
    4: ("with exercise(4):\n    def softmax_jacobian(y):\n        with at.Graph():\n"
        '            z_, t_ = at.input("z", np.shape(y)), at.input("t", np.shape(y))\n'
        "            jt_ = at.jvp(at.softmax(z_), z_, t_)\n"
        "        return np.stack([at.run(jt_, {z_: np.log(y), t_: e}) for e in np.eye(len(y))], axis=1)\n\n"
        "    J_soft = J_formula\n", "which the exercise asks you to write yourself"),
    5: ("with exercise(5):\n    def jvp_by_transposition(y, x, t):\n        return at.jvp(y, x, t)\n\n"
        "    with gT:\n        jt_mine = jvp_by_transposition(yT, xT, tT)\n", "calls asgteach.jvp"),
}

MORE = [
    {   # a closure over the library's jvp, and numpy's comparison switched off from the answer cell
        4: ("with exercise(4):\n    def make():\n        import asgteach as lib\n"
            "        f = lib.jvp\n        def softmax_jacobian(y):\n            return f\n"
            "        return softmax_jacobian\n"
            "    softmax_jacobian = make()\n    J_soft = None\n", "may not"),
        5: ("with exercise(5):\n    def jvp_by_transposition(y, x, t, _f=at.jvp):\n        return _f(y, x, t)\n\n"
            "    with gT:\n        jt_mine = jvp_by_transposition(yT, xT, tT)\n", "jvp"),
        1: ("XS = np.array([-1.0, 0.0, 0.5, 2.0])\nnp.allclose = lambda *a, **k: True\n"
            "np.isclose = lambda *a, **k: True\n"
            "with exercise(1):\n    with at.Graph() as g3:\n        x3 = at.input('x', (4,))\n"
            "        d3 = at.grad(at.sum(at.tanh(x3)), x3)\n    third = np.zeros(4)\n", "exercise 1"),
    },
]

HONEST = [
    {   # a scalar input, one run per point (the text allows it); loops that fill the matrices; stacked rows
        1: ("XS = np.array([-1.0, 0.0, 0.5, 2.0])\nwith exercise(1):\n    with at.Graph(name='third, scalar') as g3:\n"
            "        x3 = at.input('x', ())\n        d1 = at.grad(at.tanh(x3), x3)\n        d2 = at.grad(d1, x3)\n"
            "        d3 = at.grad(d2, x3)\n    third = [float(at.run(d3, {x3: v})) for v in XS]\n"),
        2: ("with exercise(2):\n    def hessian_from_hvp(hv, x, v, x0):\n        n = len(x0)\n"
            "        H = np.zeros((n, n))\n        for i in range(n):\n            e = np.zeros(n)\n"
            "            e[i] = 1.0\n            H[:, i] = at.run(hv, {x: x0, v: e})\n        return H\n\n"
            "    H = hessian_from_hvp(hv, xh, v, X0)\n"),
        3: ("with exercise(3):\n    def jacobian_by_jvp(jt, a, t, a0):\n        cols = []\n"
            "        for i in range(a0.size):\n            e = np.zeros(a0.size)\n            e[i] = 1.0\n"
            "            cols.append(np.asarray(at.run(jt, {a: a0, t: e})))\n        return np.array(cols).T\n\n"
            "    J_forward = jacobian_by_jvp(jt, a, t, A0)\n"),
        4: ("with exercise(4):\n    def softmax_jacobian(y):\n        y = np.asarray(y, dtype=float)\n"
            "        if y.ndim == 1:\n            return np.diag(y) - np.outer(y, y)\n"
            "        return np.stack([np.diag(r) - np.outer(r, r) for r in y])\n\n"
            "    J_soft = softmax_jacobian(Y0)\n"),
        5: ("with exercise(5):\n    def jvp_by_transposition(y, x, t):\n"
            "        u = at.input('cotangent', y.shape)\n        (vjp,) = at.grad(y, [x], seed=u)\n"
            "        (jt,) = at.grad(at.sum(t * vjp), [u])\n        return jt\n\n"
            "    with gT:\n        jt_mine = jvp_by_transposition(yT, xT, tT)\n"),
    },
    {   # a vector input differentiated in a loop; column_stack; einsum
        1: ("XS = np.array([-1.0, 0.0, 0.5, 2.0])\nwith exercise(1):\n    with at.Graph(name='third, vector') as g3:\n"
            "        x3 = at.input('x', (4,))\n        d = at.tanh(x3)\n        for _ in range(3):\n"
            "            (d,) = at.grad(at.sum(d), [x3])\n        d3 = d\n    third = at.run(d3, {x3: XS})\n"),
        2: ("with exercise(2):\n    def hessian_from_hvp(hv, x, v, x0):\n"
            "        return np.column_stack([at.run(hv, {x: x0, v: col}) for col in np.identity(x0.shape[0])])\n\n"
            "    H = hessian_from_hvp(hv, xh, v, X0)\n"),
        3: ("with exercise(3):\n    def jacobian_by_jvp(jt, a, t, a0):\n"
            "        return np.column_stack([at.run(jt, {a: a0, t: e}) for e in np.identity(len(a0))])\n\n"
            "    J_forward = jacobian_by_jvp(jt, a, t, A0)\n"),
        4: ("with exercise(4):\n    def softmax_jacobian(y):\n        y = np.asarray(y, dtype=float)\n"
            "        eye = np.eye(y.shape[-1])\n"
            "        return np.einsum('...i,ij->...ij', y, eye) - np.einsum('...i,...j->...ij', y, y)\n\n"
            "    J_soft = softmax_jacobian(Y0)\n"),
        5: ("with exercise(5):\n    def jvp_by_transposition(y, x, t):\n        u = at.input('u2', y.shape)\n"
            "        back = at.grad(y, x, seed=u)      # J^T u, a function of u\n"
            "        return at.grad(at.sum(back * t), u)   # d/du <J^T u, t> = J t\n\n"
            "    with gT:\n        jt_mine = jvp_by_transposition(yT, xT, tT)\n"),
    },
]
