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
     'never backs off'),
 2: ('with exercise(2):\n'
     '    def safe_scales(grads, max_underflow):\n'
     '        return (9, 21)   # what the lesson printed\n'
     '\n'
     '    window = safe_scales(grad_values, 0.01)\n',
     'expected')}

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
      'may not')},
 {2: ('with exercise(2):\n'
      '    def safe_scales(grads, max_underflow):\n'
      '        g = np.concatenate([np.asarray(a, np.float64).ravel() for a in grads])\n'
      '        top = [k for k in range(-80, 81) if np.abs(g).max() * 2.0 ** k < 65520]\n'
      '        low = [k for k in range(-80, 81)\n'
      '               if np.mean((g * 2.0 ** k).astype(np.float16) == 0) <= max_underflow]\n'
      '        return (min(low), max(top)) if low and min(low) <= max(top) else None\n'
      '\n'
      '    window = safe_scales(grad_values, 0.01)\n',
      'not lost')}]

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
     '    run_dynamic = train(model16, DynamicScaler(2.0 ** 16, growth_interval=10))\n',
  2: 'with exercise(2):\n'
     '    def safe_scales(grads, max_underflow):\n'
     '        g = np.abs(np.concatenate([np.ravel(a) for a in grads]).astype(np.float64))\n'
     '        nz = np.sort(g[g > 0])\n'
     '        k_hi = 0\n'
     '        while nz[-1] * 2.0 ** (k_hi + 1) < 65520:\n'
     '            k_hi += 1\n'
     '        while nz[-1] * 2.0 ** k_hi >= 65520:\n'
     '            k_hi -= 1\n'
     '        allowed = int(np.floor(max_underflow * nz.size))   # how many may be lost\n'
     '        keep_from = nz[allowed]                            # the smallest value that must survive\n'
     '        k_lo = 0\n'
     '        while keep_from * 2.0 ** k_lo > 2.0 ** -25:\n'
     '            k_lo -= 1\n'
     '        while keep_from * 2.0 ** k_lo <= 2.0 ** -25:\n'
     '            k_lo += 1\n'
     '        return (k_lo, k_hi) if k_lo <= k_hi else None\n'
     '\n'
     '    window = safe_scales(grad_values, 0.01)\n'},
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
     '    run_dynamic = train(model16, DynamicScaler(2.0 ** 16, growth_interval=10))\n',
  2: 'with exercise(2):\n'
     '    def safe_scales(grads, max_underflow):\n'
     '        g = np.concatenate([np.asarray(a, dtype=np.float32).ravel() for a in grads]).astype(np.float64)\n'
     '        count = np.count_nonzero(g)\n'
     '        def lost(k):\n'
     "            with np.errstate(over='ignore'):\n"
     '                return np.count_nonzero((to_float16(g * 2.0 ** k) == 0) & (g != 0))\n'
     '        def overflows(k):\n'
     "            with np.errstate(over='ignore'):\n"
     '                return bool(np.isinf(to_float16(g * 2.0 ** k)).any())\n'
     '        k_hi = max(k for k in range(-100, 101) if not overflows(k))\n'
     '        k_lo = min(k for k in range(-100, 101) if lost(k) <= max_underflow * count)\n'
     '        return None if k_lo > k_hi else (k_lo, k_hi)\n'
     '\n'
     '    window = safe_scales(grad_values, 0.01)\n'}]
