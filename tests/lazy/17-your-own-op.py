# Lesson 17's lazy student (loaded by tests/test_course.py): each answer cell as a shortcut-taker writes it,
# and words the check's ExerciseError must show.
LAZY = {
    # the backward rule written for the lesson's one alpha: exp(x) is elu's slope at alpha = 1 only
    1: ("with exercise(1):\n"
        "    ELU = OpSpec(\n"
        '        name="elu", category="activation", arity=1, attrs={"alpha": 1.0},\n'
        "        infer=lambda shape, **attrs: shape,\n"
        "        numpy=lambda x, alpha=1.0: np.where(x > 0, x, alpha * (np.exp(x) - 1)),\n"
        "        vjp=lambda c, g: (at.where(c.inputs[0] > 0, g, g * at.exp(c.inputs[0])),),\n"
        '        gpu=GPU(expr="select(alpha * (exp(x) - 1.0), x, x > 0.0)"),\n'
        "    )\n"
        "    reregister(ELU)\n",
        "right at alpha=1.0 only"),
    # the textbook formula, exactly as it reads: log(0) once sigmoid(z) rounds to 1
    2: ("with exercise(2):\n"
        "    def bce_numpy(z, t):\n"
        "        s = 1 / (1 + np.exp(-z))\n"
        "        return -(t * np.log(s) + (1 - t) * np.log(1 - s))\n\n"
        "    def bce_vjp(c, g):\n"
        "        z, t = c.inputs\n"
        "        return g * (at.sigmoid(z) - t), -g * z\n\n"
        '    BCE_WGSL = "max(a, 0.0) - a * b + f_log1p(exp(-abs(a)))"\n'
        '    BCE = OpSpec(name="bce_logits", category="loss", arity=2, infer=same_shape, numpy=bce_numpy,\n'
        "                 vjp=bce_vjp, gpu=GPU(expr=BCE_WGSL), explain=BCE_TEXTS)\n"
        "    reregister(BCE)\n",
        "overflows float64"),
}

# attempts on the judge itself: each a submission of its own (tests/test_course.py's MORE)
MORE = [
    {   # the check switched off through the package; another library's loss as the kernel
        1: ("import asgteach.lessons.checks_custom_op as c\nc.elu_check = lambda op: None\n"
            "with exercise(1):\n    ELU = None\n", "may not"),
        2: ("with exercise(2):\n    def bce_numpy(z, t):\n        import torch\n"
            "        return torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(z), torch.tensor(t))\n",
            "imports torch"),
    },
]
