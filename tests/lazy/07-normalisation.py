"""Lesson 07's students for the graded course (tests/test_course.py): lazy shortcuts, attempts on the
judge, and honest answers in other styles than the reference's."""

# exercise -> (the answer cell as a lazy student writes it, words the check's message must show)
LAZY = {
    1: (('with exercise(1):\n'
         '    def my_layer_norm(x, w, b, eps=1e-5):\n'
         '        return at.run(at.layer_norm(at.constant(x), at.constant(w), at.constant(b), eps=eps), {})\n'),
        'uses at, which a graded answer may not'),
}

# attempts on the judge itself: each a submission of its own
MORE = [
    {
        1: (('with exercise(1):\n'
             '    def my_layer_norm(x, w, b, eps=1e-5, _ln=at.layer_norm):\n'
             '        return at.run(_ln(at.constant(x), at.constant(w), at.constant(b), eps=eps), {})\n'),
            'uses at, which a graded answer may not: with numpy only'),
        2: (('with exercise(2):\n'
             "    my_layer_norm_dx = lambda x, w, g, eps=1e-5: vars()['g']\n"),
            'uses vars'),
    },
]

# honest answers in other styles than the reference: each a submission that must score full marks
HONEST = [
    {
        1: ('with exercise(1):\n'
             '    def my_layer_norm(x, w, b, eps=1e-5):\n'
             '        mu = np.mean(x, axis=1, keepdims=True)\n'
             '        var = np.var(x, axis=1, keepdims=True)\n'
             '        return w * (x - mu) / np.sqrt(var + eps) + b\n'),
        2: ('with exercise(2):\n'
             '    def my_layer_norm_dx(x, w, g, eps=1e-5):\n'
             '        n = x.shape[-1]\n'
             '        mu = x.mean(-1, keepdims=True)\n'
             '        inv = (x.var(-1, keepdims=True) + eps) ** -0.5\n'
             '        xhat = (x - mu) * inv\n'
             '        dxhat = g * w\n'
             '        return inv / n * (n * dxhat - dxhat.sum(-1, keepdims=True) '
             '- xhat * (dxhat * xhat).sum(-1, keepdims=True))\n'),
        3: ('with exercise(3):\n'
             '    def my_batch_norm(x, eps=1e-5):\n'
             '        mean = at.mean(x, axis=0, keepdims=True)\n'
             '        var = at.mean((x - mean) ** 2, axis=0, keepdims=True)\n'
             '        return (x - mean) / at.sqrt(var + eps)\n'),
    },
    {
        1: ('with exercise(1):\n'
             '    def my_layer_norm(x, w, b, eps=1e-5):\n'
             '        out = np.empty_like(x, dtype=float)\n'
             '        for r in range(x.shape[0]):\n'
             '            row = x[r] - x[r].mean()\n'
             '            out[r] = row / np.sqrt((row ** 2).mean() + eps) * w + b\n'
             '        return out\n'),
        2: ('with exercise(2):\n'
             '    def my_layer_norm_dx(x, w, g, eps=1e-5):\n'
             '        xc = x - x.mean(-1, keepdims=True)\n'
             '        s = np.sqrt((xc ** 2).mean(-1, keepdims=True) + eps)\n'
             '        y = xc / s\n'
             '        gy = g * w\n'
             '        return (gy - gy.mean(-1, keepdims=True) - y * (gy * y).mean(-1, keepdims=True)) / s\n'),
        3: ('with exercise(3):\n'
             '    def my_batch_norm(x, eps=1e-5):\n'
             '        n = x.shape[0]\n'
             '        centred = x - at.sum(x, axis=0, keepdims=True) * (1.0 / n)\n'
             '        return centred * (at.mean(centred * centred, axis=0, keepdims=True) + eps) ** -0.5\n'),
    },
]
