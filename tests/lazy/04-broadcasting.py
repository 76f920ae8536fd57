"""Lesson 04's students for the graded course (tests/test_course.py): lazy shortcuts, attempts on the
judge, and honest answers in other styles than the reference's."""

# exercise -> (the answer cell as a lazy student writes it, words the check's message must show)
LAZY = {
    2: (('with exercise(2):\n'
         '    def div_culprits(graph):\n'
         '        return [(4, 1)]      # the softmax\'s culprit, as gradcheck printed it\n'),
        "div_culprits(<the check's graph"),
}

# attempts on the judge itself: each a submission of its own
MORE = [
    {   # the diagnosis handed to the tool: gradcheck run inside the function, with the bug planted
        2: (('with exercise(2):\n'
             '    def div_culprits(graph):\n'
             "        ins = [at.Tensor(graph, n.id) for n in graph.nodes if n.op == 'input']\n"
             "        loss = at.Tensor(graph, max(n.id for n in graph.nodes if n.phase == 'forward'))\n"
             '        feeds = {t: np.ones(t.shape) + 0.5 for t in ins}\n'
             '        with bugs.mystery(4):\n'
             '            rep = at.gradcheck(loss, ins, feeds)\n'
             '        return [(c.node_id, c.input_index) for c in rep.culprits]\n'),
            "the tool's diagnosis"),
    },
    {   # half the diagnosis: every div input whose shape differs from the output's (a single copy, a constant too)
        2: (('with exercise(2):\n'
             '    def div_culprits(graph):\n'
             "        return [(n.id, k) for n in graph.nodes if n.op == 'div' and n.phase == 'forward'\n"
             '                for k, i in enumerate(n.inputs) if graph.nodes[i].shape != n.shape]\n'),
            'it does not blame'),
    },
    {
        1: (('with exercise(1):\n'
             '    def my_sum_to(g, shape):\n'
             '        return g\n'
             '    check_function = print\n'),
            'may not'),
        3: (('with exercise(3):\n'
             '    from asgteach.ops import registry\n'
             "    fixed_div_vjp = registry.spec('div').vjp\n"),
            "the library's own backward rule"),
    },
    {   # the library's rule through the registry (a handle in a graded course: check_vjp_rule's identity test
        # cannot see it there, the exercise's rule does), then one derived by at.grad from the other ops' rules
        3: (('with exercise(3):\n'
             "    fixed_div_vjp = at.ops.REGISTRY['div'].vjp\n"),
            "the library's own backward rule"),
    },
    {
        3: (('with exercise(3):\n'
             '    def fixed_div_vjp(c, g):\n'
             '        a, b = c.inputs\n'
             '        return tuple(at.grad(at.sum(g * a * b ** -1.0), [a, b]))\n'),
            'at.grad would derive it'),
    },
    {   # the library's rule taken in exercise 2's cell (which exercise 3's rule does not read): the check compares
        # the rule by identity with the library's rules where it runs (handles of the sandbox's, in a graded course)
        2: (('with exercise(2):\n'
             "    lib = at.ops.REGISTRY['div'].vjp\n"),
            'did not define'),
        3: (('with exercise(3):\n'
             '    fixed_div_vjp = lib\n'),
            "the library's own backward rule"),
    },
]

# honest answers in other styles than the reference: each a submission that must score full marks
HONEST = [
    {
        1: ('with exercise(1):\n'
             '    def my_sum_to(g, shape):\n'
             '        g = np.asarray(g)\n'
             '        while g.ndim > len(shape):\n'
             '            g = g.sum(axis=0)\n'
             '        for k, n in enumerate(shape):\n'
             '            if n == 1 and g.shape[k] != 1:\n'
             '                g = g.sum(axis=k, keepdims=True)\n'
             '        return g\n'),
        2: ('with exercise(2):\n'
             '    def div_culprits(graph):\n'
             '        def reached(i):      # does a gradient reach node i? (it depends on an input)\n'
             '            node = graph.nodes[i]\n'
             "            return node.op == 'input' or any(reached(j) for j in node.inputs)\n"
             '        out = []\n'
             '        for node in graph.nodes:\n'
             "            if node.op == 'div' and node.phase == 'forward':\n"
             '                for k, i in enumerate(node.inputs):\n'
             '                    if int(np.prod(graph.nodes[i].shape)) < int(np.prod(node.shape)) and reached(i):\n'
             '                        out.append([node.id, k])\n'
             '        return out\n'),
        3: ('with exercise(3):\n'
             '    def fixed_div_vjp(c, g):\n'
             '        a, b = c.inputs\n'
             '        out = []\n'
             '        out.append(at.sum_to(g * (1.0 / b), a.shape) if c.needs[0] else None)\n'
             '        out.append(at.sum_to(at.neg(g * a / (b * b)), b.shape) if c.needs[1] else None)\n'
             '        return tuple(out)\n'),
    },
    {
        1: ('with exercise(1):\n'
             '    def my_sum_to(g, shape):\n'
             '        g = np.asarray(g)\n'
             '        lead = tuple(range(g.ndim - len(shape)))\n'
             '        g = g.sum(axis=lead) if lead else g\n'
             '        axes = tuple(k for k in range(len(shape)) if shape[k] == 1 < g.shape[k])\n'
             '        return g.sum(axis=axes, keepdims=True).reshape(shape) if axes else g.reshape(shape)\n'),
        2: ('with exercise(2):\n'
             '    def div_culprits(graph):\n'
             '        blamed = set()\n'
             '        for node in graph.nodes:\n'
             "            if node.phase == 'forward' and node.op == 'div':\n"
             '                for k, i in enumerate(node.inputs):\n'
             '                    src = graph.nodes[i]\n'
             '                    copies = node.size // max(src.size, 1)   # how many times the input was used\n'
             "                    if copies > 1 and src.op != 'constant':\n"
             '                        blamed.add((node.id, k))\n'
             '        return sorted(blamed)\n'),
        3: ('with exercise(3):\n'
             '    def fixed_div_vjp(c, g):\n'
             '        a, b = c.inputs\n'
             '        ga = gb = None\n'
             '        if c.needs[0]:\n'
             '            ga = at.sum_to(g / b, a.shape)\n'
             '        if c.needs[1]:\n'
             '            gb = at.sum_to(-(g * c.out) / b, b.shape)\n'
             '        return ga, gb\n'),
    },
]
