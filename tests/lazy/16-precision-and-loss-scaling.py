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
        1: ("from asgteach.lessons import lesson16\n"
            "lesson16.bfloat16_check = lambda *a, **k: None\n"
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

# honest answers in other styles than the reference: each list entry a submission that must score full marks
_TRAIN = ("\n    run_dynamic = train(model16, DynamicScaler(2.0 ** 16, growth_interval=10))\n")
HONEST = [
    {   # round up when the dropped half is above 0x8000, or exactly 0x8000 with an odd kept part
        1: ("with exercise(1):\n    def to_bfloat16(x):\n        x = np.asarray(x, dtype=np.float32)\n"
            "        bits = x.view(np.uint32)\n        upper, lower = bits >> 16, bits & 0xFFFF\n"
            "        up = (lower > 0x8000) | ((lower == 0x8000) & ((upper & 1) == 1))\n"
            "        out = ((upper.astype(np.uint64) + up) << 16).astype(np.uint32)\n"
            "        out = np.where(np.isnan(x), (bits & 0x80000000) | 0x7FC00000, out).astype(np.uint32)\n"
            "        return out.view(np.float32)\n"),
        2: ("with exercise(2):\n    class DynamicScaler:\n"
            "        def __init__(self, init_scale=2.0 ** 16, growth_interval=100):\n"
            "            self.scale = float(init_scale)\n            self.every = growth_interval\n"
            "            self.streak = 0\n\n        def update(self, grads):\n"
            "            if any(not np.all(np.isfinite(g)) for g in grads):\n"
            "                self.scale = self.scale * 0.5\n                self.streak = 0\n"
            "                return False\n"
            "            self.streak += 1\n            if self.streak >= self.every:\n"
            "                self.scale = self.scale * 2.0\n                self.streak = 0\n            return True\n"
            + _TRAIN),
    },
    {   # a 64-bit sum with the bias 0x7FFF + the last kept bit; the scaler counts down
        1: ("with exercise(1):\n    def to_bfloat16(x):\n"
            "        u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)\n"
            "        wide = u.astype(np.int64) + 0x7FFF + ((u >> 16) & 1).astype(np.int64)\n"
            "        r = ((wide >> 16) << 16).astype(np.uint32)\n"
            "        nan = np.uint32(0x7FC00000) | (u & np.uint32(0x80000000))\n"
            "        return np.where(np.isnan(x), nan, r).view(np.float32)\n"),
        2: ("with exercise(2):\n    class DynamicScaler:\n"
            "        def __init__(self, init_scale=2.0 ** 16, growth_interval=100):\n"
            "            self.scale, self.interval = init_scale, growth_interval\n"
            "            self.left = growth_interval\n\n        def update(self, grads):\n"
            "            finite = all(bool(np.isfinite(np.asarray(g)).all()) for g in grads)\n"
            "            if finite:\n                self.left -= 1\n                if self.left == 0:\n"
            "                    self.scale *= 2\n                    self.left = self.interval\n"
            "            else:\n                self.scale /= 2\n                self.left = self.interval\n"
            "            return finite\n" + _TRAIN),
    },
]
