"""Lesson 13's students (loaded by tests/test_course.py): LAZY (one shortcut per exercise, and words the judge's
message must show), MORE (attempts on the judge itself, each a submission of its own) and HONEST (right answers in
other styles than the reference's, each a submission that must score full marks)."""

LAZY = {
    1: ("with exercise(1):\n    def memory_bytes(plan, itemsize):\n"
        "        from asgteach.lessons import reference\n"
        "        return reference.peak_bytes(plan, itemsize), reference.no_reuse_bytes(plan, itemsize)\n",
        "imports from asgteach.lessons"),
    2: ("with exercise(2):\n    from asgteach.lessons.reference import last_use as my_last_use\n",
        "imports from asgteach.lessons.reference"),
    3: ("with exercise(3):\n    def my_fusible(plan):\n"
        "        return [7, 10, 26, 28]   # copied from the printed chains\n\n    bytes_saved = 0\n",
        "my_fusible(<plan of"),
}

MORE = [
    {
        3: ("with exercise(3):\n    def my_fusible(plan):\n        return lesson13._fusible_values(plan)\n\n"
            "    bytes_saved = 0\n", "may not"),
    },
    {   # the answer keys reached by a string, where they are now (asgteach.grading.keys.load() reads
        # instructor/answer_keys.py): pkgutil.resolve_name (a door the rules name), and an attribute path that format
        # strings follow (string.Formatter.get_field, which no rule names) in a closure. That one runs: in a kernel the
        # check's watch refuses the call into the keys; in the judge it runs in the sandbox, which has no keys
        # (KeysMissing), and the check says what it reached for. The numbers for the notebook's own plan typed in
        1: ("import pkgutil\n\nwith exercise(1):\n"
            "    def memory_bytes(plan, itemsize, _keys=pkgutil.resolve_name('asgteach.grad' + 'ing.keys:load')()):\n"
            "        return _keys.peak_bytes(plan, itemsize), _keys.no_reuse_bytes(plan, itemsize)\n\n"
            "    peak64, all64 = 0, 0\n", "imports pkgutil"),
        2: ("import string\n\nwith exercise(2):\n    def _make():\n"
            "        path = '0.grad' + 'ing.keys.load'\n"
            "        return lambda plan: string.Formatter().get_field(path, [at], {})[0]().last_use(plan)\n\n"
            "    my_last_use = _make()\n",
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
        2: ("with exercise(2):\n    def my_last_use(plan):\n        root = at.__file__.rsplit('/', 2)[0]\n"
            "        np.fromfile(root + '/instructor/answer_keys.py', dtype=np.uint8).tofile('mykeys.py')\n"
            "        import mykeys\n        return mykeys.last_use(plan)\n",
            "reaches for the check's own reference"),
        3: ("with exercise(3):\n    def my_fusible(plan):\n"
            "        return [i for chain in plan.fusion_chains() for i in chain[:-1]]\n\n"
            "    bytes_saved = 51712\n", "uses .fusion_chains"),
    },
]

# honest answers in other styles than the reference: each list entry a submission that must score full marks
HONEST = [
    {   # explicit loops; the last use found walking the steps backwards; reads counted with a Counter
        1: ("with exercise(1):\n    def memory_bytes(plan, itemsize):\n        peak = 0\n"
            "        for row in plan.liveness(itemsize):\n            peak = max(peak, row['live_bytes'])\n"
            "        everything = 0\n        for nid in plan.node_ids:\n"
            "            everything += int(np.prod(plan.graph.nodes[nid].shape)) * itemsize\n"
            "        return peak, everything\n\n    peak64, all64 = memory_bytes(plan, 8)\n"),
        2: ("with exercise(2):\n    def my_last_use(plan):\n        last = {}\n        steps = plan.steps\n"
            "        for k in range(len(steps) - 1, -1, -1):      # backwards: the first reader met is the last\n"
            "            for i in steps[k].node.inputs:\n                if i not in last:\n"
            "                    last[i] = k\n        return last\n"),
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
        1: ("with exercise(1):\n    def memory_bytes(plan, itemsize):\n"
            "        alive = np.array([r['live_bytes'] for r in plan.liveness(itemsize=itemsize)])\n"
            "        sizes = np.array([plan.graph.nodes[i].size for i in plan.node_ids])\n"
            "        return int(alive.max()), int(sizes.sum()) * itemsize\n\n"
            "    peak64, all64 = memory_bytes(plan, 8)\n"),
        2: ("with exercise(2):\n    def my_last_use(plan):\n"
            "        return {i: k for k, step in enumerate(plan.steps) for i in step.node.inputs}\n"),
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
