"""Lesson 05's students for the graded course (tests/test_course.py): lazy shortcuts, attempts on the
judge, and honest answers in other styles than the reference's."""

# exercise -> (the answer cell as a lazy student writes it, words the check's message must show)
LAZY = {
    1: (('with exercise(1):\n'
         '    def linear_vjp(G, X, W):\n'
         '        return G @ W.T, X.T @ G, G      # section 1\'s rule, typed in\n'),
        'linear_vjp('),
    2: (('with exercise(2):\n'
         '    def matmul_vjp(G, X, W):\n'
         '        return G @ np.swapaxes(W, -1, -2), (np.swapaxes(X, -1, -2) @ G).sum(axis=0)   # section 4\'s case\n'),
        'summed over a broadcast axis'),
    3: (('with exercise(3):\n'
         '    wrong_gradients = [c.name for c in report.inputs if not c.ok]\n'
         '    culprit_ids = [c.node_id for c in report.culprits]\n'),
        'wrong_gradients is not right'),
}

# attempts on the judge itself: each a submission of its own
MORE = [
    {
        1: (('with exercise(1):\n'
             '    def linear_vjp(G, X, W):\n'
             "        return eval('G @ W'), eval('G.T @ X'), G.sum(0)\n"),
            'uses eval'),
        2: (('import asgteach\n'
             'asgteach.grading.checks.check_function = lambda *a, **k: None\n'
             'with exercise(2):\n'
             '    def matmul_vjp(G, X, W):\n'
             '        return None\n'),
            'may not'),
    },
    {   # the library does the work: at.grad inside the function (the rule: numpy only)
        1: (('with exercise(1):\n'
             '    def linear_vjp(G, X, W):\n'
             '        with at.Graph():\n'
             "            x, w, b = at.input('x', X.shape), at.input('w', W.shape), at.input('b', W.shape[:1])\n"
             '            grads = at.grad(at.sum((x @ at.transpose(w, (1, 0)) + b) * at.constant(G)), [x, w, b])\n'
             '        return tuple(at.run(list(grads), {x: X, w: W, b: np.zeros(W.shape[0])}))\n'),
            'numpy'),
        # half the idea: summed over the leading axes only, not over an axis of size 1
        2: (('with exercise(2):\n'
             '    def matmul_vjp(G, X, W):\n'
             '        dX, dW = G @ np.swapaxes(W, -1, -2), np.swapaxes(X, -1, -2) @ G\n'
             '        while dX.ndim > X.ndim:\n'
             '            dX = dX.sum(axis=0)\n'
             '        while dW.ndim > W.ndim:\n'
             '            dW = dW.sum(axis=0)\n'
             '        return dX, dW\n'),
            'should have shape'),
    },
]

# honest answers in other styles than the reference: each a submission that must score full marks
HONEST = [
    {
        1: ('with exercise(1):\n'
             '    def linear_vjp(G, X, W):\n'
             "        return np.einsum('nm,mk->nk', G, W), np.einsum('nm,nk->mk', G, X), np.ones(len(G)) @ G\n"),
        2: ('with exercise(2):\n'
             '    def matmul_vjp(G, X, W):\n'
             '        def reduce(g, shape):\n'
             '            # sum what broadcasting added: the extra leading axes, then every stretched axis of size 1\n'
             '            if g.ndim > len(shape):\n'
             '                g = g.reshape((-1,) + g.shape[g.ndim - len(shape):]).sum(axis=0)\n'
             '            for ax, size in enumerate(shape):\n'
             '                if size == 1 and g.shape[ax] > 1:\n'
             '                    g = g.sum(axis=ax, keepdims=True)\n'
             '            return g\n'
             "        dX = np.einsum('...nm,...km->...nk', G, W)\n"
             "        dW = np.einsum('...nk,...nm->...km', np.broadcast_to(X, G.shape[:-2] + X.shape[-2:]), G)\n"
             '        return reduce(dX, X.shape), reduce(dW, W.shape)\n'),
        3: ('with exercise(3):\n'
             '    with bugs.mystery(5):\n'
             '        rep = at.gradcheck(loss_d, [xd, wd, bd, td, sd], feeds_d)\n'
             '    wrong_gradients = sorted(c.name for c in rep.inputs if not c.ok)\n'
             '    culprit_ids = sorted(c.node_id for c in rep.culprits)\n'),
    },
    {
        1: ('with exercise(1):\n'
             '    def linear_vjp(G, X, W):\n'
             '        n, k = X.shape\n'
             '        dX = np.zeros((n, k))\n'
             '        for i in range(n):                 # one row at a time: Y_i = W X_i + b\n'
             '            dX[i] = W.transpose() @ G[i]\n'
             '        dW = sum(np.outer(G[i], X[i]) for i in range(n))\n'
             '        return dX, dW, G.sum(axis=0)\n'),
        2: ('with exercise(2):\n'
             '    def matmul_vjp(G, X, W):\n'
             '        def back_to(g, shape):\n'
             '            extra = g.ndim - len(shape)\n'
             '            axes = tuple(range(extra)) + tuple(extra + i for i, s in enumerate(shape)\n'
             '                                               if s == 1 and g.shape[extra + i] != 1)\n'
             '            return g.sum(axis=axes).reshape(shape)\n'
             '        return back_to(G @ W.swapaxes(-1, -2), X.shape), back_to(X.swapaxes(-1, -2) @ G, W.shape)\n'),
        3: ('with exercise(3):\n'
             '    inputs_d = [xd, wd, bd, td, sd]\n'
             '    with bugs.mystery(5):\n'
             '        rep = at.gradcheck(loss_d, inputs_d, feeds_d)\n'
             '    wrong_gradients = []\n'
             '    for c in rep.inputs:\n'
             '        if not c.ok:\n'
             '            wrong_gradients.append(c.name)\n'
             '    culprit_ids = list({c.node_id for c in rep.culprits})\n'),
    },
]
