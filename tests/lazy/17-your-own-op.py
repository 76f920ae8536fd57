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
        1: ("import asgteach.lessons.lesson17 as c\nc.elu_check = lambda op: None\n"
            "with exercise(1):\n    ELU = None\n", "may not"),
        2: ("with exercise(2):\n    def bce_numpy(z, t):\n        import torch\n"
            "        return torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(z), torch.tensor(t))\n",
            "imports torch"),
    },
]

# the op's record around an answer of exercise 2: the cell wraps the three pieces as the notebook's does
_BCE_OP = ('    BCE = OpSpec(name="bce_logits", category="loss", arity=2, infer=same_shape, numpy=bce_numpy,\n'
           "                 vjp=bce_vjp, gpu=GPU(expr=BCE_WGSL), explain=BCE_TEXTS)\n"
           "    reregister(BCE)\n")

# more attempts on the judge: the library's softplus kernel held in a default argument (the check switches the
# op off in the registry while the op runs; the kernel itself is the same function: RULES[2] refuses the ways to it
# by name), and the check's reference for elu reached by an attribute path that a format string follows, built when
# the kernel runs (at.grading.keys.load(): a graded submission's sandbox has no keys, so it fails there)
MORE.append({
    1: ("import string\n\nwith exercise(1):\n    ELU = OpSpec(\n"
        "        name='elu', category='activation', arity=1, attrs={'alpha': 1.0},\n"
        "        infer=lambda shape, **attrs: shape,\n"
        "        numpy=lambda x, alpha=1.0: string.Formatter().get_field('0.grad' + 'ing.keys.load', [at],"
        " {})[0]().elu(x, alpha),\n"
        "        vjp=lambda c, g: (at.where(c.inputs[0] > 0, g, g * (c.out + c.attrs['alpha'])),),\n"
        "        gpu=GPU(expr='select(alpha * (exp(min(x, 0.0)) - 1.0), x, x > 0.0)'),\n"
        "    )\n    reregister(ELU)\n", "get_field"),     # the hands-off rule names that door now
    2: ("with exercise(2):\n    def bce_numpy(z, t, _softplus=spec('softplus').numpy):\n"
        "        return _softplus(z, beta=1.0) - z * t\n\n"
        "    def bce_vjp(c, g):\n        z, t = c.inputs\n        return g * (at.sigmoid(z) - t), -g * z\n\n"
        '    BCE_WGSL = "max(a, 0.0) - a * b + f_log1p(exp(-abs(a)))"\n' + _BCE_OP, "softplus"),
})

# graded mode: the judge gets the answer's OpSpec as data (its functions: handles into the sandbox) and checks it
# in its own registry, so it asks the submission's registry whether the op the notebook uses is that one: here a
# right ELU is handed to the check while a sloppy op is what the notebook registered as elu. And the library's
# softplus reached by name in the kernel (at.softplus on a graph of its own, run there): RULES[2] reads it
MORE.append({
    1: ("import dataclasses\n\nwith exercise(1):\n    ELU = OpSpec(\n"
        "        name='elu', category='activation', arity=1, attrs={'alpha': 1.0},\n"
        "        infer=lambda shape, **attrs: shape,\n"
        "        numpy=lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))),\n"
        "        vjp=lambda c, g: (at.where(c.inputs[0] > 0, g, g * (c.out + c.attrs['alpha'])),),\n"
        "        gpu=GPU(expr='select(alpha * (exp(min(x, 0.0)) - 1.0), x, x > 0.0)'),\n"
        "    )\n    reregister(dataclasses.replace(ELU, numpy=lambda x, alpha=1.0: np.maximum(x, 0.0)))\n",
        "is not ELU: run your whole answer cell"),
    2: ("with exercise(2):\n    def bce_numpy(z, t):\n        with at.Graph():\n"
        "            zi = at.input('z', np.shape(z))\n            y = at.softplus(zi)\n"
        "        return at.run(y, {zi: z}) - z * t\n\n"
        "    def bce_vjp(c, g):\n        z, t = c.inputs\n        return g * (at.sigmoid(z) - t), -g * z\n\n"
        '    BCE_WGSL = "max(a, 0.0) - a * b + f_log1p(exp(-abs(a)))"\n' + _BCE_OP, "the library's softplus"),
})

