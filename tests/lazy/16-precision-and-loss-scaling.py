"""Lesson 16's students: bfloat16 by truncation (the lesson's chop), attempts on the judge, honest roundings."""

# exercise -> (the answer cell as a lazy student writes it, words the check's message must show)
LAZY = {1: ('with exercise(1):\n'
     '    def to_bfloat16(x):\n'
     "        # keep the upper 16 bits: that is a bfloat16, isn't it?\n"
     '        return chop_to_bfloat16(x)\n',
     'that is truncation'),
 2: ('with exercise(2):\n'
     '    def round_to_format(x, e, m):\n'
     "        # float16 is a float format, isn't it?\n"
     '        return np.asarray(x, np.float64).astype(np.float16).astype(np.float64)\n'
     '\n'
     '    samples = np.array([0.3, 1.0625, 1.1875, 100.0, 240.0, 247.0, 248.0, 2.0 ** -9, 2.0 ** -10])\n'
     '    print(round_to_format(samples, 4, 3))\n',
     'e=4, m=3')}

# attempts on the judge itself: each a submission of its own (tests/test_course.py's MORE)
MORE = [{1: ('from asgteach.lessons import lesson16\n'
      'lesson16.bfloat16_check = lambda *a, **k: None\n'
      'with exercise(1):\n'
      '    def to_bfloat16(x):\n'
      '        return x\n',
      'may not')},
 {1: ('with exercise(1):\n'
      '    def to_bfloat16(x):\n'
      '        import ml_dtypes\n'
      '        return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)\n',
      'ml_dtypes')},
 {1: ('with exercise(1):\n'
      '    def to_bfloat16(x):\n'
      '        np.testing.assert_array_equal = lambda *a, **k: None\n'
      '        np.array_equal = lambda *a, **k: True\n'
      '        return np.asarray(x, np.float32)\n',
      'exercise 1')},
 {2: ('with exercise(2):\n'
      '    def round_to_format(x, e, m):\n'
      '        x = np.asarray(x, dtype=np.float64)\n'
      '        bias = 2 ** (e - 1) - 1\n'
      '        largest = (2 - 2.0 ** -m) * 2.0 ** bias\n'
      '        out = x.copy()\n'
      '        fin = np.isfinite(x)\n'
      '        a = np.abs(x[fin])\n'
      '        _, ex = np.frexp(a)\n'
      '        gap = np.ldexp(1.0, np.maximum(ex - 1, 1 - bias) - m)\n'
      '        r = np.floor(a / gap + 0.5) * gap\n'
      '        out[fin] = np.copysign(np.where(r > largest, np.inf, r), x[fin])\n'
      '        return out\n'
      '\n'
      '    samples = np.array([0.3, 1.0625, 1.1875, 100.0, 240.0, 247.0, 248.0, 2.0 ** -9, 2.0 ** -10])\n'
      '    print(round_to_format(samples, 4, 3))\n',
      'last mantissa bit is 0')},
 {2: ('with exercise(2):\n'
      '    def round_to_format(x, e, m):\n'
      '        x = np.asarray(x, dtype=np.float64)\n'
      '        bias = 2 ** (e - 1) - 1\n'
      '        largest = (2 - 2.0 ** -m) * 2.0 ** bias\n'
      '        out = x.copy()\n'
      '        fin = np.isfinite(x)\n'
      '        a = np.abs(x[fin])\n'
      '        _, ex = np.frexp(a)\n'
      '        gap = np.ldexp(1.0, ex - 1 - m)\n'
      '        r = np.rint(a / gap) * gap\n'
      '        out[fin] = np.copysign(np.where(r > largest, np.inf, r), x[fin])\n'
      '        return out\n'
      '\n'
      '    samples = np.array([0.3, 1.0625, 1.1875, 100.0, 240.0, 247.0, 248.0, 2.0 ** -9, 2.0 ** -10])\n'
      '    print(round_to_format(samples, 4, 3))\n',
      'the gap stays')},
 {2: ('with exercise(2):\n'
      '    def round_to_format(x, e, m):\n'
      '        x = np.asarray(x, dtype=np.float64)\n'
      '        bias = 2 ** (e - 1) - 1\n'
      '        largest = (2 - 2.0 ** -m) * 2.0 ** bias\n'
      '        out = x.copy()\n'
      '        fin = np.isfinite(x)\n'
      '        a = np.abs(x[fin])\n'
      '        _, ex = np.frexp(a)\n'
      '        gap = np.ldexp(1.0, np.maximum(ex - 1, 1 - bias) - m)\n'
      '        r = np.rint(a / gap) * gap\n'
      '        out[fin] = np.copysign(np.minimum(r, largest), x[fin])\n'
      '        return out\n'
      '\n'
      '    samples = np.array([0.3, 1.0625, 1.1875, 100.0, 240.0, 247.0, 248.0, 2.0 ** -9, 2.0 ** -10])\n'
      '    print(round_to_format(samples, 4, 3))\n',
      'Do not clip')}]

