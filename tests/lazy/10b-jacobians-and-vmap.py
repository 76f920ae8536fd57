"""Lesson 10b's students (loaded by tests/test_course.py): LAZY (one shortcut per exercise, and words the judge's
message must show), MORE (attempts on the judge itself, each a submission of its own) and HONEST (right answers in
other styles than the reference's, each a submission that must score full marks). Exercise 2 was lesson 10's 4 until
lesson 10 was split; exercise 1 (a banded Jacobian in three JVP runs) replaced lesson 10's 3 (issue 36); exercise 3
(per-example gradients with at.vmap) is new."""

LAZY = {
    # section 1's way: one JVP run per column, n runs
    1: ("with exercise(1):\n    def banded_jacobian(jvp, n):\n"
        "        return np.stack([jvp(e) for e in np.eye(n)], axis=1)\n\n"
        "    J_band = banded_jacobian(lambda t_: at.run(jt_band, {xb: XB, tb: t_}), n_band)\n",
        "one run per column is section 1's way"),
    2: ("with exercise(2):\n    def softmax_vjp(y, g):\n        with at.Graph():\n"
        '            z_ = at.input("z", np.shape(y))\n'
        "            (d_,) = at.grad(at.sum(at.softmax(z_) * at.constant(g)), [z_])\n"
        "        return at.run(d_, {z_: np.log(y)})\n\n"
        "    G0 = np.linspace(-1.0, 2.0, len(Y0))\n"
        "    vjp_soft = G0 @ J_formula\n", "which the exercise asks you to write yourself"),
    # a loop over the examples: right numbers, one copy of the loss and its gradient per example
    3: ("with exercise(3):\n    def clipped_grad_sum(loss_fn, w, X, Y, C):\n        total = None\n"
        "        for i in range(X.shape[0]):\n            g = at.grad(loss_fn(w, X[i], Y[i]), w)\n"
        "            g = g * at.minimum(1.0, C / at.sqrt(at.sum(g * g)))\n"
        "            total = g if total is None else total + g\n        return total\n\n"
        "    with gp:\n        C_in = at.input('C', ())\n"
        "        clipped_mine = clipped_grad_sum(logistic_loss, w, X, Y, C_in)\n",
        "one copy of the loss and its gradient per example"),
}

MORE = [
    {   # a closure over the library's jvp; the batch's gradient (the sum) in place of the per-example ones
        2: ("with exercise(2):\n    def make():\n        import asgteach as lib\n"
            "        f = lib.jvp\n        def softmax_vjp(y, g):\n            return f\n"
            "        return softmax_vjp\n"
            "    softmax_vjp = make()\n"
            "    G0 = np.linspace(-1.0, 2.0, len(Y0))\n"
            "    vjp_soft = None\n", "may not"),
        3: ("with exercise(3):\n    def clipped_grad_sum(loss_fn, w, X, Y, C):\n"
            "        return at.grad(at.sum(at.vmap(lambda x, y: loss_fn(w, x, y))(X, Y)), w)\n\n"
            "    with gp:\n        C_in = at.input('C', ())\n"
            "        clipped_mine = clipped_grad_sum(logistic_loss, w, X, Y, C_in)\n", "unclipped"),
    },
    {   # the batch's gradient repeated for every example (the right shape); the lesson's own array handed back
        3: ("with exercise(3):\n    def clipped_grad_sum(loss_fn, w, X, Y, C):\n"
            "        g = at.grad(at.sum(at.vmap(lambda x, y: loss_fn(w, x, y))(X, Y)), w)\n"
            "        return g * at.minimum(1.0, C / at.sqrt(at.sum(g * g)))\n\n"
            "    with gp:\n        C_in = at.input('C', ())\n"
            "        clipped_mine = clipped_grad_sum(logistic_loss, w, X, Y, C_in)\n",
            "clipped once, after summing"),
        # one run with every column at once, read as a diagonal (the columns DO share rows)
        1: ("with exercise(1):\n    def banded_jacobian(jvp, n):\n        return np.diag(jvp(np.ones(n)))\n\n"
            "    J_band = banded_jacobian(lambda t_: at.run(jt_band, {xb: XB, tb: t_}), n_band)\n",
            "every entry outside the band is 0"),
    },
    {   # g^T J through J itself: right on the small rows, 320 GB a row on the large ones
        2: ("with exercise(2):\n    def softmax_vjp(y, g):\n"
            "        J = y[..., :, None] * np.eye(y.shape[-1]) - y[..., :, None] * y[..., None, :]\n"
            "        return np.einsum('...i,...ij->...j', g, J)\n\n"
            "    G0 = np.linspace(-1.0, 2.0, len(Y0))\n"
            "    vjp_soft = softmax_vjp(Y0, G0)\n", "ran out of memory"),
    },
    {   # section 7's per-example gradients, already computed, returned whatever the arguments
        3: ("with exercise(3):\n    def clipped_grad_sum(loss_fn, w, X, Y, C):\n        return g_batch\n\n"
            "    with gp:\n        C_in = at.input('C', ())\n"
            "        clipped_mine = clipped_grad_sum(logistic_loss, w, X, Y, C_in)\n", "Tensor of X's graph"),
    },
    {   # the check switched off in the submission's copy of the lesson module, and a loop over the examples: the
        # check runs in the judge with its own module (the hands-off rule does not name lesson10b yet: "exercise 3"
        # is in the node-count message of today and in the rule's message once it does)
        3: ("with exercise(3):\n    lesson10b.clipped_grad_sum_check = lambda fn: None\n\n"
            "    def clipped_grad_sum(loss_fn, w, X, Y, C):\n"
            "        G = at.vmap(lambda x, y: at.grad(loss_fn(w, x, y), w))(X, Y)\n"
            "        return at.sum(G * (C / at.sqrt(at.sum(G * G, axis=tuple(range(1, G.ndim)), keepdims=True))), "
            "axis=0)\n\n"
            "    with gp:\n        C_in = at.input('C', ())\n"
            "        clipped_mine = clipped_grad_sum(logistic_loss, w, X, Y, C_in)\n", "exercise 3"),
    },
]

