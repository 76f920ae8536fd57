"""Lesson 06's students for the graded course (tests/test_course.py): lazy shortcuts, attempts on the
judge, and honest answers in other styles than the reference's."""

# exercise -> (the answer cell as a lazy student writes it, words the check's message must show)
LAZY = {
    1: (('with exercise(1):\n'
         '    def my_log_softmax(z):\n'
         '        return np.log(np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True))\n'),
        'subtract the max first'),
    2: (('Z2 = np.random.default_rng(6).standard_normal((8, 5)) * 3\n'
         'labels2 = np.array([4, 0, 0, 2, 1, 3, 4, 2])\n'
         'with exercise(2):\n'
         '    def cross_entropy_grad(Z, labels):\n'
         '        with at.Graph():\n'
         '            l2 = at.input("logits", Z.shape)\n'
         '            y2 = at.input("labels", labels.shape, dtype="int")\n'
         '            (d2,) = at.grad(at.nn.cross_entropy(l2, y2), [l2])\n'
         '        return at.run(d2, {l2: Z, y2: labels})\n'
         '\n'
         '    dZ2 = cross_entropy_grad(Z2, labels2)\n'),
        'uses at, which a graded answer may not'),
    # a unit active on few rows is called dead
    3: (('with exercise(3):\n'
         '    def dead_units(X, W, b):\n'
         '        return [int(k) for k in np.flatnonzero((X @ W + b > 0).mean(axis=0) < 0.05)]\n'),
        'not dead'),
}

# attempts on the judge itself: each a submission of its own
MORE = [
    {
        1: (('with exercise(1):\n'
             '    def my_log_softmax(z):\n'
             '        import scipy.special\n'
             '        return scipy.special.log_softmax(z, axis=-1)\n'),
            'imports scipy'),
        3: (('with exercise(3):\n'
             '    without = None\n'
             '    def dead_units(X, W, b):\n'
             '        return []\n'),
            'may not'),
    },
    {
        # the bias alone: a very negative bias is called dead
        3: (('with exercise(3):\n'
             '    def dead_units(X, W, b):\n'
             '        return [int(k) for k in np.flatnonzero(b < -2)]\n'),
            'Decide from the batch'),
    },
    {
        # section 2's answer, typed in
        3: (('with exercise(3):\n'
             '    def dead_units(X, W, b):\n'
             '        return [1, 4, 6]\n'),
            'which is wrong about unit'),
    },
]

# honest answers in other styles than the reference: each a submission that must score full marks
HONEST = [
    {
        1: ('with exercise(1):\n'
             '    def my_log_softmax(z):\n'
             '        z = np.asarray(z, dtype=float)\n'
             '        m = np.max(z, axis=-1, keepdims=True)\n'
             '        return z - (m + np.log(np.sum(np.exp(z - m), axis=-1, keepdims=True)))\n'),
        2: ('Z2 = np.random.default_rng(6).standard_normal((8, 5)) * 3\n'
             'labels2 = np.array([4, 0, 0, 2, 1, 3, 4, 2])\n'
             'with exercise(2):\n'
             '    def cross_entropy_grad(Z, labels):\n'
             '        P = np.exp(Z - Z.max(axis=1, keepdims=True))\n'
             '        P = P / P.sum(axis=1, keepdims=True)\n'
             '        P[np.arange(len(labels)), labels] -= 1.0\n'
             '        return P / len(labels)\n'
             '\n'
             '    dZ2 = cross_entropy_grad(Z2, labels2)\n'),
        # from asgteach's gradient, on a graph of its own
        3: ('with exercise(3):\n'
             '    def dead_units(X, W, b):\n'
             '        with at.Graph() as g3:\n'
             "            x3, w3, b3 = at.input('x', X.shape), at.parameter('w', W.shape), at.parameter('b', b.shape)\n"
             '            (dw3,) = at.grad(at.sum(at.relu(x3 @ w3 + b3) ** 2), [w3])\n'
             '        g = at.run(dw3, {x3: X, w3: W, b3: b})\n'
             '        return [k for k in range(g.shape[1]) if not np.any(g[:, k])]\n'),
    },
    {
        1: ('with exercise(1):\n'
             '    def my_log_softmax(z):\n'
             '        z = np.asarray(z, dtype=float)\n'
             '        shifted = z - z.max(axis=-1)[..., None]\n'
             '        return shifted - np.log(np.exp(shifted).sum(axis=-1))[..., None]\n'),
        2: ('Z2 = np.random.default_rng(6).standard_normal((8, 5)) * 3\n'
             'labels2 = np.array([4, 0, 0, 2, 1, 3, 4, 2])\n'
             'with exercise(2):\n'
             '    def cross_entropy_grad(Z, labels):\n'
             '        N, C = Z.shape\n'
             '        logp = Z - Z.max(1, keepdims=True)\n'
             '        logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))\n'
             '        onehot = np.zeros((N, C))\n'
             '        onehot[np.arange(N), labels] = 1\n'
             '        return (np.exp(logp) - onehot) / N\n'
             '\n'
             '    dZ2 = cross_entropy_grad(Z2, labels2)\n'),
        # the number of active rows per unit, in a loop
        3: ('with exercise(3):\n'
             '    def dead_units(X, W, b):\n'
             '        active = (X @ W + b > 0).sum(axis=0)\n'
             '        out = []\n'
             '        for unit, n in enumerate(active):\n'
             '            if n == 0:\n'
             '                out.append(unit)\n'
             '        return out\n'),
    },
]
