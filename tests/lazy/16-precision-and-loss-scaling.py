"""Lesson 16's students: bfloat16 by truncation (the lesson's chop), attempts on the judge, honest roundings."""

# exercise -> (the answer cell as a lazy student writes it, words the check's message must show)
LAZY = {1: ('with exercise(1):\n'
     '    def to_bfloat16(x):\n'
     "        # keep the upper 16 bits: that is a bfloat16, isn't it?\n"
     '        return chop_to_bfloat16(x)\n',
     'that is truncation')}

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
      'exercise 1')}]

# honest answers in other styles than the reference: each list entry a submission that must score full marks
HONEST = [{1: 'with exercise(1):\n'
     '    def to_bfloat16(x):\n'
     '        x = np.asarray(x, dtype=np.float32)\n'
     '        bits = x.view(np.uint32)\n'
     '        upper, lower = bits >> 16, bits & 0xFFFF\n'
     '        up = (lower > 0x8000) | ((lower == 0x8000) & ((upper & 1) == 1))\n'
     '        out = ((upper.astype(np.uint64) + up) << 16).astype(np.uint32)\n'
     '        out = np.where(np.isnan(x), (bits & 0x80000000) | 0x7FC00000, out).astype(np.uint32)\n'
     '        return out.view(np.float32)\n'},
 {1: 'with exercise(1):\n'
     '    def to_bfloat16(x):\n'
     '        u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)\n'
     '        wide = u.astype(np.int64) + 0x7FFF + ((u >> 16) & 1).astype(np.int64)\n'
     '        r = ((wide >> 16) << 16).astype(np.uint32)\n'
     '        nan = np.uint32(0x7FC00000) | (u & np.uint32(0x80000000))\n'
     '        return np.where(np.isnan(x), nan, r).view(np.float32)\n'}]
