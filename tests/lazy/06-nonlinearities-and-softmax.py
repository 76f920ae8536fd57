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
             '    dead_units = []\n'
             '    without = None\n'),
            'may not'),
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
        3: ('b_random = np.random.default_rng(3).normal(-1.0, 1.5, size=8)\n'
             'with exercise(3):\n'
             '    g = at.run(dw_dead, {xd: X_batch, wd: W_hidden, bd: b_random})\n'
             '    dead_units = [k for k in range(g.shape[1]) if not np.any(g[:, k])]\n'),
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
        3: ('b_random = np.random.default_rng(3).normal(-1.0, 1.5, size=8)\n'
             'with exercise(3):\n'
             '    pre = X_batch @ W_hidden + b_random\n'
             '    dead_units = [int(k) for k in np.flatnonzero((pre <= 0).all(axis=0))]\n'),
    },
]
