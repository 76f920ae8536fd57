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
