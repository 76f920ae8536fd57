"""Lesson 03's students (loaded by tests/test_course.py): LAZY (one shortcut per exercise, and words the judge's
message must show), MORE (attempts on the judge itself, each a submission of its own) and HONEST (right answers in
other styles than the reference's, each a submission that must score full marks)."""

LAZY = {
    1: ("P, Q = 0.3, -2.0\nwith exercise(1):\n    def chain_rule_grads(p, q):\n"
        "        g_of = lambda p, q: (p + q) * np.tanh(p)\n"
        "        return ((g_of(p + 1e-6, q) - g_of(p - 1e-6, q)) / 2e-6,\n"
        "                (g_of(p, q + 1e-6) - g_of(p, q - 1e-6)) / 2e-6)\n\n"
        "    dg_dp, dg_dq = chain_rule_grads(P, Q)\n", "finite differences give"),
    3: ("with exercise(3):\n    bug_op = None\n    def fanout_nodes(graph):\n"
        "        return [1, 2]   # section 5's printout\n"
        "    def c_lost(A, B):\n        return -1.5     # B, typed in\n", "fanout_nodes(<graph"),
}

MORE = [
    {   # asgteach's own gradient inside the "by hand" function; the check switched off by rebinding its module
        1: ("P, Q = 0.3, -2.0\nwith exercise(1):\n    def chain_rule_grads(p, q):\n        with at.Graph():\n"
            "            a, b = at.input('p', ()), at.input('q', ())\n"
            "            gp, gq = at.grad((a + b) * at.tanh(a), [a, b])\n"
            "        return tuple(float(v) for v in at.run([gp, gq], {a: p, b: q}))\n\n"
            "    dg_dp, dg_dq = chain_rule_grads(P, Q)\n", "uses at"),
        2: ("import asgteach.lessons as L\nL.lesson03.more_rules_check = lambda *a: None\n"
            "with exercise(2):\n    MORE_RULES = dict(RULES)\n", "may not"),
        3: ("with exercise(3):\n    bug_op = None\n    lesson03.fanout_check = lambda f: None\n"
            "    lesson03.lost_contribution = lambda f: None\n"
            "    fanout_nodes = lambda graph: []\n    c_lost = lambda A, B: 0.0\n", "may not"),
    },
    {   # a complex-step derivative: exact to round-off, and not the chain rule
        1: ("P, Q = 0.3, -2.0\nwith exercise(1):\n    def chain_rule_grads(p, q):\n        h = 1e-20\n"
            "        g = lambda p, q: (p + q) * np.tanh(p)\n"
            "        return g(p + 1j * h, q).imag / h, g(p, q + 1j * h).imag / h\n\n"
            "    dg_dp, dg_dq = chain_rule_grads(P, Q)\n", "complex"),
        # the reverse-mode sweep redefined to hand the work to at.grad: the check does not call the notebook's
        2: ("with exercise(2):\n    MORE_RULES = dict(RULES)\n\n"
            "    def backward(graph, values, y_id, rules=None):\n"
            "        return {n.id: 0.0 for n in graph.nodes}\n", "no rule for sub"),
    },
    {   # a backward rule by complex step: exact to round-off, but no derivative was written
        2: ("with exercise(2):\n    def _cs(f):\n        return lambda x: (f(x + 1e-30j)).imag / 1e-30\n\n"
            "    MORE_RULES = {**RULES, 'sub': lambda g, ins, out: (g, -g),\n"
            "                  'div': lambda g, ins, out: (g / ins[1], -g * ins[0] / ins[1] ** 2),\n"
            "                  'exp': lambda g, ins, out: (g * _cs(np.exp)(ins[0]),)}\n", "complex"),
    },
    {   # backward rules measured by central differences: right to ~8 digits
        2: ("with exercise(2):\n    def _fd(f, x, h=1e-6):\n        return (f(x + h) - f(x - h)) / (2 * h)\n\n"
            "    MORE_RULES = {**RULES,\n"
            "                  'sub': lambda g, ins, out: (g * _fd(lambda a: a - ins[1], ins[0]),\n"
            "                                          g * _fd(lambda b: ins[0] - b, ins[1])),\n"
            "                  'div': lambda g, ins, out: (g * _fd(lambda a: a / ins[1], ins[0]),\n"
            "                                          g * _fd(lambda b: ins[0] / b, ins[1])),\n"
            "                  'exp': lambda g, ins, out: (g * _fd(np.exp, ins[0]),)}\n", "exact to round-off"),
    },
]

