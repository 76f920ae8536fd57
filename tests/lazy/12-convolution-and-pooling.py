"""Lesson 12's students (loaded by tests/test_course.py): LAZY (one shortcut per exercise, and words the judge's
message must show), MORE (attempts on the judge itself, each a submission of its own) and HONEST (right answers in
other styles than the reference's, each a submission that must score full marks)."""

LAZY = {
    1: ("with exercise(1):\n    def conv_out_size(size, kernel, stride, padding, dilation):\n"
        "        with at.Graph():\n"
        '            y = at.conv2d(at.input("x", (1, 1, size, size)), at.input("w", (1, 1, kernel, kernel)),\n'
        "                          stride=stride, padding=padding, dilation=dilation)\n"
        "        return y.shape[2]\n", "the library's conv2d"),
    3: ("X5 = np.array([[5.0, 5.0, 1.0, 2.0], [0.0, 5.0, 3.0, 0.0], [7.0, 1.0, 2.0, 2.0], [1.0, 7.0, 2.0, 2.0]])\n"
        "G5 = np.array([[1.0, 2.0], [3.0, 4.0]])\nwith exercise(3):\n    dX5 = np.zeros((4, 4))\n", "dX5 is wrong"),
}

MORE = [{
    2: ("with exercise(2):\n    def grad_weight_np(x, gy, kh, kw):\n        import torch\n"
        "        return torch.nn.grad.conv2d_weight(x, (gy.shape[1], x.shape[1], kh, kw), gy).numpy()\n",
        "exercise 2"),
    3: ("with exercise(3):\n    from asgteach.lessons.lesson_checks import max_pool_routing\n"
        "    dX5 = np.zeros((4, 4))\n", "may not"),
}]

HONEST = [{
    1: ("import math\nwith exercise(1):\n    def conv_out_size(size, kernel, stride, padding, dilation):\n"
        "        span = dilation * (kernel - 1) + 1\n"
        "        return math.floor((size + 2 * padding - span) / stride) + 1\n"),
    2: ("with exercise(2):\n    def grad_weight_np(x, gy, kh, kw):\n        N, C, H, W = x.shape\n"
        "        O = gy.shape[1]\n"
        "        oh, ow = gy.shape[2], gy.shape[3]\n        dw = np.zeros((O, C, kh, kw))\n"
        "        for a in range(kh):\n"
        "            for b in range(kw):\n                patch = x[:, :, a:a + oh, b:b + ow]\n"
        "                dw[:, :, a, b] = np.tensordot(gy, patch, axes=([0, 2, 3], [0, 2, 3]))\n"
        "        return dw\n"),
    3: ("X5 = np.array([[5.0, 5.0, 1.0, 2.0], [0.0, 5.0, 3.0, 0.0], [7.0, 1.0, 2.0, 2.0], [1.0, 7.0, 2.0, 2.0]])\n"
        "G5 = np.array([[1.0, 2.0], [3.0, 4.0]])\nwith exercise(3):\n    dX5 = np.zeros((4, 4))\n"
        "    for i in range(2):\n        for j in range(2):\n"
        "            win = X5[2 * i:2 * i + 2, 2 * j:2 * j + 2]\n"
        "            r, c = divmod(int(np.argmax(win)), 2)   # the first maximum, row by row\n"
        "            dX5[2 * i + r, 2 * j + c] = G5[i, j]\n"),
}, {
    1: ("with exercise(1):\n    def conv_out_size(size, kernel, stride, padding, dilation):\n"
        "        reach = (kernel - 1) * dilation\n"
        "        return (size + padding + padding - reach - 1) // stride + 1\n"),
    2: ("with exercise(2):\n    def grad_weight_np(x, gy, kh, kw):\n        oh, ow = gy.shape[-2:]\n"
        "        cols = np.stack([x[:, :, a:a + oh, b:b + ow] for a in range(kh) for b in range(kw)], axis=2)\n"
        "        dw = np.einsum('noij,ncpij->ocp', gy, cols)\n"
        "        return dw.reshape(gy.shape[1], x.shape[1], kh, kw)\n"),
    3: ("X5 = np.array([[5.0, 5.0, 1.0, 2.0], [0.0, 5.0, 3.0, 0.0], [7.0, 1.0, 2.0, 2.0], [1.0, 7.0, 2.0, 2.0]])\n"
        "G5 = np.array([[1.0, 2.0], [3.0, 4.0]])\nwith exercise(3):\n"
        "    # top left: 5 first at (0, 0); top right: 3 at (1, 2); bottom left: 7 first at (2, 0); bottom right: 2"
        " at (2, 2)\n"
        "    dX5 = np.zeros((4, 4))\n    dX5[0, 0], dX5[1, 2], dX5[2, 0], dX5[2, 2] = G5.ravel()\n"),
}]
