"""Lesson 13's students (loaded by tests/test_course.py): LAZY (one shortcut per exercise, and words the judge's
message must show), MORE (attempts on the judge itself, each a submission of its own) and HONEST (right answers in
other styles than the reference's, each a submission that must score full marks)."""

LAZY = {
    1: ("with exercise(1):\n    def memory_bytes(plan, itemsize):\n"
        "        from asgteach.lessons import reference\n"
        "        return reference.peak_bytes(plan, itemsize), reference.no_reuse_bytes(plan, itemsize)\n",
        "imports from asgteach.lessons"),
    2: ("with exercise(2):\n    from asgteach.lessons.reference import last_use as my_last_use\n",
        "imports from asgteach.lessons.reference"),
    3: ("with exercise(3):\n    def my_fusible(plan):\n"
        "        return [7, 10, 26, 28]   # copied from the printed chains\n\n    bytes_saved = 0\n",
        "my_fusible(<plan of"),
}

MORE = [{
    3: ("with exercise(3):\n    def my_fusible(plan):\n        return lesson_checks._fusible_values(plan)\n\n"
        "    bytes_saved = 0\n", "may not"),
}]

HONEST: list = []
