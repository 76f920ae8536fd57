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
