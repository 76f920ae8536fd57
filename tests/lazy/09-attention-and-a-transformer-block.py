"""Lesson 09's students (loaded by tests/test_course.py): LAZY (one shortcut per exercise, and words the judge's
message must show), MORE (attempts on the judge itself, each a submission of its own) and HONEST (right answers in
other styles than the reference's, each a submission that must score full marks)."""

LAZY = {
    2: ("with exercise(2):\n    def count_block_params(d_model, n_heads, d_hidden):\n        with at.Graph():\n"
        "            blk = at.nn.TransformerBlock(d_model, n_heads, d_hidden=d_hidden)\n"
        "        return sum(int(np.prod(p.shape)) for p in blk.parameters())\n", "count by hand, from the description"),
    # section 7's verdicts read off by suspect number: the check's own implementations are none of the suspects
    3: ("with exercise(3):\n    def verdict(attention, q, k, mask):\n"
        "        for n, word in {1: 'mask after softmax', 2: 'correct', 3: 'no scale'}.items():\n"
        "            if attention is suspect[n]:\n                return word\n"
        "        return 'correct'\n", "Test the verdict you gave"),
}

MORE = [
    {   # the truth, reached through the suspects' module
        3: ("with exercise(3):\n    from asgteach.lessons import suspects\n"
            "    def verdict(attention, q, k, mask):\n        return 'correct'\n"
            "    diagnosis = {k: v for k, v in suspects.__dict__.items() if k == 'TRUTH'}\n", "may not"),
    },
    {   # the kind read out of the check's own implementation (a closure) instead of tested
        3: ("with exercise(3):\n    def verdict(attention, q, k, mask):\n"
            "        kinds = [c.cell_contents for c in attention.__closure__]\n"
            "        return next(x for x in kinds if isinstance(x, str))\n", "may not"),
    },
    {   # a block built without the name `at`: the class of section 4's block, in a graph of the lesson's
        2: ("with exercise(2):\n    def count_block_params(d_model, n_heads, d_hidden):\n"
            "        with g_block:\n            blk = type(block)(d_model, n_heads, d_hidden=d_hidden)\n"
            "        return sum(p.size for p in blk.parameters())\n", "count by hand, from the description"),
    },
    {   # the same verdict for everything, and the old answer (three words typed in) beside it
        3: ("with exercise(3):\n    diagnosis = {1: 'mask after softmax', 2: 'correct', 3: 'no scale'}\n"
            "    def verdict(attention, q, k, mask):\n        return 'correct'\n", "is not 'correct'"),
    },
]

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
    # every hypothesis modelled in numpy; the verdict is the one the weights match
    3: ("with exercise(3):\n    def verdict(attention, q, k, mask):\n        T, d = q.shape[-2:]\n"
        "        with at.Graph():\n"
        "            qi, ki, vi = at.input('q', q.shape), at.input('k', k.shape), at.input('v', (T, T))\n"
        "            out = attention(qi, ki, vi, mask)\n"
        "        w = at.run(out, {qi: q, ki: k, vi: np.eye(T)})\n"
        "        raw = np.einsum('...id,...jd->...ij', q, k)\n\n"
        "        def soft(s):\n            e = np.exp(s - s.max(axis=-1, keepdims=True))\n"
        "            return e / e.sum(axis=-1, keepdims=True)\n\n"
        "        models = {'correct': soft(raw / np.sqrt(d) + mask), 'no scale': soft(raw + mask),\n"
        "                  'mask after softmax': soft(raw / np.sqrt(d)) * (mask == 0)}\n"
        "        return min(models, key=lambda name: np.abs(models[name] - w).max())\n\n"
        "    for n in (1, 2, 3):\n        print(n, verdict(suspect[n], Q, K, causal))\n"),
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
    # two runs: v = a column of ones gives the row sums, a random v the output to compare with the reference's
    3: ("with exercise(3):\n    def verdict(attention, q, k, mask):\n        n_tok = q.shape[-2]\n"
        "        ones, rand = np.ones((n_tok, 1)), np.random.default_rng(7).standard_normal((n_tok, 3))\n"
        "        outs = []\n        for v_np in (ones, rand):\n            with at.Graph():\n"
        "                qi, ki = at.input('q', q.shape), at.input('k', k.shape)\n"
        "                vi = at.input('v', v_np.shape)\n"
        "                outs.append(at.run(attention(qi, ki, vi, mask), {qi: q, ki: k, vi: v_np}))\n"
        "        row_sums, out = outs\n"
        "        if np.max(np.abs(row_sums - 1.0)) > 1e-6:\n            return 'mask after softmax'\n"
        "        scores = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1]) + mask\n"
        "        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))\n"
        "        weights = weights / weights.sum(axis=-1, keepdims=True)\n"
        "        return 'correct' if np.allclose(out, weights @ rand) else 'no scale'\n"),
}]
