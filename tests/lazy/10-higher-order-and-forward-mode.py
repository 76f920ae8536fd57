"""Lesson 10's students (loaded by tests/test_course.py): LAZY (one shortcut per exercise, and words the judge's
message must show), MORE (attempts on the judge itself, each a submission of its own) and HONEST (right answers in
other styles than the reference's, each a submission that must score full marks). The Jacobian exercises moved to
lesson 10b with their sections (tests/lazy/10b-jacobians-and-vmap.py)."""

LAZY = {
    1: ("XS = np.array([-1.0, 0.0, 0.5, 2.0])\nwith exercise(1):\n    with at.Graph(name='by hand') as g3:\n"
        "        x3 = at.input('x', (4,))\n        th = at.tanh(x3)\n"
        "        d3 = -2 * (1 - th ** 2) * (1 - 3 * th ** 2)\n    third = at.run(d3, {x3: XS})\n",
        "holds no backward node"),
    # H formed column by column (section 2's HVP run once per e_i), then numpy's eigenvalues: n calls
    2: ("with exercise(2):\n    def top_curvature(hvp, n):\n"
        "        H = np.stack([hvp(e) for e in np.eye(n)], axis=1)\n"
        "        eig = np.linalg.eigvalsh(H)\n        return eig[np.argmax(np.abs(eig))]\n\n"
        "    sharpness = np.linalg.eigvalsh(H_exact)[-1]\n", "forming H takes n calls"),
    3: ("with exercise(3):\n    def jvp_by_transposition(y, xs, ts):\n        return at.jvp(y, xs[0], ts[0])\n\n"
        "    with gT:\n        jt_mine = jvp_by_transposition(yT, [xT], [tT])\n", "calls asgteach.jvp"),
}

MORE = [
    {   # |H v| for the size (the sign lost at a saddle); section 4's trick for the first input only
        2: ("with exercise(2):\n    def top_curvature(hvp, n):\n        q = np.ones(n)\n"
            "        for _ in range(80):\n            q = hvp(q)\n            q = q / np.linalg.norm(q)\n"
            "        return float(np.linalg.norm(hvp(q)))\n\n"
            "    sharpness = top_curvature(lambda u: at.run(hv, {xh: X0, v: u}), n)\n", "keeps its sign"),
        3: ("with exercise(3):\n    def jvp_by_transposition(y, xs, ts):\n        u = at.input('u', y.shape)\n"
            "        return at.grad(at.sum(at.grad(y, xs[0], seed=u) * ts[0]), u)\n\n"
            "    with gT:\n        jt_mine = jvp_by_transposition(yT, [xT], [tT])\n", "every input's share is added"),
    },
    {   # one product H v read as the answer; the trick once per input (four sweeps for two inputs)
        2: ("with exercise(2):\n    def top_curvature(hvp, n):\n        q = np.ones(n) / np.sqrt(n)\n"
            "        return float(q @ hvp(q))\n\n    sharpness = 5.0\n", "does not point along the sharpest"),
        3: ("with exercise(3):\n    def jvp_by_transposition(y, xs, ts):\n        total = None\n"
            "        for x, t in zip(xs, ts):\n            u = at.input('u', y.shape)\n"
            "            part = at.grad(at.sum(at.grad(y, x, seed=u) * t), u)\n"
            "            total = part if total is None else total + part\n        return total\n\n"
            "    with gT:\n        jt_mine = jvp_by_transposition(yT, [xT], [tT])\n", "reverse sweeps"),
    },
    {   # a default argument over the library's jvp, and numpy's comparison switched off from the answer cell
        3: ("with exercise(3):\n    def jvp_by_transposition(y, xs, ts, _f=at.jvp):\n"
            "        return _f(y, xs[0], ts[0])\n\n"
            "    with gT:\n        jt_mine = jvp_by_transposition(yT, [xT], [tT])\n", "jvp"),
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
        # power iteration until the Rayleigh quotient stops moving (a call budget kept by hand)
        2: ("with exercise(2):\n    def top_curvature(hvp, n):\n"
            "        q = np.random.default_rng(7).standard_normal(n)\n        q = q / np.linalg.norm(q)\n"
            "        hq = hvp(q)\n        lam = q @ hq\n        for _ in range(90):\n"
            "            q = hq / np.linalg.norm(hq)\n            hq = hvp(q)\n            new = q @ hq\n"
            "            if abs(new - lam) < 1e-14 * abs(new):\n                return float(new)\n"
            "            lam = new\n        return float(lam)\n\n"
            "    sharpness = top_curvature(lambda u: at.run(hv, {xh: X0, v: u}), n)\n"),
        3: ("with exercise(3):\n    def jvp_by_transposition(y, xs, ts):\n"
            "        u = at.input('cotangent', y.shape)\n        vjps = at.grad(y, xs, seed=u)\n"
            "        s = sum(at.sum(t * g) for g, t in zip(vjps, ts))\n"
            "        (jt,) = at.grad(s, [u])\n        return jt\n\n"
            "    with gT:\n        jt_mine = jvp_by_transposition(yT, [xT], [tT])\n"),
    },
    {   # a vector input differentiated in a loop; column_stack; the trick with the names spelled out
        1: ("XS = np.array([-1.0, 0.0, 0.5, 2.0])\nwith exercise(1):\n    with at.Graph(name='third, vector') as g3:\n"
            "        x3 = at.input('x', (4,))\n        d = at.tanh(x3)\n        for _ in range(3):\n"
            "            (d,) = at.grad(at.sum(d), [x3])\n        d3 = d\n    third = at.run(d3, {x3: XS})\n"),
        # the iterate normalised by its largest entry; the sign read off the last step's ratio
        2: ("with exercise(2):\n    def top_curvature(hvp, n):\n        q = np.linspace(1.0, 2.0, n)\n"
            "        for _ in range(70):\n            q = hvp(q)\n            q = q / np.abs(q).max()\n"
            "        hq = hvp(q)\n        return float(np.dot(q, hq) / np.dot(q, q))\n\n"
            "    sharpness = top_curvature(lambda u: at.run(hv, {xh: X0, v: u}), n)\n"),
        3: ("with exercise(3):\n    def jvp_by_transposition(y, xs, ts):\n        u = at.input('u2', y.shape)\n"
            "        backs = at.grad(y, list(xs), seed=u)      # J_i^T u, functions of u\n"
            "        inner = at.sum(backs[0] * ts[0])\n"
            "        for b, t in zip(backs[1:], ts[1:]):\n            inner = inner + at.sum(b * t)\n"
            "        return at.grad(inner, u)               # d/du sum_i <J_i^T u, t_i> = sum_i J_i t_i\n\n"
            "    with gT:\n        jt_mine = jvp_by_transposition(yT, [xT], [tT])\n"),
    },
]