# honest answers in other styles than the reference: each list entry a submission that must score full marks
HONEST = [{1: 'with exercise(1):\n'
     '    def to_bfloat16(x):\n'
     '        x = np.asarray(x, dtype=np.float32)\n'
     '        bits = x.view(np.uint32)\n'
     '        upper, lower = bits >> 16, bits & 0xFFFF\n'
     '        up = (lower > 0x8000) | ((lower == 0x8000) & ((upper & 1) == 1))\n'
     '        out = ((upper.astype(np.uint64) + up) << 16).astype(np.uint32)\n'
     '        out = np.where(np.isnan(x), (bits & 0x80000000) | 0x7FC00000, out).astype(np.uint32)\n'
     '        return out.view(np.float32)\n',
  2: 'import math\n'
     'with exercise(2):\n'
     '    def round_to_format(x, e, m):\n'
     '        bias = 2 ** (e - 1) - 1\n'
     '        top = (2 - 2.0 ** -m) * 2.0 ** bias\n'
     '        def one(v):\n'
     '            if math.isnan(v) or math.isinf(v) or v == 0:\n'
     '                return v\n'
     '            f, k = math.frexp(abs(v))\n'
     '            step = 2.0 ** (max(k - 1, 1 - bias) - m)\n'
     '            n = abs(v) / step\n'
     '            lo = math.floor(n)\n'
     '            n = lo + 1 if n - lo > 0.5 or (n - lo == 0.5 and lo % 2 == 1) else lo\n'
     '            r = n * step\n'
     '            return math.copysign(math.inf if r > top else r, v)\n'
     '        x = np.asarray(x, dtype=np.float64)\n'
     '        return np.array([one(float(v)) for v in x.ravel()], dtype=np.float64).reshape(x.shape)\n'
     '\n'
     '    samples = np.array([0.3, 1.0625, 1.1875, 100.0, 240.0, 247.0, 248.0, 2.0 ** -9, 2.0 ** -10])\n'
     '    print(round_to_format(samples, 4, 3))\n'},
 {1: 'with exercise(1):\n'
     '    def to_bfloat16(x):\n'
     '        u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)\n'
     '        wide = u.astype(np.int64) + 0x7FFF + ((u >> 16) & 1).astype(np.int64)\n'
     '        r = ((wide >> 16) << 16).astype(np.uint32)\n'
     '        nan = np.uint32(0x7FC00000) | (u & np.uint32(0x80000000))\n'
     '        return np.where(np.isnan(x), nan, r).view(np.float32)\n',
  2: 'with exercise(2):\n'
     '    def round_to_format(x, e, m):\n'
     '        x = np.asarray(x, dtype=np.float64)\n'
     '        bias = 2 ** (e - 1) - 1\n'
     '        info = format_numbers(e, m)\n'
     "        with np.errstate(divide='ignore', invalid='ignore'):\n"
     '            E = np.floor(np.log2(np.abs(x)))\n'
     '            E = np.where(np.ldexp(1.0, np.nan_to_num(E, posinf=0, neginf=0).astype(int)) > np.abs(x), E - 1, '
     'E)\n'
     '            E = np.maximum(np.nan_to_num(E, nan=0, neginf=1 - bias, posinf=0), 1 - bias)\n'
     '            gap = np.ldexp(1.0, (E - m).astype(int))\n'
     '            r = np.rint(np.abs(x) / gap) * gap\n'
     "        r = np.where(r > info['largest'], np.inf, r)\n"
     '        return np.where(np.isfinite(x), np.copysign(r, x), x)\n'
     '\n'
     '    samples = np.array([0.3, 1.0625, 1.1875, 100.0, 240.0, 247.0, 248.0, 2.0 ** -9, 2.0 ** -10])\n'
     '    print(round_to_format(samples, 4, 3))\n'}]
