"""Lesson 11's students (loaded by tests/test_course.py): LAZY (one shortcut per exercise, and words the judge's
message must show), MORE (attempts on the judge itself, each a submission of its own) and HONEST (right answers in
other styles than the reference's, each a submission that must score full marks)."""

LAZY = {
    1: ("from asgteach.backends.wgpu_kernels import broadcast_strides\n\nwith exercise(1):\n"
        "    my_broadcast_strides = broadcast_strides\n", "hands the work to the backend"),
    3: ("with exercise(3):\n    def my_groups(numel):\n"
        "        from asgteach.backends.wgpu_kernels import groups_for\n"
        "        return groups_for(-(-numel // 256))\n\n"
        "    gx, gy, _ = my_groups(10 ** 6)\n    idle_threads = gx * gy * 256 - 10 ** 6\n",
        "imports from asgteach.backends.wgpu_kernels"),
}

MORE = [
    {
        2: ("with exercise(2):\n    def my_offset_of(i, out_shape, strides):\n        import ctypes\n"
            "        return 0\n", "imports ctypes"),
    },
    {   # the backend's own functions held where a name in the function cannot show them: a default argument, a
        # closure (in a kernel the checks' watch sees them run; in the judge, the rule reads the import in the cell)
        1: ("from asgteach.backends.wgpu_kernels import broadcast_strides as _bs\n\nwith exercise(1):\n"
            "    def my_broadcast_strides(shape, out_shape, _ref=_bs):\n        return list(_ref(shape, out_shape))\n",
            "imports from asgteach.backends.wgpu_kernels"),
        3: ("from asgteach.backends import wgpu_kernels as _wk\n\nwith exercise(3):\n"
            "    def _make(grid=_wk.groups_for):\n        def my_groups(numel):\n"
            "            return grid(max(1, -(-numel // 256)))\n        return my_groups\n\n"
            "    my_groups = _make()\n    gx, gy, _ = my_groups(10 ** 6)\n    idle_threads = gx * gy * 256 - 10 ** 6\n",
            "imports from asgteach.backends"),
    },
    {   # the backend reached through the lesson's own `at` (an attribute path in a default argument, no import), and
        # imported from another module of the backend that holds it, under another name
        1: ("with exercise(1):\n    def my_broadcast_strides(shape, out_shape, _wk=at.backends.wgpu_kernels):\n"
            "        return _wk.broadcast_strides(shape, out_shape)\n", "uses .wgpu_kernels"),
        3: ("with exercise(3):\n    from asgteach.backends.wgpu_backend import groups_for as grid\n\n"
            "    def my_groups(numel):\n        return grid(max(1, -(-numel // 256)))\n\n"
            "    gx, gy, _ = my_groups(10 ** 6)\n    idle_threads = gx * gy * 256 - 10 ** 6\n",
            "imports from asgteach.backends.wgpu_backend"),
    },
    {   # numpy's own broadcasting as a stand-in: the strides of np.broadcast_to's view. numpy gives stride 0 to
        # every size-1 axis, also to one that is not broadcast (out_shape's size there is 1 too), where the
        # exercise's rule (row-major strides, 0 only where a size-1 axis is broadcast) gives the row-major stride
        1: ("with exercise(1):\n    def my_broadcast_strides(shape, out_shape):\n"
            "        view = np.broadcast_to(np.zeros(shape, dtype=np.int8), out_shape)   # 1-byte items\n"
            "        return list(view.strides)\n", "my_broadcast_strides((1, 1), (1, 1)) should be [1, 1]"),
    },
]

# honest answers in other styles than the reference: each list entry a submission that must score full marks
HONEST = [
    {   # numpy arrays: the row-major strides as a reversed cumulative product; ceil by float division
        1: ("with exercise(1):\n    def my_broadcast_strides(shape, out_shape):\n"
            "        full = np.array([1] * (len(out_shape) - len(shape)) + list(shape), dtype=np.int64)\n"
            "        row_major = np.append(np.cumprod(full[::-1])[::-1][1:], 1)   # product of the sizes after k\n"
            "        repeated = (full == 1) & (np.array(out_shape) != 1)          # size 1 read as a bigger axis\n"
            "        return [int(s) for s in np.where(repeated, 0, row_major)]\n"),
        # a recursive walk: peel off the last axis, hand the rest of the index on
        2: ("with exercise(2):\n    def my_offset_of(i, out_shape, strides):\n        if len(out_shape) == 0:\n"
            "            return 0\n        rest, here = divmod(i, out_shape[-1])\n"
            "        return here * strides[-1] + my_offset_of(rest, out_shape[:-1], strides[:-1])\n"),
        3: ("import math\n\nwith exercise(3):\n    def my_groups(numel):\n"
            "        n = max(1, math.ceil(numel / 256))\n        x = min(n, 65535)\n"
            "        return x, math.ceil(n / x), 1\n\n"
            "    launched = 256 * math.prod(my_groups(10 ** 6))\n    idle_threads = launched - 10 ** 6\n"),
    },
    {   # axes counted from the right (negative indices), no padding; the first axis takes what is left, as the
        # kernel's offset_of does; integer divmod, and the idle threads counted one by one
        1: ("with exercise(1):\n    def my_broadcast_strides(shape, out_shape):\n        result = []\n"
            "        step = 1\n        for k in range(1, len(out_shape) + 1):\n"
            "            size = shape[-k] if k <= len(shape) else 1   # a missing leading axis has size 1\n"
            "            result.insert(0, 0 if size == 1 and out_shape[-k] > 1 else step)\n"
            "            step *= size\n        return result\n"),
        2: ("with exercise(2):\n    def my_offset_of(i, out_shape, strides):\n        if not out_shape:\n"
            "            return 0\n        offset, rest = 0, int(i)\n"
            "        for axis in range(len(out_shape) - 1, 0, -1):\n"
            "            offset += (rest % out_shape[axis]) * strides[axis]\n            rest //= out_shape[axis]\n"
            "        return offset + rest * strides[0]\n"),
        3: ("with exercise(3):\n    def my_groups(numel):\n        n, extra = divmod(numel, 256)\n"
            "        if extra or n == 0:\n            n += 1\n        x = n if n <= 65535 else 65535\n"
            "        y, left = divmod(n, x)\n        return [x, y + (left > 0), 1]\n\n"
            "    gx, gy, gz = my_groups(10 ** 6)\n"
            "    idle_threads = int(np.count_nonzero(np.arange(gx * gy * gz * 256) >= 10 ** 6))\n"),
    },
]
