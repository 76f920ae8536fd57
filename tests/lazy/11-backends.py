"""Lesson 11's students (loaded by tests/test_course.py): LAZY (one shortcut per exercise, and words the judge's
message must show), MORE (attempts on the judge itself, each a submission of its own) and HONEST (right answers in
other styles than the reference's, each a submission that must score full marks)."""

LAZY = {
    # numpy's whole product (BLAS adds the K terms in its own order: the bits show it) and the count typed as the
    # naive kernel's
    1: ("with exercise(1):\n    def blocked_matmul(A, B, bm, bn, bk):\n"
        "        return A @ B, 2 * A.shape[0] * A.shape[1] * B.shape[1]\n", "numpy's @"),
    # numpy's own sum: the right number, in numpy's order
    2: ("with exercise(2):\n    def tree_sum(x, width):\n        return np.sum(x)\n", "numpy's np.sum"),
}

MORE = [
    {   # numpy's product functions by name, and the wgpu backend's real kernel: refused from the source
        1: ("with exercise(1):\n    def blocked_matmul(A, B, bm, bn, bk):\n        M, K = A.shape\n"
            "        N = B.shape[1]\n        reads = M * K * -(-N // bn) + K * N * -(-M // bm)\n"
            "        return np.matmul(A, B), reads\n", "uses .matmul"),
        2: ("with exercise(2):\n    def tree_sum(x, width):\n        with at.Graph():\n"
            "            v = at.input('v', (len(x),))\n"
            "            return at.run([at.sum(v)], {v: x}, backend='wgpu')[0]\n", "uses at"),
    },
    {   # einsum, and asgteach imported under another name
        1: ("with exercise(1):\n    def blocked_matmul(A, B, bm, bn, bk):\n"
            "        return np.einsum('mk,kn->mn', A, B), 0\n", "uses .einsum"),
        2: ("import asgteach as lib\n\nwith exercise(2):\n    def tree_sum(x, width):\n"
            "        return float(np.sum(x))\n", "imports asgteach"),
    },
    {   # the right product, the reads of a kernel without tiles; one running sum (a single invocation's order)
        1: ("with exercise(1):\n    def blocked_matmul(A, B, bm, bn, bk):\n        M, K = A.shape\n"
            "        N = B.shape[1]\n        C = np.zeros((M, N), np.float32)\n"
            "        for k in range(K):\n            C += A[:, k:k + 1] * B[k:k + 1, :]\n"
            "        return C, 2 * M * N * K\n", "a kernel without tiles"),
        2: ("with exercise(2):\n    def tree_sum(x, width):\n"
            "        return np.cumsum(np.asarray(x, np.float32))[-1]\n", "one running sum"),
    },
    {   # each K tile's product summed on its own and added to C at the end (another order); the count of the tiles
        # padded to full size; a float64 tree
        1: ("with exercise(1):\n    def blocked_matmul(A, B, bm, bn, bk):\n        M, K = A.shape\n"
            "        N = B.shape[1]\n        C = np.zeros((M, N), np.float32)\n        reads = 0\n"
            "        for i0 in range(0, M, bm):\n            for j0 in range(0, N, bn):\n"
            "                for k0 in range(0, K, bk):\n"
            "                    a, b = A[i0:i0 + bm, k0:k0 + bk], B[k0:k0 + bk, j0:j0 + bn]\n"
            "                    reads += a.size + b.size\n"
            "                    part = np.zeros((a.shape[0], b.shape[1]), np.float32)\n"
            "                    for k in range(a.shape[1]):\n"
            "                        part += a[:, k:k + 1] * b[k:k + 1, :]\n"
            "                    C[i0:i0 + bm, j0:j0 + bn] += part\n        return C, reads\n",
            "one accumulator per output across all the K tiles"),
        2: ("with exercise(2):\n    def tree_sum(x, width):\n        x = np.asarray(x, np.float64)\n"
            "        v = np.zeros(width)\n        for start in range(0, len(x), width):\n"
            "            part = x[start:start + width]\n            v[:len(part)] += part\n"
            "        s = width // 2\n        while s >= 1:\n            v[:s] += v[s:2 * s]\n            s //= 2\n"
            "        return np.float32(v[0])\n", "float64"),
    },
    {   # the right product, reads counted as if edge tiles were read whole (padding zeros counted); a tree that
        # pairs neighbours
        1: ("with exercise(1):\n    def blocked_matmul(A, B, bm, bn, bk):\n        M, K = A.shape\n"
            "        N = B.shape[1]\n        C = np.zeros((M, N), np.float32)\n"
            "        for k in range(K):\n            C += A[:, k:k + 1] * B[k:k + 1, :]\n"
            "        up = lambda n, t: -(-n // t) * t\n"
            "        reads = (up(M, bm) * up(K, bk) * -(-N // bn)) + (up(K, bk) * up(N, bn) * -(-M // bm))\n"
            "        return C, reads\n", "padded with"),
        2: ("with exercise(2):\n    def tree_sum(x, width):\n        x = np.asarray(x, np.float32)\n"
            "        v = np.zeros(width, np.float32)\n        for start in range(0, len(x), width):\n"
            "            part = x[start:start + width]\n            v[:len(part)] += part\n"
            "        while len(v) > 1:\n            v = v[0::2] + v[1::2]\n        return v[0]\n",
            "pairs neighbours"),
    },
]

