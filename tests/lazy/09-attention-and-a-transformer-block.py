"""Lesson 09's students (loaded by tests/test_course.py): LAZY (one shortcut per exercise, and words the judge's
message must show), MORE (attempts on the judge itself, each a submission of its own) and HONEST (right answers in
other styles than the reference's, each a submission that must score full marks)."""

LAZY = {
    2: ("with exercise(2):\n    def count_block_params(d_model, n_heads, d_hidden):\n        with at.Graph():\n"
        "            blk = at.nn.TransformerBlock(d_model, n_heads, d_hidden=d_hidden)\n"
        "        return sum(int(np.prod(p.shape)) for p in blk.parameters())\n", "TransformerBlock.__init__"),
    3: ("with exercise(3):\n    diagnosis = {1: 'correct', 2: 'mask after softmax', 3: 'no scale'}\n",
        "Test the verdict you gave"),
}

MORE = [{
    3: ("with exercise(3):\n    from asgteach.lessons import suspects\n"
        "    diagnosis = {k: v for k, v in suspects.__dict__.items() if k == 'TRUTH'}\n", "may not"),
}]

HONEST = [{
    1: ("Q3 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])\nK3 = np.array([[1.0, 1.0], [2.0, 0.0], [0.0, 3.0]])\n"
        "with exercise(1):\n    def causal_weights(q, k):\n        T, d = q.shape\n"
        "        s = (q @ k.T) / np.sqrt(d)\n"
        "        s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)\n"
        "        e = np.exp(s - s.max(axis=1, keepdims=True))\n        return e / e.sum(axis=1, keepdims=True)\n\n"
        "    my_weights = causal_weights(Q3, K3)\n"),
    2: ("with exercise(2):\n    def count_block_params(d_model, n_heads, d_hidden):\n"
        "        linear = lambda i, o: i * o + o\n"
        "        return 2 * (2 * d_model) + 4 * linear(d_model, d_model) + linear(d_model, d_hidden)"
        " + linear(d_hidden, d_model)\n"),
    3: ("with exercise(3):\n    diagnosis = dict(zip([1, 2, 3], ['mask after softmax', 'correct', 'no scale']))\n"),
}, {
    1: ("Q3 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])\nK3 = np.array([[1.0, 1.0], [2.0, 0.0], [0.0, 3.0]])\n"
        "with exercise(1):\n    def causal_weights(q, k):\n        T = len(q)\n        out = np.zeros((T, T))\n"
        "        for i in range(T):\n"
        "            s = np.array([q[i] @ k[j] for j in range(i + 1)]) / np.sqrt(q.shape[1])\n"
        "            e = np.exp(s - s.max())\n            out[i, :i + 1] = e / e.sum()\n        return out\n\n"
        "    my_weights = causal_weights(Q3, K3)\n"),
    2: ("with exercise(2):\n    def count_block_params(d_model, n_heads, d_hidden):\n        total = 0\n"
        "        total += 4 * d_model                               # two layer norms: weight and bias\n"
        "        total += 4 * d_model * (d_model + 1)               # q, k, v, out projections\n"
        "        total += d_hidden * (d_model + 1) + d_model * (d_hidden + 1)\n        return total\n"),
    3: ("with exercise(3):\n    diagnosis = {}\n    diagnosis[2] = 'correct'\n    diagnosis[1] = 'mask after softmax'\n"
        "    diagnosis[3] = 'no scale'\n"),
}]
