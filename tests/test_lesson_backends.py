"""Lesson 11's checks (asgteach.lessons.lesson11): an answer is plain Python or numpy. Its conventions are the
backend's own, so what refuses an answer that hands the work back to the backend is the exercise's rule (read from
the answer's source, in a kernel as in the judge), and in a kernel also the watch on what the function runs."""

from __future__ import annotations

import pytest

import asgteach as at
from asgteach.grading.rules import problems
from asgteach.lessons import ExerciseError, lesson11


def _strides_through_at(shape: tuple, out_shape: tuple) -> list:
    return at.backends.wgpu_kernels.broadcast_strides(shape, out_shape)


def _groups_imported(numel: int) -> tuple:
    from asgteach.backends.wgpu_backend import groups_for as grid

    return grid(max(1, -(-numel // 256)))


def _offset_through_at(i: int, out_shape: tuple, strides: list) -> int:
    return int(sum(k * s for k, s in zip(at.numpy.unravel_index(i, out_shape), strides)))


def test_an_answer_that_names_the_backend_fails_its_rule_in_a_kernel() -> None:
    with pytest.raises(ExerciseError, match="hands the work to the backend"):
        lesson11.broadcast_strides_check(_strides_through_at)
    with pytest.raises(ExerciseError, match="imports from asgteach.backends.wgpu_backend"):
        lesson11.groups_check(_groups_imported, 0)
    with pytest.raises(ExerciseError, match="my_offset_of line .*: uses at"):
        lesson11.offset_check(_offset_through_at)


@pytest.mark.parametrize(("n", "source", "found"), [
    (1, "from asgteach.backends.wgpu_kernels import broadcast_strides as bs\n", "imports from asgteach.backends"),
    (1, "f = lambda s, o, w=at.backends.wgpu_kernels: w.broadcast_strides(s, o)\n", "uses .broadcast_strides"),
    (3, "import asgteach\ngrid = asgteach.backends.wgpu_kernels.groups_for\n", "imports asgteach"),
    (3, "from asgteach.lessons.kernels import dispatches_for\n", "imports from asgteach.lessons"),
    (2, "grid = groups_for\n", "uses groups_for"),
])
def test_each_exercise_rule_names_the_backend(n: int, source: str, found: str) -> None:
    assert found in "\n".join(problems(source, lesson11.RULES[n]))


def test_plain_python_and_numpy_answers_keep_the_rules() -> None:
    answer = ("import math\nimport numpy as np\n\ndef my_groups(numel):\n    n = max(1, math.ceil(numel / 256))\n"
              "    x = min(n, 65535)\n    return x, math.ceil(n / x), 1\n\n"
              "def my_broadcast_strides(shape, out_shape):\n    full = np.array([1] * (len(out_shape) - len(shape))"
              " + list(shape))\n    return list(np.where(full == 1, 0, 1))\n")
    assert all(problems(answer, rule) == [] for rule in lesson11.RULES.values())
