# Lesson 14's lazy student (loaded by tests/test_course.py): each answer cell as a shortcut-taker writes it,
# and words the check's ExerciseError must show.
LAZY = {
    # the ratio printed in section 2, typed in: right for the lesson's sigmoid net, for no net of the check's
    1: ("with exercise(1):\n"
        "    def grad_norm_ratio(loss, weights, feeds):\n"
        "        return 1.76e-19   # section 2's table, sigmoid with Xavier weights\n\n"
        "    sigmoid_ratio = 1.76e-19\n",
        "on a net of the check's"),
    # section 3's linear factor sigma sqrt(n), whatever the slope: the relu net's half of the units is forgotten
    2: ("with exercise(2):\n"
        "    def predicted_factor(width, std, slope):\n"
        "        return std * np.sqrt(width)\n\n"
        "    relu_predicted = {name: predicted_factor(WIDTH, std, 0.0) for name, std in STDS.items()}\n",
        "predicted_factor(256, 0.05, 0)"),
    # asgteach's own clipping (a graph of constants, run), and the norm written out
    3: ("with exercise(3):\n"
        "    def clip_by_global_norm(grads, max_norm):\n"
        "        clipped = at.run(at.optim.clip_grad_norm([at.constant(g) for g in grads], max_norm), {})\n"
        "        return clipped, float(np.sqrt(sum(np.sum(g ** 2) for g in grads)))\n\n"
        "    losses_clipped, norms_clipped = train(clip=clip_by_global_norm)\n",
        "clip_grad_norm"),
}

# attempts on the judge itself: each a submission of its own (tests/test_course.py's MORE)
MORE = [
    {   # the reference as a default argument; a net measured in place of the formula
        3: ("with exercise(3):\n"
            "    from asgteach.lessons import answer_keys\n"
            "    def clip_by_global_norm(grads, max_norm, _ref=answer_keys.clip_by_global_norm):\n"
            "        return _ref(grads, max_norm)\n\n"
            "    losses_clipped, norms_clipped = train(clip=clip_by_global_norm)\n",
            "may not"),
        2: ("with exercise(2):\n    def predicted_factor(width, std, slope):\n"
            "        return factor(train(width=width))\n\n"
            "    relu_predicted = {name: predicted_factor(WIDTH, std, 0.0) for name, std in STDS.items()}\n",
            "may not"),
    },
    {   # a closure over the library's clipping
        3: ("with exercise(3):\n"
            "    def make():\n        lib = at.optim.clip_grad_norm\n"
            "        def clip_by_global_norm(grads, max_norm):\n"
            "            out = at.run(lib([at.constant(g) for g in grads], max_norm), {})\n"
            "            return out, float(np.sqrt(sum(np.sum(g ** 2) for g in grads)))\n"
            "        return clip_by_global_norm\n"
            "    clip_by_global_norm = make()\n"
            "    losses_clipped, norms_clipped = train(clip=clip_by_global_norm)\n",
            "may not"),
        # the factor MEASURED in numpy (no asgteach at all, so no rule names it): right within 5 % on the check's
        # nets, but no answer for a net too wide to build
        2: ("with exercise(2):\n    def predicted_factor(width, std, slope):\n"
            "        rng = np.random.default_rng(0)\n"
            "        h, g, logs = rng.standard_normal((32, width)), rng.standard_normal((32, width)), []\n"
            "        for _ in range(12):\n"
            "            W = rng.normal(0.0, std, (width, width))\n            z = h @ W\n"
            "            g_down = (g * np.where(z > 0, 1.0, slope)) @ W.T\n"
            "            logs.append(np.log(np.linalg.norm(g_down) / np.linalg.norm(g)))\n"
            "            g, h = g_down, np.where(z > 0, z, slope * z)\n"
            "        return float(np.exp(np.mean(logs)))\n\n"
            "    relu_predicted = {name: predicted_factor(WIDTH, std, 0.0) for name, std in STDS.items()}\n",
            "too wide to build"),
        # switch every check of the lesson off
        1: ("import asgteach.lessons.lesson14 as cd\ncd.grad_norm_ratio_check = print\n"
            "with exercise(1):\n    def grad_norm_ratio(loss, weights, feeds):\n        return 1.0\n\n"
            "    sigmoid_ratio = 1.0\n", "may not"),
    },
]

# honest answers in other styles than the reference: each list entry a submission that must score full marks
_RATIO = ("\n    sigmoid_ratio = grad_norm_ratio(nets['sigmoid']['loss'], nets['sigmoid']['weights'],\n"
          "                                    feeds_for(nets['sigmoid'], at.init.xavier_normal))\n")
_CLIPPED = "\n    losses_clipped, norms_clipped = train(clip=clip_by_global_norm)\n"
HONEST = [
    {
        1: ("with exercise(1):\n    def grad_norm_ratio(loss, weights, feeds):\n"
            "        first, last = at.run(at.grad(loss, [weights[0], weights[-1]]), feeds)\n"
            "        return float(np.sqrt((first ** 2).sum()) / np.sqrt((last ** 2).sum()))\n" + _RATIO),
        2: ("import math\nwith exercise(2):\n    def predicted_factor(width, std, slope):\n"
            "        return std * math.sqrt(width * (1 + slope * slope) / 2)\n\n"
            "    relu_predicted = {name: predicted_factor(WIDTH, std, 0.0) for name, std in STDS.items()}\n"),
        3: ("with exercise(3):\n    def clip_by_global_norm(grads, max_norm):\n"
            "        flat = np.concatenate([np.ravel(g) for g in grads]) if grads else np.zeros(0)\n"
            "        norm = float(np.linalg.norm(flat))\n        if norm <= max_norm:\n"
            "            return [np.array(g, dtype=float) for g in grads], norm\n"
            "        return [np.asarray(g) * (max_norm / norm) for g in grads], norm\n" + _CLIPPED),
    },
    {
        1: ("with exercise(1):\n    def grad_norm_ratio(loss, weights, feeds):\n"
            "        values = at.run(at.grad(loss, list(weights)), feeds)\n"
            "        norms = [np.linalg.norm(np.ravel(g)) for g in values]\n        return norms[0] / norms[-1]\n"
            + _RATIO),
        2: ("with exercise(2):\n    def predicted_factor(width, std, slope):\n"
            "        gain = (1.0 + slope ** 2) / 2.0     # the mean square slope of leaky_relu\n"
            "        return float(np.sqrt(width * gain) * std)\n\n"
            "    relu_predicted = {}\n    for name in INITS:\n"
            "        relu_predicted[name] = predicted_factor(WIDTH, STDS[name], 0.0)\n"),
        3: ("with exercise(3):\n    def clip_by_global_norm(grads, max_norm):\n        total = 0.0\n"
            "        for g in grads:\n            total += float((np.asarray(g, dtype=float) ** 2).sum())\n"
            "        norm = total ** 0.5\n        factor = min(1.0, max_norm / norm) if norm > 0 else 1.0\n"
            "        return [np.asarray(g, dtype=float) * factor for g in grads], norm\n" + _CLIPPED),
    },
]
