"""Lesson 02's students for the graded course (tests/test_course.py): lazy shortcuts, attempts on the
judge, and honest answers in other styles than the reference's."""

# exercise -> (the answer cell as a lazy student writes it, words the check's message must show)
LAZY = {
    2: (('with exercise(2):\n'
         '    def evaluate(graph, feeds):\n'
         '        ids = [n.id for n in graph.nodes]\n'
         '        return dict(zip(ids, at.run([at.Tensor(graph, i) for i in ids], feeds)))\n'),
        'evaluate must call each node'),
    3: (('A5, V5 = np.arange(15.0).reshape(5, 3), np.array([1.0, 2.0, 3.0, 4.0, 5.0])\n'
         'with exercise(3):\n'
         '    with at.Graph(name="fixed") as g_fix:\n'
         '        a5 = at.input("a", (5, 3))\n'
         '        v5 = at.input("v", (5,))\n'
         '        rows_scaled = at.constant(A5 * V5[:, None])\n'
         '    rows_value = A5 * V5[:, None]\n'),
        'at fresh input values'),
}

# attempts on the judge itself: each a submission of its own
MORE = [
    {
        2: (('with exercise(2):\n'
             '    def evaluate(graph, feeds):\n'
             "        vals = globals()['at'].run([at.Tensor(graph, n.id) for n in graph.nodes], feeds)\n"
             '        return {n.id: v for n, v in zip(graph.nodes, vals)}\n'),
            'may not'),
    },
    {   # the graph run by a backend's reference interpreter: `without(at.run...)` is inert in a graded course (the
        # answer runs in the sandbox), and the exercise's rule (no whole-graph evaluator) is what refuses it
        2: (('from asgteach.backends.reference import interpret\n'
             'with exercise(2):\n'
             '    def evaluate(graph, feeds):\n'
             '        ids = [n.id for n in graph.nodes]\n'
             '        return dict(zip(ids, interpret(graph, ids, feeds)))\n'),
            'evaluate must call each node'),
    },
    {   # at.run held under another name, in exercise 1's cell (which exercise 2's rule does not read): the check runs
        # evaluate under `without` where evaluate runs (the sandbox, in a graded course), which sees the call
        1: (('with exercise(1):\n'
             '    go_all = at.run\n'),
            'did not define'),
        2: (('with exercise(2):\n'
             '    def evaluate(graph, feeds):\n'
             '        ids = [n.id for n in graph.nodes]\n'
             '        return dict(zip(ids, go_all([at.Tensor(graph, i) for i in ids], feeds)))\n'),
            'evaluate must call each node'),
    },
]

# honest answers in other styles than the reference: each a submission that must score full marks
HONEST = [
    {
        1: ('U, K = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 0.25])\n'
             'with exercise(1):\n'
             "    with at.Graph(name='exercise 1') as g_ex:\n"
             "        u = at.input('u', (3,))\n"
             "        k = at.parameter('k', (3,))\n"
             '        s = at.sum(at.sigmoid(k * u + at.constant(0.5)))\n'
             '    s_value = at.run(s, {u: U, k: K})\n'),
        2: ('with exercise(2):\n'
             '    def evaluate(graph, feeds):\n'
             '        out = {}\n'
             '        for n in graph.nodes:\n'
             "            if n.op == 'constant':\n"
             '                out[n.id] = graph.constants[n.id]\n'
             "            elif n.op in ('input', 'parameter'):\n"
             '                out[n.id] = np.array(feeds[n.name], dtype=float)\n'
             '            else:\n'
             '                args = [out[i] for i in n.inputs]\n'
             '                out[n.id] = at.ops.spec(n.op).numpy(*args, **n.attrs)\n'
             '        return out\n'),
        3: ('A5, V5 = np.arange(15.0).reshape(5, 3), np.array([1.0, 2.0, 3.0, 4.0, 5.0])\n'
             'with exercise(3):\n'
             "    with at.Graph(name='fixed') as g_fix:\n"
             "        a5 = at.input('a', (5, 3))\n"
             "        v5 = at.input('v', (5,))\n"
             '        rows_scaled = v5.reshape(5, 1) * a5\n'
             '    rows_value = at.run(rows_scaled, {a5: A5, v5: V5})\n'),
    },
    {
        1: ('U, K = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 0.25])\n'
             'with exercise(1):\n'
             "    with at.Graph(name='exercise 1') as g_ex:\n"
             "        u = at.input('u', (3,))\n"
             "        k = at.parameter('k', (3,))\n"
             '        pre = u * k + 0.5\n'
             '        s = at.sum(at.sigmoid(pre))\n'
             '    s_value = float(at.run(s, {u: U, k: K}))\n'),
        2: ('with exercise(2):\n'
             '    def evaluate(graph, feeds):\n'
             '        values = {}\n'
             '        for node in graph.nodes:\n'
             '            kind = node.op\n'
             "            if kind in ('input', 'parameter'):\n"
             '                values[node.id] = np.asarray(feeds[node.name], dtype=np.float64)\n'
             '                continue\n'
             "            if kind == 'constant':\n"
             '                values[node.id] = np.asarray(graph.constants[node.id])\n'
             '                continue\n'
             '            kernel = at.ops.spec(kind).numpy\n'
             '            values[node.id] = kernel(*(values[i] for i in node.inputs), **node.attrs)\n'
             '        return values\n'),
        3: ('A5, V5 = np.arange(15.0).reshape(5, 3), np.array([1.0, 2.0, 3.0, 4.0, 5.0])\n'
             'with exercise(3):\n'
             "    with at.Graph(name='fixed') as g_fix:\n"
             "        a5 = at.input('a', (5, 3))\n"
             "        v5 = at.input('v', (5,))\n"
             '        rows_scaled = a5 * at.reshape(v5, (5, 1))\n'
             '    rows_value = at.run(rows_scaled, {a5: A5, v5: V5})\n'),
    },
]
