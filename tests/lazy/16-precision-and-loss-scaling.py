"""Lesson 16's lazy student: bfloat16 by truncation (the lesson's chop), and a loss scaler that never backs off."""

LAZY = {
    1: ("with exercise(1):\n"
        "    def to_bfloat16(x):\n"
        "        # keep the upper 16 bits: that is a bfloat16, isn't it?\n"
        "        return chop_to_bfloat16(x)\n",
        "that is truncation"),
    2: ("with exercise(2):\n"
        "    class DynamicScaler:\n"
        "        def __init__(self, init_scale=2.0 ** 16, growth_interval=100):\n"
        "            self.scale, self.growth_interval, self.good_steps = init_scale, growth_interval, 0\n\n"
        "        def update(self, grads):\n"
        "            finite = all(np.isfinite(g).all() for g in grads)\n"
        "            if finite:\n"
        "                self.good_steps += 1\n"
        "                if self.good_steps == self.growth_interval:\n"
        "                    self.scale *= 2\n"
        "                    self.good_steps = 0\n"
        "            return finite\n\n"
        "    run_dynamic = train(model16, DynamicScaler(2.0 ** 16, growth_interval=10))\n",
        "never backs off"),
}

# attempts on the judge itself: each a submission of its own (tests/test_course.py's MORE)
MORE = [
    {   # switch the check off with one line, answer wrong
        1: ("from asgteach.lessons import checks_precision\n"
            "checks_precision.bfloat16_check = lambda *a, **k: None\n"
            "with exercise(1):\n    def to_bfloat16(x):\n        return x\n",
            "may not"),
        # subclass the reference scaler
        2: ("with exercise(2):\n"
            "    import asgteach.lessons.answer_keys as keys\n"
            "    class DynamicScaler(keys.ReferenceScaler):\n        pass\n",
            "may not"),
    },
    {   # a library stand-in for the rounding, and a default argument holding the reference
        1: ("with exercise(1):\n    def to_bfloat16(x):\n        import ml_dtypes\n"
            "        return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)\n",
            "ml_dtypes"),
        2: ("with exercise(2):\n"
            "    def _make(base=__import__('asgteach.lessons.answer_keys', fromlist=['x']).ReferenceScaler):\n"
            "        return base\n"
            "    DynamicScaler = _make()\n",
            "may not"),
    },
    {   # replace numpy's comparison at run time, through the module table, with a wrong answer
        1: ("with exercise(1):\n    def to_bfloat16(x):\n        np.testing.assert_array_equal = lambda *a, **k: None\n"
            "        np.array_equal = lambda *a, **k: True\n        return np.asarray(x, np.float32)\n",
            "exercise 1"),
    },
]
