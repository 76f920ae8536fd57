"""Lesson 13's students (loaded by tests/test_course.py): LAZY (one shortcut per exercise, and words the judge's
message must show), MORE (attempts on the judge itself, each a submission of its own) and HONEST (right answers in
other styles than the reference's, each a submission that must score full marks)."""

LAZY = {
    # every value kept to the end: the running total of what was ever made
    1: ("with exercise(1):\n    def bytes_alive(plan, itemsize):\n"
        "        total = sum(n.size for n in plan.leaves + plan.constants) * itemsize\n        rows = []\n"
        "        for step in plan.steps:\n            total += step.node.size * itemsize\n"
        "            rows.append(total)\n        return rows\n\n    peak64 = 119904\n",
        "nothing is ever freed"),
    # every forward step's value, as if the whole forward pass were kept
    2: ("with exercise(2):\n    def kept_for_backward(plan):\n"
        "        return [s.node.id for s in plan.steps if s.node.phase == 'forward']\n\n    kept_bytes = 18944\n",
        "only forward steps read"),
    3: ("with exercise(3):\n    def my_fusible(plan):\n"
        "        return [7, 10, 26, 28]   # copied from the printed chains\n\n    bytes_saved = 0\n",
        "my_fusible(<plan of"),
}

MORE = [
    {   # the plan's own liveness, which the exercise replays: exercise 1's rule
        1: ("with exercise(1):\n    def bytes_alive(plan, itemsize):\n"
            "        return [row['live_bytes'] for row in plan.liveness(itemsize)]\n\n"
            "    peak64 = max(bytes_alive(plan, 8))\n", "uses .liveness"),
        3: ("with exercise(3):\n    def my_fusible(plan):\n        return lesson13._fusible_values(plan)\n\n"
            "    bytes_saved = 0\n", "may not"),
    },
    {   # the answer keys reached by a string, where they are now (asgteach.grading.keys.load() reads
        # instructor/answer_keys.py): pkgutil.resolve_name (a door the rules name), and an attribute path that format
        # strings follow (string.Formatter.get_field, which no rule names) in a closure. That one runs: in a kernel the
        # check's watch refuses the call into the keys; in the judge it runs in the sandbox, which has no keys
        # (KeysMissing), and the check says what it reached for. The numbers for the notebook's own plan typed in
        1: ("import pkgutil\n\nwith exercise(1):\n"
            "    def bytes_alive(plan, itemsize, _keys=pkgutil.resolve_name('asgteach.grad' + 'ing.keys:load')()):\n"
            "        return _keys.live_bytes(plan, itemsize)\n\n"
            "    peak64 = 0\n", "imports pkgutil"),
        2: ("import string\n\nwith exercise(2):\n    def _make():\n"
            "        path = '0.grad' + 'ing.keys.load'\n"
            "        return lambda plan: string.Formatter().get_field(path, [at], {})[0]().kept_for_backward(plan)\n\n"
            "    kept_for_backward = _make()\n    kept_bytes = 0\n",
            "get_field"),             # the hands-off rule names that door (in a kernel the watch refuses the call)
        3: ("import pkgutil\n\nwith exercise(3):\n    def my_fusible(plan):\n"
            "        return pkgutil.resolve_name('asgteach.grad' + 'ing.keys:load')().fusible_values(plan)\n\n"
            "    bytes_saved = 51712\n", "imports pkgutil"),
    },
    {   # the keys' file copied, byte for byte, from where a checkout keeps it (beside the package: at.__file__ names
        # the folder) into the working folder, and imported as a module of the answer's own, when the function runs:
        # the sandbox has no such file, and the check says what the answer reached for. (In a student's own kernel in a
        # clone, which holds the keys and the solutions in plain view anyway, the copy is not the keys' file the watch
        # knows: practice mode is not where this is refused.) And the numpy plan's own fusion_chains(), which finds the
        # chains exercise 3 asks for: exercise 3's rule (in a kernel, the check's watch refuses it too)
        2: ("with exercise(2):\n    def kept_for_backward(plan):\n        root = at.__file__.rsplit('/', 2)[0]\n"
            "        np.fromfile(root + '/instructor/answer_keys.py', dtype=np.uint8).tofile('mykeys.py')\n"
            "        import mykeys\n        return mykeys.kept_for_backward(plan)\n\n    kept_bytes = 0\n",
            "reaches for the check's own reference"),
        3: ("with exercise(3):\n    def my_fusible(plan):\n"
            "        return [i for chain in plan.fusion_chains() for i in chain[:-1]]\n\n"
            "    bytes_saved = 51712\n", "uses .fusion_chains"),
    },
]

