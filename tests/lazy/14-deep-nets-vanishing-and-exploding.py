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
        # switch every check of the lesson off
        1: ("import asgteach.lessons.checks_deep as cd\ncd.grad_norm_ratio_check = print\n"
            "with exercise(1):\n    def grad_norm_ratio(loss, weights, feeds):\n        return 1.0\n\n"
            "    sigmoid_ratio = 1.0\n", "may not"),
    },
]
