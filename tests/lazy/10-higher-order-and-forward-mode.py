"""Lesson 10's students (loaded by tests/test_course.py): LAZY (one shortcut per exercise, and words the judge's
message must show), MORE (attempts on the judge itself, each a submission of its own) and HONEST (right answers in
other styles than the reference's, each a submission that must score full marks). The Jacobian exercises moved to
lesson 10b with their sections (tests/lazy/10b-jacobians-and-vmap.py)."""

LAZY = {
    1: ("XS = np.array([-1.0, 0.0, 0.5, 2.0])\nwith exercise(1):\n    with at.Graph(name='by hand') as g3:\n"
        "        x3 = at.input('x', (4,))\n        th = at.tanh(x3)\n"
        "        d3 = -2 * (1 - th ** 2) * (1 - 3 * th ** 2)\n    third = at.run(d3, {x3: XS})\n",
        "holds no backward node"),
    2: ("with exercise(2):\n    def hessian_from_hvp(hv, x, v, x0):\n        return H_exact\n\n    H = H_exact\n",
        "hessian_from_hvp("),
    3: ("with exercise(3):\n    def jvp_by_transposition(y, x, t):\n        return at.jvp(y, x, t)\n\n"
        "    with gT:\n        jt_mine = jvp_by_transposition(yT, xT, tT)\n", "calls asgteach.jvp"),
}

MORE = [
    {   # a default argument over the library's jvp, and numpy's comparison switched off from the answer cell
        3: ("with exercise(3):\n    def jvp_by_transposition(y, x, t, _f=at.jvp):\n        return _f(y, x, t)\n\n"
            "    with gT:\n        jt_mine = jvp_by_transposition(yT, xT, tT)\n", "jvp"),
        1: ("XS = np.array([-1.0, 0.0, 0.5, 2.0])\nnp.allclose = lambda *a, **k: True\n"
            "np.isclose = lambda *a, **k: True\n"
            "with exercise(1):\n    with at.Graph() as g3:\n        x3 = at.input('x', (4,))\n"
            "        d3 = at.grad(at.sum(at.tanh(x3)), x3)\n    third = np.zeros(4)\n", "exercise 1"),
    },
]

HONEST = [
    {   # a scalar input, one run per point (the text allows it); a loop that fills the matrix; list-form grads
        1: ("XS = np.array([-1.0, 0.0, 0.5, 2.0])\nwith exercise(1):\n    with at.Graph(name='third, scalar') as g3:\n"
            "        x3 = at.input('x', ())\n        d1 = at.grad(at.tanh(x3), x3)\n        d2 = at.grad(d1, x3)\n"
            "        d3 = at.grad(d2, x3)\n    third = [float(at.run(d3, {x3: v})) for v in XS]\n"),
        2: ("with exercise(2):\n    def hessian_from_hvp(hv, x, v, x0):\n        n = len(x0)\n"
            "        H = np.zeros((n, n))\n        for i in range(n):\n            e = np.zeros(n)\n"
            "            e[i] = 1.0\n            H[:, i] = at.run(hv, {x: x0, v: e})\n        return H\n\n"
            "    H = hessian_from_hvp(hv, xh, v, X0)\n"),
        3: ("with exercise(3):\n    def jvp_by_transposition(y, x, t):\n"
            "        u = at.input('cotangent', y.shape)\n        (vjp,) = at.grad(y, [x], seed=u)\n"
            "        (jt,) = at.grad(at.sum(t * vjp), [u])\n        return jt\n\n"
            "    with gT:\n        jt_mine = jvp_by_transposition(yT, xT, tT)\n"),
    },
    {   # a vector input differentiated in a loop; column_stack; the trick with the names spelled out
        1: ("XS = np.array([-1.0, 0.0, 0.5, 2.0])\nwith exercise(1):\n    with at.Graph(name='third, vector') as g3:\n"
            "        x3 = at.input('x', (4,))\n        d = at.tanh(x3)\n        for _ in range(3):\n"
            "            (d,) = at.grad(at.sum(d), [x3])\n        d3 = d\n    third = at.run(d3, {x3: XS})\n"),
        2: ("with exercise(2):\n    def hessian_from_hvp(hv, x, v, x0):\n"
            "        return np.column_stack([at.run(hv, {x: x0, v: col}) for col in np.identity(x0.shape[0])])\n\n"
            "    H = hessian_from_hvp(hv, xh, v, X0)\n"),
        3: ("with exercise(3):\n    def jvp_by_transposition(y, x, t):\n        u = at.input('u2', y.shape)\n"
            "        back = at.grad(y, x, seed=u)      # J^T u, a function of u\n"
            "        return at.grad(at.sum(back * t), u)   # d/du <J^T u, t> = J t\n\n"
            "    with gT:\n        jt_mine = jvp_by_transposition(yT, xT, tT)\n"),
    },
]
