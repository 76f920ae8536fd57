"""Lesson 01's students for the graded course (tests/test_course.py): lazy shortcuts, attempts on the
judge, and honest answers in other styles than the reference's."""

# exercise -> (the answer cell as a lazy student writes it, words the check's message must show)
LAZY = {
    2: (('with exercise(2):\n'
         '    def numerical_gradient(f, x, h=1e-6):\n'
         '        return 3 * x ** 2 + np.array([x[1], x[0], 0.0])\n'),
        'numerical_gradient(another f, x)'),
}

# attempts on the judge itself: each a submission of its own
MORE = [
    {
        1: (('with exercise(1):\n'
             '    import sys\n'
             '    def central_difference(f, x, h):\n'
             "        return sys.modules['numpy'].gradient(f(x))\n"),
            'imports sys'),
        2: (('with exercise(2):\n'
             '    def numerical_gradient(f, x, h=1e-6):\n'
             "        return getattr(__import__('asgteach').lessons, 'numerical_gradient')\n"),
            'may not'),
    },
]

# honest answers in other styles than the reference: each a submission that must score full marks
HONEST = [
    {
        1: ('with exercise(1):\n'
             '    def central_difference(f, x, h):\n'
             '        return (f(x + h) - f(x - h)) * (0.5 / h)\n'),
        2: ('with exercise(2):\n'
             '    def numerical_gradient(f, x, h=1e-6):\n'
             '        grad = []\n'
             '        for e in np.eye(len(x)):\n'
             '            grad.append((f(x + h * e) - f(x - h * e)) / (2 * h))\n'
             '        return np.array(grad)\n'),
        3: ('with exercise(3):\n'
             '    errors = [abs(float(central32(np.sin, 1.0, h)) - np.cos(1.0)) for h in hs32]\n'
             '    k = min(range(len(errors)), key=errors.__getitem__)\n'
             '    best_h32 = hs32[k]\n'
             '    best_digits32 = int(-np.log10(errors[k]) // 1)\n'),
    },
    {
        1: ('with exercise(1):\n'
             '    def central_difference(f, x, h):\n'
             '        forward, backward = f(x + h), f(x - h)\n'
             '        return (forward - backward) / h / 2\n'),
        2: ('with exercise(2):\n'
             '    def numerical_gradient(f, x, h=1e-6):\n'
             '        x = np.array(x, dtype=float)\n'
             '        g = np.empty_like(x)\n'
             '        for i in range(x.size):\n'
             '            old = x[i]\n'
             '            x[i] = old + h\n'
             '            up = f(x)\n'
             '            x[i] = old - h\n'
             '            down = f(x)\n'
             '            x[i] = old\n'
             '            g[i] = (up - down) / (2 * h)\n'
             '        return g\n'),
        3: ('with exercise(3):\n'
             '    err = np.abs(np.array([central32(np.sin, 1.0, h) for h in hs32], dtype=float) - np.cos(1.0))\n'
             '    best_h32 = hs32[int(np.argmin(err))]\n'
             '    best_digits32 = int(np.floor(-np.log10(np.min(err))))\n'),
    },
]