# honest answers in other styles than the reference: each list entry a submission that must score full marks
HONEST = [
    {   # K outermost: every workgroup's accumulators live across the whole walk (a dict of blocks), outer products;
        # the reads counted from the tile bounds
        1: ("with exercise(1):\n    def blocked_matmul(A, B, bm, bn, bk):\n        M, K = A.shape\n"
            "        N = B.shape[1]\n"
            "        blocks = {(i, j): np.zeros((min(i + bm, M) - i, min(j + bn, N) - j), np.float32)\n"
            "                  for i in range(0, M, bm) for j in range(0, N, bn)}\n        reads = 0\n"
            "        for k0 in range(0, K, bk):\n            k1 = min(k0 + bk, K)\n"
            "            for (i, j), acc in blocks.items():\n"
            "                i1, j1 = min(i + bm, M), min(j + bn, N)\n"
            "                reads += (i1 - i) * (k1 - k0) + (k1 - k0) * (j1 - j)\n"
            "                for k in range(k0, k1):\n"
            "                    acc += np.multiply.outer(A[i:i1, k], B[k, j:j1])\n"
            "        C = np.zeros((M, N), np.float32)\n        for (i, j), acc in blocks.items():\n"
            "            C[i:i + acc.shape[0], j:j + acc.shape[1]] = acc\n        return C, reads\n"),
        # phase 1 over rows of a zero-padded (rows, width) matrix, one row at a time; phase 2 by recursion
        2: ("with exercise(2):\n    def tree_sum(x, width):\n        x = np.asarray(x, dtype=np.float32)\n"
            "        padded = np.concatenate([x, np.zeros(-len(x) % width, np.float32)]).reshape(-1, width)\n"
            "        v = np.zeros(width, np.float32)\n        for row in padded:\n            v = v + row\n\n"
            "        def fold(v):\n            if len(v) == 1:\n                return v[0]\n"
            "            half = len(v) // 2\n            return fold(v[:half] + v[half:])\n\n"
            "        return fold(v)\n"),
    },
    {   # plain Python over numpy float32 scalars: each output element's dot product, the K loop crossing the tiles
        1: ("with exercise(1):\n    def blocked_matmul(A, B, bm, bn, bk):\n        M, K = A.shape\n"
            "        N = B.shape[1]\n        C = np.zeros((M, N), dtype=np.float32)\n"
            "        row_blocks = [(i, min(i + bm, M)) for i in range(0, M, bm)]\n"
            "        col_blocks = [(j, min(j + bn, N)) for j in range(0, N, bn)]\n"
            "        k_steps = [(k, min(k + bk, K)) for k in range(0, K, bk)]\n"
            "        reads = sum((i1 - i0) * (k1 - k0) + (k1 - k0) * (j1 - j0)\n"
            "                    for i0, i1 in row_blocks for j0, j1 in col_blocks for k0, k1 in k_steps)\n"
            "        for k in range(K):\n"
            "            C += A[:, k][:, None] * B[k][None, :]   # every block's accumulators, this k\n"
            "        return C, reads\n"),
        # the invocations' running sums one element at a time (float32 scalars), the tree on a list
        2: ("with exercise(2):\n    def tree_sum(x, width):\n        v = [np.float32(0.0)] * width\n"
            "        for i, value in enumerate(np.asarray(x, np.float32)):\n"
            "            v[i % width] = np.float32(v[i % width] + value)\n"
            "        s = width // 2\n        while s:\n"
            "            v = [np.float32(v[t] + v[t + s]) for t in range(s)]\n            s //= 2\n"
            "        return v[0]\n"),
    },
]
