"""Lesson 12's students (loaded by tests/test_course.py): LAZY (one shortcut per exercise, and words the judge's
message must show), MORE (attempts on the judge itself, each a submission of its own) and HONEST (right answers in
other styles than the reference's, each a submission that must score full marks)."""

#: the two arrays the answer cell defines before its exercise (the cell is replaced whole)
X5_G5 = ("X5 = np.array([[5.0, 5.0, 1.0, 2.0], [0.0, 5.0, 3.0, 0.0], [7.0, 1.0, 2.0, 2.0], [1.0, 7.0, 2.0, 2.0]])\n"
         "G5 = np.array([[1.0, 2.0], [3.0, 4.0]])\n")

LAZY = {
    # each layer's span added up, the strides forgotten: right for stride 1 only
    1: ("with exercise(1):\n    def receptive_field(layers):\n"
        "        return 1 + sum(d * (k - 1) for k, s, d in layers)\n\n    rf_cnn = 4\n", "the product of the strides"),
    # the lesson's dX5 worked out on paper and typed in as the function's answer
    3: (X5_G5 + "with exercise(3):\n    def max_pool_grad(x, g):\n"
        "        return np.array([[1.0, 0, 0, 0], [0, 0, 2.0, 0], [3.0, 0, 4.0, 0], [0, 0, 0, 0]])\n\n"
        "    dX5 = max_pool_grad(X5, G5)\n", "max_pool_grad(<array"),
}

MORE = [{
    # the field measured with the library's conv2d, as the check does: exercise 1's rule
    1: ("with exercise(1):\n    def receptive_field(layers):\n        n = 200\n        with at.Graph():\n"
        "            x = at.input('x', (1, 1, n, n))\n            y = x\n            for k, s, d in layers:\n"
        "                y = at.conv2d(y, at.constant(np.ones((1, 1, k, k))), stride=s, dilation=d)\n"
        "            (dx,) = at.grad(at.sum(y), [x])\n"
        "        rows = np.flatnonzero(at.run(dx, {x: np.ones((1, 1, n, n))})[0, 0].sum(axis=1))\n"
        "        return int(rows[-1] - rows[0] + 1)\n\n    rf_cnn = receptive_field([(3, 1, 1), (2, 2, 1)])\n",
        "with arithmetic"),
    2: ("with exercise(2):\n    def grad_weight_np(x, gy, kh, kw):\n        import torch\n"
        "        return torch.nn.grad.conv2d_weight(x, (gy.shape[1], x.shape[1], kh, kw), gy).numpy()\n",
        "exercise 2"),
    # autograd's own answer inside the "by hand" function
    3: (X5_G5 + "with exercise(3):\n    def max_pool_grad(x, g):\n        with at.Graph():\n"
        "            xi, gi = at.input('x', (1, 1) + x.shape), at.input('g', (1, 1) + g.shape)\n"
        "            (d,) = at.grad(at.sum(at.max_pool2d(xi, 2) * gi), [xi])\n"
        "        return at.run(d, {xi: x[None, None], gi: g[None, None]})[0, 0]\n\n"
        "    dX5 = max_pool_grad(X5, G5)\n", "uses at"),
}, {
    3: ("with exercise(3):\n    from asgteach.lessons.lesson12 import max_pool_grad_check\n"
        "    max_pool_grad = lambda x, g: np.zeros(x.shape)\n    dX5 = np.zeros((4, 4))\n", "may not"),
}]

HONEST = [{
    # from the last layer down: a window of r pixels of layer l is (r - 1) * s + span pixels of layer l - 1
    1: ("with exercise(1):\n    def receptive_field(layers):\n        r = 1\n"
        "        for kernel, stride, dilation in reversed(layers):\n"
        "            r = (r - 1) * stride + dilation * (kernel - 1) + 1\n        return r\n\n"
        "    rf_cnn = receptive_field([(3, 1, 1), (2, 2, 1)])\n"),
    2: ("with exercise(2):\n    def grad_weight_np(x, gy, kh, kw):\n        N, C, H, W = x.shape\n"
        "        O = gy.shape[1]\n"
        "        oh, ow = gy.shape[2], gy.shape[3]\n        dw = np.zeros((O, C, kh, kw))\n"
        "        for a in range(kh):\n"
        "            for b in range(kw):\n                patch = x[:, :, a:a + oh, b:b + ow]\n"
        "                dw[:, :, a, b] = np.tensordot(gy, patch, axes=([0, 2, 3], [0, 2, 3]))\n"
        "        return dw\n"),
    3: (X5_G5 + "with exercise(3):\n    def max_pool_grad(x, g):\n        dx = np.zeros((len(x), len(x[0])))\n"
        "        for i in range(len(g)):\n            for j in range(len(g[0])):\n"
        "                best = None\n"
        "                for r in (0, 1):            # row by row: a later equal value does not win\n"
        "                    for c in (0, 1):\n"
        "                        if best is None or x[2 * i + r][2 * j + c] > x[best[0]][best[1]]:\n"
        "                            best = (2 * i + r, 2 * j + c)\n"
        "                dx[best] += g[i][j]\n        return dx\n\n"
        "    dX5 = max_pool_grad(X5, G5)\n"),
}, {
    # the strides' products listed first, then one sum (math.prod); rf_cnn worked out on paper
    1: ("import math\n\nwith exercise(1):\n    def receptive_field(layers):\n"
        "        jumps = [math.prod(s for _, s, _ in layers[:i]) for i in range(len(layers))]\n"
        "        return 1 + sum(d * (k - 1) * j for (k, _, d), j in zip(layers, jumps))\n\n    rf_cnn = 4\n"),
    2: ("with exercise(2):\n    def grad_weight_np(x, gy, kh, kw):\n        oh, ow = gy.shape[-2:]\n"
        "        cols = np.stack([x[:, :, a:a + oh, b:b + ow] for a in range(kh) for b in range(kw)], axis=2)\n"
        "        dw = np.einsum('noij,ncpij->ocp', gy, cols)\n"
        "        return dw.reshape(gy.shape[1], x.shape[1], kh, kw)\n"),
    3: (X5_G5 + "with exercise(3):\n    def max_pool_grad(x, g):\n        H, W = x.shape\n"
        "        windows = x.reshape(H // 2, 2, W // 2, 2).transpose(0, 2, 1, 3).reshape(H // 2, W // 2, 4)\n"
        "        winner = np.eye(4)[windows.argmax(axis=-1)]   # one-hot of the first maximum, row by row\n"
        "        routed = winner * g[..., None]\n"
        "        return routed.reshape(H // 2, W // 2, 2, 2).transpose(0, 2, 1, 3).reshape(H, W)\n\n"
        "    dX5 = max_pool_grad(X5, G5)\n"),
}]