# honest answers in other styles than the reference: each list entry a submission that must score full marks
HONEST = [
    {   # ELU: a kernel with the negative part on its own, a rule from exp (clipped at 0), a GPU formula without
        # select (max and min add the two halves), texts of its own with cases. BCE: softplus(-z) + (1 - t) z
        # through np.logaddexp, sigmoid as where(z > 0, 1 / (1 + e), e / (1 + e)) with e = exp(-|z|), WGSL split
        # by select into the two signs of a
        1: ("with exercise(1):\n    def elu_numpy(x, alpha=1.0):\n"
            "        negative_part = alpha * (np.exp(np.minimum(x, 0.0)) - 1.0)   # exp never sees x > 0\n"
            "        return np.where(x > 0, x, negative_part)\n\n"
            "    def elu_vjp(c, g):\n        (x,) = c.inputs\n"
            "        slope = at.where(x > 0, 1.0, c.attrs['alpha'] * at.exp(at.minimum(x, 0.0)))\n"
            "        return (g * slope,)\n\n"
            "    CASES_Y = (r'\\mathrm{elu}(x) = \\begin{cases} x & x > 0 \\\\ '\n"
            "               r'\\alpha (e^{x} - 1) & x \\le 0 \\end{cases}')\n"
            "    CASES_G = (r'\\frac{\\partial L}{\\partial x} = \\begin{cases} g & x > 0 \\\\ '\n"
            "               r'g \\, \\alpha e^{x} & x \\le 0 \\end{cases}')\n"
            "    ELU = OpSpec(\n        name='elu', category='activation', arity=1, attrs={'alpha': 1.0},\n"
            "        infer=lambda shape, **_: tuple(shape),\n        numpy=elu_numpy,\n        vjp=elu_vjp,\n"
            "        gpu=GPU(expr='max(x, 0.0) + alpha * (exp(min(x, 0.0)) - 1.0)'),\n"
            "        explain={\n"
            "            'en': {'headline': 'ELU (exponential linear unit)',\n"
            "                   'what': 'Passes positive inputs unchanged and bends negative ones smoothly towards "
            "-alpha.',\n"
            "                   'formula': CASES_Y, 'vjp': CASES_G,\n"
            "                   'why': 'Unlike ReLU it keeps a gradient for negative inputs, and its negative outputs "
            "move the mean activation towards zero.',\n"
            "                   'pitfalls': 'For alpha other than 1 the slope jumps at x = 0; exp(x) of a large "
            "positive x overflows unless x is clipped first.'},\n"
            "            'ru': {'headline': 'ELU (экспоненциальная линейная единица)',\n"
            "                   'what': 'Положительные входы проходят без изменений, отрицательные плавно "
            "стремятся к -alpha.',\n"
            "                   'formula': CASES_Y, 'vjp': CASES_G,\n"
            "                   'why': 'В отличие от ReLU, градиент при отрицательных входах не обнуляется, а "
            "отрицательные выходы приближают среднюю активацию к нулю.',\n"
            "                   'pitfalls': 'При alpha, не равном 1, наклон в нуле скачет; exp(x) большого "
            "положительного x переполняется, если x не ограничить.'},\n"
            "        },\n    )\n    reregister(ELU)\n"),
        2: ("with exercise(2):\n    def bce_numpy(z, t):\n"
            "        # softplus(z) - t z = softplus(-z) + (1 - t) z, and softplus(-z) = log(e^0 + e^-z)\n"
            "        return np.logaddexp(0.0, -z) + (1.0 - t) * z\n\n"
            "    def bce_vjp(c, g):\n        z, t = c.inputs\n"
            "        e = at.exp(-at.abs(z))          # <= 1: never overflows\n"
            "        sigma = at.where(z > 0, 1.0 / (1.0 + e), e / (1.0 + e))\n"
            "        return g * (sigma - t), g * -z\n\n"
            '    BCE_WGSL = "select(-a * b + f_log1p(exp(a)), a - a * b + f_log1p(exp(-a)), a > 0.0)"\n'
            + _BCE_OP),
    },
    {   # ELU: one line each, the rule from the output (dy/dx = y + alpha where x <= 0) blended with the 0/1 of
        # x > 0, WGSL with the condition the other way round, short texts. BCE: split by the sign of z with
        # np.where, sigmoid from tanh (1 + tanh(z / 2)) / 2, which saturates instead of overflowing, WGSL as
        # (1 - b) max(a, 0) - b min(a, 0) + log1p(e^-|a|)
        1: ("with exercise(1):\n    def elu_kernel(x, alpha=1.0):\n        y = np.array(x, copy=True)\n"
            "        below = y <= 0\n        y[below] = alpha * (np.exp(y[below]) - 1.0)   # only where x <= 0\n"
            "        return y\n\n"
            "    ELU = OpSpec(\n        name='elu', category='activation', arity=1, attrs={'alpha': 1.0},\n"
            "        infer=lambda shape, **attrs: shape,\n        numpy=elu_kernel,\n"
            "        # 1 where x > 0, else y + alpha: the comparison is 0 or 1, so it blends the two slopes\n"
            "        vjp=lambda c, g: (g * ((c.inputs[0] > 0)\n"
            "                               + (1.0 - (c.inputs[0] > 0)) * (c.out + c.attrs['alpha'])),),\n"
            "        gpu=GPU(expr='select(x, alpha * (exp(min(x, 0.0)) - 1.0), x <= 0.0)'),\n"
            "        explain={\n"
            "            'en': {'headline': 'Exponential linear unit',\n"
            "                   'what': 'The identity for positive x; below zero an exponential that saturates at "
            "-alpha.',\n"
            "                   'formula': r'y = \\max(x, 0) + \\alpha \\left(e^{\\min(x, 0)} - 1\\right)',\n"
            "                   'vjp': r'\\frac{\\partial L}{\\partial x} = g \\cdot [x > 0] + g \\, (y + \\alpha) "
            "\\cdot [x \\leq 0]',\n"
            "                   'why': 'A smooth ReLU with negative values: fewer dead units, activations centred "
            "nearer zero.',\n"
            "                   'pitfalls': 'The kink at 0 is smooth only when alpha = 1.'},\n"
            "            'ru': {'headline': 'Экспоненциальный линейный элемент',\n"
            "                   'what': 'Тождественная функция для положительных x, а ниже нуля - экспонента, "
            "насыщающаяся на уровне -alpha.',\n"
            "                   'formula': r'y = \\max(x, 0) + \\alpha \\left(e^{\\min(x, 0)} - 1\\right)',\n"
            "                   'vjp': r'\\frac{\\partial L}{\\partial x} = g \\cdot [x > 0] + g \\, (y + \\alpha) "
            "\\cdot [x \\leq 0]',\n"
            "                   'why': 'Гладкий ReLU с отрицательными значениями: меньше мёртвых нейронов, "
            "активации ближе к нулю.',\n"
            "                   'pitfalls': 'Излом в нуле сглажен только при alpha = 1.'},\n"
            "        },\n    )\n    reregister(ELU)\n"),
        2: ("with exercise(2):\n    def bce_numpy(z, t):\n        z = np.asarray(z, dtype=np.float64)\n"
            "        small = np.log1p(np.exp(-np.abs(z)))          # log(1 + e^-|z|), the same on both sides\n"
            "        positive = (1.0 - t) * z + small                  # z > 0: log(1 + e^z) = z + log(1 + e^-z)\n"
            "        negative = -t * z + small                         # z <= 0: log(1 + e^z) as it is\n"
            "        return np.where(z > 0, positive, negative)\n\n"
            "    def bce_vjp(c, g):\n        z, t = c.inputs\n"
            "        sigma = 0.5 + 0.5 * at.tanh(0.5 * z)              # sigmoid, without exp at all\n"
            "        return (sigma - t) * g, at.neg(z) * g\n\n"
            '    BCE_WGSL = "(1.0 - b) * max(a, 0.0) - b * min(a, 0.0) + f_log1p(exp(-abs(a)))"\n'
            + _BCE_OP),
    },
]