HONEST = [
    {   # loops that fill the matrices; stacked rows; a named function for one example, in_axes spelled out
        # the three runs first, then every band entry read from the run of its column's colour
        1: ("with exercise(1):\n    def banded_jacobian(jvp, n):\n"
            "        runs = [jvp(np.array([1.0 if j % 3 == c else 0.0 for j in range(n)])) for c in range(3)]\n"
            "        J = np.zeros((n, n))\n        for i in range(n):\n"
            "            for j in (i - 1, i, i + 1):\n                if 0 <= j < n:\n"
            "                    J[i, j] = runs[j % 3][i]\n        return J\n\n"
            "    J_band = banded_jacobian(lambda t_: at.run(jt_band, {xb: XB, tb: t_}), n_band)\n"),
        2: ("with exercise(2):\n    def softmax_vjp(y, g):\n        y, g = np.asarray(y, float), np.asarray(g, float)\n"
            "        if y.ndim == 1:\n            return y * g - y * np.dot(y, g)\n"
            "        return np.stack([r * s - r * np.dot(r, s) for r, s in zip(y, g)])\n\n"
            "    G0 = np.linspace(-1.0, 2.0, len(Y0))\n"
            "    vjp_soft = softmax_vjp(Y0, G0)\n"),
        3: ("with exercise(3):\n    def clipped_grad_sum(loss_fn, w, X, Y, C):\n        def one_example(x, y):\n"
            "            (g,) = at.grad(loss_fn(w, x, y), [w])\n"
            "            size = at.sqrt(at.sum(g ** 2))\n"
            "            return g * at.minimum(C / size, 1.0)\n\n"
            "        return at.sum(at.vmap(one_example, in_axes=(0, 0))(X, Y), axis=0)\n\n"
            "    with gp:\n        C_in = at.input('C', ())\n"
            "        clipped_mine = clipped_grad_sum(logistic_loss, w, X, Y, C_in)\n"),
    },
    {   # column_stack; einsum; a copy of w per example, vmapped with it, differentiated once
        # a mask of the band per colour, with numpy: J = sum_c mask_c * (run_c broadcast along the rows)
        1: ("with exercise(1):\n    def banded_jacobian(jvp, n):\n        i, j = np.indices((n, n))\n"
            "        band = np.abs(i - j) <= 1\n        J = np.zeros((n, n))\n        for c in range(3):\n"
            "            if c >= n:\n                break\n            colour = (j % 3 == c) & band\n"
            "            J += colour * jvp((np.arange(n) % 3 == c).astype(float))[:, None]\n        return J\n\n"
            "    J_band = banded_jacobian(lambda t_: at.run(jt_band, {xb: XB, tb: t_}), n_band)\n"),
        2: ("with exercise(2):\n    def softmax_vjp(y, g):\n"
            "        weighted_mean = np.einsum('...i,...i->...', y, g)[..., None]   # y . g, per row\n"
            "        return y * (g - weighted_mean)\n\n"
            "    G0 = np.linspace(-1.0, 2.0, len(Y0))\n"
            "    vjp_soft = softmax_vjp(Y0, G0)\n"),
        3: ("with exercise(3):\n    def clipped_grad_sum(loss_fn, w, X, Y, C):\n        n = X.shape[0]\n"
            "        W = at.broadcast_to(w, (n, *w.shape))        # a copy of w for every example\n"
            "        losses = at.vmap(loss_fn)(W, X, Y)            # example i's loss, with its own copy\n"
            "        G = at.grad(at.sum(losses), W)                # row i: d(sum)/dW[i], example i's gradient\n"
            "        flat = at.reshape(G, (n, -1))\n"
            "        scale = at.minimum(1.0, C / at.sqrt(at.sum(flat * flat, axis=1)))   # (n,)\n"
            "        return at.reshape(at.sum(flat * at.reshape(scale, (n, 1)), axis=0), w.shape)\n\n"
            "    with gp:\n        C_in = at.input('C', ())\n"
            "        clipped_mine = clipped_grad_sum(logistic_loss, w, X, Y, C_in)\n"),
    },
]
