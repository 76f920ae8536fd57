"""Lesson 16b's students: a loss scaler that never backs off, attempts on the judge, honest scalers."""

# exercise -> (the answer cell as a lazy student writes it, words the check's message must show)
LAZY = {1: ('with exercise(1):\n'
     '    class DynamicScaler:\n'
     '        def __init__(self, init_scale=2.0 ** 16, growth_interval=100):\n'
     '            self.scale, self.growth_interval, self.good_steps = init_scale, growth_interval, 0\n'
     '\n'
     '        def update(self, grads):\n'
     '            finite = all(np.isfinite(g).all() for g in grads)\n'
     '            if finite:\n'
     '                self.good_steps += 1\n'
     '                if self.good_steps == self.growth_interval:\n'
     '                    self.scale *= 2\n'
     '                    self.good_steps = 0\n'
     '            return finite\n'
     '\n'
     '    run_dynamic = train(model16, DynamicScaler(2.0 ** 16, growth_interval=10))\n',
     'never backs off')}

# attempts on the judge itself: each a submission of its own (tests/test_course.py's MORE)
MORE = [{1: ('with exercise(1):\n'
      '    import asgteach.lessons.answer_keys as keys\n'
      '    class DynamicScaler(keys.ReferenceScaler):\n'
      '        pass\n',
      'may not')},
 {1: ('with exercise(1):\n'
      "    def _make(base=__import__('asgteach.lessons.answer_keys', fromlist=['x']).ReferenceScaler):\n"
      '        return base\n'
      '    DynamicScaler = _make()\n',
      'may not')}]

# honest answers in other styles than the reference: each list entry a submission that must score full marks
HONEST = [{1: 'with exercise(1):\n'
     '    class DynamicScaler:\n'
     '        def __init__(self, init_scale=2.0 ** 16, growth_interval=100):\n'
     '            self.scale = float(init_scale)\n'
     '            self.every = growth_interval\n'
     '            self.streak = 0\n'
     '\n'
     '        def update(self, grads):\n'
     '            if any(not np.all(np.isfinite(g)) for g in grads):\n'
     '                self.scale = self.scale * 0.5\n'
     '                self.streak = 0\n'
     '                return False\n'
     '            self.streak += 1\n'
     '            if self.streak >= self.every:\n'
     '                self.scale = self.scale * 2.0\n'
     '                self.streak = 0\n'
     '            return True\n'
     '\n'
     '    run_dynamic = train(model16, DynamicScaler(2.0 ** 16, growth_interval=10))\n'},
 {1: 'with exercise(1):\n'
     '    class DynamicScaler:\n'
     '        def __init__(self, init_scale=2.0 ** 16, growth_interval=100):\n'
     '            self.scale, self.interval = init_scale, growth_interval\n'
     '            self.left = growth_interval\n'
     '\n'
     '        def update(self, grads):\n'
     '            finite = all(bool(np.isfinite(np.asarray(g)).all()) for g in grads)\n'
     '            if finite:\n'
     '                self.left -= 1\n'
     '                if self.left == 0:\n'
     '                    self.scale *= 2\n'
     '                    self.left = self.interval\n'
     '            else:\n'
     '                self.scale /= 2\n'
     '                self.left = self.interval\n'
     '            return finite\n'
     '\n'
     '    run_dynamic = train(model16, DynamicScaler(2.0 ** 16, growth_interval=10))\n'}]