HONEST = [
    {
        1: ("P, Q = 0.3, -2.0\nwith exercise(1):\n    def chain_rule_grads(p, q):\n        t = np.tanh(p)\n"
            "        s = p + q\n        # g = s t; s = p + q; t = tanh p: p reaches g through s and through t\n"
            "        return np.array([t + s * (1.0 - t * t), t])\n\n    dg_dp, dg_dq = chain_rule_grads(P, Q)\n"),
        2: ("with exercise(2):\n    def sub_rule(g, ins, out):\n        return g, -g\n\n"
            "    def div_rule(g, ins, out):\n        a, b = ins\n        return g / b, -g * a / b ** 2\n\n"
            "    def exp_rule(g, ins, out):\n        return (g * np.exp(ins[0]),)\n\n"
            "    MORE_RULES = dict(RULES)\n    MORE_RULES.update(sub=sub_rule, div=div_rule, exp=exp_rule)\n"),
        3: ("with exercise(3):\n    def fanout_nodes(graph):\n        readers = {}\n"
            "        for node in graph.nodes:\n            if node.phase != 'forward':\n                continue\n"
            "            for i in node.inputs:   # x * x reads x twice: two contributions\n"
            "                readers[i] = readers.get(i, 0) + 1\n"
            "        return [i for i, k in sorted(readers.items()) if k > 1 and graph.nodes[i].phase == 'forward']\n\n"
            "    def c_lost(A, B):\n        return float(B)   # the lost contribution is c * b's: d(c b)/dc = b\n\n"
            "    bug_op = None\n"),
    },
    {
        1: ("import math\nP, Q = 0.3, -2.0\nwith exercise(1):\n    def chain_rule_grads(p, q):\n"
            "        grads = {'p': 0.0, 'q': 0.0}\n        s, t = p + q, math.tanh(p)\n"
            "        s_bar, t_bar = t, s\n        grads['p'] += s_bar\n        grads['q'] += s_bar\n"
            "        grads['p'] += t_bar * (1 - t ** 2)\n        return [grads['p'], grads['q']]\n\n"
            "    dg_dp, dg_dq = chain_rule_grads(P, Q)\n"),
        2: ("with exercise(2):\n    MORE_RULES = {name: rule for name, rule in RULES.items()}\n"
            "    MORE_RULES['sub'] = lambda g, ins, out: (1.0 * g, -1.0 * g)\n"
            "    MORE_RULES['div'] = lambda g, ins, out: (g * (1 / ins[1]), g * (-ins[0] / (ins[1] * ins[1])))\n"
            "    MORE_RULES['exp'] = lambda g, ins, out: (out * g,)\n"),
        3: ("with exercise(3):\n    def fanout_nodes(graph):\n        cons = graph.consumers()\n        out = []\n"
            "        for n in graph.nodes:\n"
            "            fwd = [c for c in cons[n.id] if graph.nodes[c].phase == 'forward']\n"
            "            if n.phase == 'forward' and len(fwd) >= 2:\n                out.append(n.id)\n"
            "        return out\n\n    def c_lost(A, B):   # measured: correct c-bar minus the buggy one\n"
            "        with bugs.mystery(3):\n            with at.Graph():\n"
            "                a_, b_ = at.input('a', ()), at.input('b', ())\n                c_ = a_ * b_\n"
            "                (dc_bug,) = at.grad(at.tanh(c_) + c_ * b_, [c_])\n"
            "        buggy = float(at.run(dc_bug, {a_: A, b_: B}))\n"
            "        return (1 - np.tanh(A * B) ** 2) + B - buggy\n\n    bug_op = None\n"),
    },
]
