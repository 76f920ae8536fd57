"""Lesson 15's lazy student: the identity rewrite handed in as checkpointing, and the sqrt(N) rule of thumb."""

LAZY = {
    1: ("with exercise(1):\n    def recompute_segment(outputs, segment):\n"
        "        return copy_graph(outputs)   # a new graph, the same gradients... and nothing recomputed\n\n"
        "    mine6 = recompute_segment(outputs6, segment)\n", "recomputes nothing"),
    2: ("with exercise(2):\n    def segment_for_budget(n_layers, budget):\n"
        "        return round(n_layers ** 0.5)   # the sqrt(N) rule, whatever the budget\n\n"
        "    k_36 = segment_for_budget(36, 300 * 1024)\n", "Measure the peak of each k"),
}

# honest answers in other styles than the reference: each list entry a submission that must score full marks
HONEST = [
    {   # find the first backward reader first, then copy; every k tried, the smallest that fits
        1: ("with exercise(1):\n    def recompute_segment(outputs, segment):\n        old = outputs[0].graph\n"
            "        needed = old.ancestors([t.node_id for t in outputs])\n        seg = set(segment)\n"
            "        first = next((nid for nid in needed if old.nodes[nid].phase == 'backward'\n"
            "                      and seg & set(old.nodes[nid].inputs)), None)\n"
            "        new = at.Graph(name=old.name + ' (recomputed)')\n        ids, again = {}, {}\n"
            "        for nid in needed:\n            if nid == first:\n                for s in segment:\n"
            "                    ins = [again[i] if i in again else ids[i] for i in old.nodes[s].inputs]\n"
            "                    again[s] = copy_node(new, old, s, ins, phase='backward', recomputes=s)\n"
            "            node = old.nodes[nid]\n            if node.phase == 'backward':\n"
            "                ins = [again.get(i, ids[i]) for i in node.inputs]\n            else:\n"
            "                ins = [ids[i] for i in node.inputs]\n"
            "            ids[nid] = copy_node(new, old, nid, ins)\n"
            "        return [at.Tensor(new, ids[t.node_id]) for t in outputs]\n\n"
            "    mine6 = recompute_segment(outputs6, segment)\n"),
        2: ("with exercise(2):\n    def segment_for_budget(n_layers, budget):\n"
            "        outputs, layers = mlp_step(n_layers)\n"
            "        fits = [k for k in range(1, n_layers + 1)\n"
            "                if peak_bytes(checkpoint_every(outputs, layers, k)) <= budget]\n"
            "        return min(fits) if fits else None\n\n    k_36 = segment_for_budget(36, 300 * 1024)\n"),
    },
    {   # two small lookups, one for forward readers and one for backward ones; a while loop
        1: ("with exercise(1):\n    def recompute_segment(outputs, segment):\n        old = outputs[0].graph\n"
            "        new = at.Graph(name='rewritten')\n        seg = list(segment)\n        copy_of, twin = {}, {}\n\n"
            "        def fwd(i):\n            return copy_of[i]\n\n        def bwd(i):\n"
            "            return twin.get(i, copy_of[i])\n\n"
            "        for nid in old.ancestors([t.node_id for t in outputs]):\n            node = old.nodes[nid]\n"
            "            if node.phase == 'backward' and not twin and any(i in seg for i in node.inputs):\n"
            "                for s in seg:\n"
            "                    twin[s] = copy_node(new, old, s, [bwd(i) for i in old.nodes[s].inputs],\n"
            "                                        phase='backward', recomputes=s)\n"
            "            pick = bwd if node.phase == 'backward' else fwd\n"
            "            copy_of[nid] = copy_node(new, old, nid, [pick(i) for i in node.inputs])\n"
            "        return [at.Tensor(new, copy_of[t.node_id]) for t in outputs]\n\n"
            "    mine6 = recompute_segment(outputs6, segment)\n"),
        2: ("with exercise(2):\n    def segment_for_budget(n_layers, budget):\n"
            "        outputs, layers = mlp_step(n_layers)\n        k = 1\n        while k <= n_layers:\n"
            "            if peak_bytes(checkpoint_every(outputs, layers, k)) <= budget:\n                return k\n"
            "            k += 1\n        return None\n\n    k_36 = segment_for_budget(36, 300 * 1024)\n"),
    },
]

# attempts on the judge itself: each a submission of its own (tests/test_course.py's MORE)
MORE = [
    {   # the check's own rewrite, reached through the checker module; its recompute check switched off
        1: ("with exercise(1):\n    recompute_segment = lambda outputs, segment: lesson15.checkpointed(outputs, "
            "[segment])\n    mine6 = recompute_segment(outputs6, segment)\n", "may not"),
        2: ("import asgteach\nwith exercise(2):\n    asgteach.lessons.lesson15.budget_check = lambda f: None\n"
            "    def segment_for_budget(n_layers, budget):\n        return 1\n\n    k_36 = 1\n", "may not"),
    },
    {   # the lesson's own checkpoint_every, which calls the check's rewrite, fed one "layer" that is the segment
        1: ("with exercise(1):\n    def recompute_segment(outputs, segment):\n"
            "        return checkpoint_every(outputs, [list(segment) + [-1]], 1)\n\n"
            "    mine6 = recompute_segment(outputs6, segment)\n", "checkpointed, which the exercise asks you to write"),
    },
    {   # a default argument holding a helper, and a closure: the body only copies (the cell names the helper)
        1: ("with exercise(1):\n    def make(rewrite=checkpoint_every):\n"
            "        def recompute_segment(outputs, segment):\n            return copy_graph(outputs)\n"
            "        return recompute_segment\n    recompute_segment = make()\n"
            "    mine6 = recompute_segment(outputs6, segment)\n", "nor checkpoint_every, which calls it"),
    },
    {   # the helper under another name, bound before `with exercise(1)`: the rule reads the whole cell
        1: ("every = checkpoint_every\nwith exercise(1):\n    def recompute_segment(outputs, segment):\n"
            "        return every(outputs, [list(segment) + [-1]], 1)\n\n"
            "    mine6 = recompute_segment(outputs6, segment)\n", "checkpointed, which the exercise asks you to write"),
    },
]
