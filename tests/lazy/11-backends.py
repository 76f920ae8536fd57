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
        "which the exercise asks you to write yourself"),
}

MORE = [{
    2: ("with exercise(2):\n    def my_offset_of(i, out_shape, strides):\n        import ctypes\n"
        "        return 0\n", "imports ctypes"),
}]

HONEST: list = []