# honest answers in other styles than the reference: each list entry a submission that must score full marks
HONEST = [
    {   # explicit loops; the last use found walking the steps backwards; reads counted with a Counter
        # the values' death steps listed first (walking backwards), then the running total
        1: ("with exercise(1):\n    def bytes_alive(plan, itemsize):\n        dies_at = {}\n"
            "        for k in range(len(plan.steps) - 1, -1, -1):      # backwards: the first reader met is the last\n"
            "            for i in plan.steps[k].node.inputs:\n                dies_at.setdefault(i, k)\n"
            "        for o in plan.outputs:\n            dies_at[o] = len(plan.steps)   # outputs never die\n"
            "        total = itemsize * sum(int(np.prod(n.shape)) for n in plan.leaves + plan.constants)\n"
            "        rows = []\n        for k, step in enumerate(plan.steps):\n"
            "            total += itemsize * int(np.prod(step.node.shape))\n"
            "            for i in set(step.node.inputs):\n                if dies_at[i] == k:\n"
            "                    total -= itemsize * plan.graph.nodes[i].size\n"
            "            rows.append(total)\n        return rows\n\n"
            "    peak64 = max(bytes_alive(plan, 8))\n"),
        # the backward steps' inputs as one set; phases read off the graph
        2: ("with exercise(2):\n    def kept_for_backward(plan):\n"
            "        backward_reads = {i for s in plan.steps if s.node.phase != 'forward' for i in s.node.inputs}\n"
            "        made = [s.node.id for s in plan.steps]\n"
            "        return [i for i in made if plan.graph.nodes[i].phase == 'forward' and i in backward_reads]\n\n"
            "    kept_bytes = 4 * sum(int(np.prod(g.nodes[i].shape)) for i in kept_for_backward(plan))\n"),
        3: ("from collections import Counter\n\nwith exercise(3):\n"
            "    ELEMENTWISE = {'arithmetic', 'activation', 'comparison'}\n\n    def my_fusible(plan):\n"
            "        reads = Counter(i for step in plan.steps for i in step.node.inputs)\n"
            "        reader = {i: step.node for step in plan.steps for i in step.node.inputs}\n"
            "        written = set(plan.outputs) | set(plan.folded)\n"
            "        return [s.node.id for s in plan.steps\n"
            "                if spec(s.node.op).category in ELEMENTWISE and s.node.id not in written\n"
            "                and reads[s.node.id] == 1 and spec(reader[s.node.id].op).category in ELEMENTWISE\n"
            "                and reader[s.node.id].shape == s.node.shape]\n\n"
            "    bytes_saved = 4 * sum(plan.graph.nodes[i].size for i in my_fusible(plan))\n"),
    },
    {   # numpy arrays; a dict comprehension (a later step overwrites an earlier one); readers as SETS of steps,
        # so x * x counts one reader, as the exercise's words ("read by exactly one step") and the GPU's chains
        # pass count them
        # a set of live ids, sizes summed afresh after every step; readers counted per value
        1: ("with exercise(1):\n    def bytes_alive(plan, itemsize):\n        readers = {}\n"
            "        for k, step in enumerate(plan.steps):\n            for i in step.node.inputs:\n"
            "                readers.setdefault(i, []).append(k)\n"
            "        live = {n.id for n in plan.leaves} | {n.id for n in plan.constants}\n        out = []\n"
            "        for k, step in enumerate(plan.steps):\n            live.add(step.node.id)\n"
            "            live = {i for i in live if i in plan.outputs or max(readers.get(i, [k + 1])) > k}\n"
            "            out.append(itemsize * sum(plan.graph.nodes[i].size for i in live))\n        return out\n\n"
            "    peak64 = max(bytes_alive(plan, 8))\n"),
        # for each forward step, does any backward step list it among its inputs?
        2: ("with exercise(2):\n    def kept_for_backward(plan):\n        kept = []\n"
            "        for s in plan.steps:\n            if s.node.phase != 'forward':\n                continue\n"
            "            if any(s.node.id in b.node.inputs for b in plan.steps if b.node.phase == 'backward'):\n"
            "                kept.append(s.node.id)\n        return kept\n\n"
            "    kept_bytes = sum(g.nodes[i].size * 4 for i in kept_for_backward(plan))\n"),
        3: ("with exercise(3):\n    def is_elementwise(op):\n"
            "        return spec(op).category in ('arithmetic', 'activation', 'comparison')\n\n"
            "    def my_fusible(plan):\n        readers = {}\n        for step in plan.steps:\n"
            "            for i in set(step.node.inputs):\n"
            "                readers.setdefault(i, {})[step.node.id] = step.node   # one entry per reading step\n"
            "        fusible = []\n        for step in plan.steps:\n            node = step.node\n"
            "            if not is_elementwise(node.op) or node.id in plan.outputs or node.id in plan.folded:\n"
            "                continue\n            users = list(readers.get(node.id, {}).values())\n"
            "            if len(users) == 1 and is_elementwise(users[0].op) and users[0].shape == node.shape:\n"
            "                fusible.append(node.id)\n        return fusible\n\n"
            "    saved_values = my_fusible(plan)\n"
            "    bytes_saved = sum(4 * g.nodes[i].size for i in saved_values)\n"),
    },
]
