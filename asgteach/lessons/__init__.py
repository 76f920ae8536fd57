"""What the lessons use besides asgteach itself: exercise checks, planted bugs, student versions.

An exercise in a lesson is two cells (see :mod:`asgteach.grading.exercises`)::

    from asgteach.lessons import exercise, check, check_array

    with exercise(1):
        ### BEGIN SOLUTION
        df_value = at.run(da, {a: A})
        ### END SOLUTION

    with check(1):
        check_array(df_value, expected, name="df/da")

* :mod:`~asgteach.grading.checks` compares an answer with the truth and, when it is wrong,
  says what and where (the node, the element, expected vs got) in an :class:`ExerciseError`;
* :mod:`~asgteach.lessons.bugs` plants wrong backward rules for the bug hunts;
* one module per lesson, ``lesson00`` ... ``lesson18`` (and ``lesson01b``), holds that lesson's
  ``LESSON`` (the notebook's stem), its checks whose answers must not sit in the notebook (a bug hunt's
  truth, the exact result a "by hand" answer must reproduce), run on inputs the student never saw, and
  ``RULES``, what each exercise's answer may not use; :mod:`~asgteach.lessons.common` holds what several
  of them share. The grading engine finds a lesson's module by walking this package
  (:func:`asgteach.grading.rules.lesson_modules`);
* :mod:`~asgteach.lessons.suspects` holds lesson 9's attention suspects (bugs in the forward graph,
  which gradcheck cannot see);
* :mod:`~asgteach.grading.student` writes the student versions (``asgteach student SRC OUT``):
  each solution becomes ``raise NotImplementedError("exercise N")``, which ``exercise(N)``
  reports as "exercise N: not done yet" so that the rest of the notebook still runs;
* :mod:`~asgteach.grading.nbcourse` writes the same lessons as an nbgrader course
  (``asgteach course DIR``), from the same markers.

(The lesson notebooks themselves live in the repository's ``lessons/`` folder; an installed
wheel puts them next to this package's modules.)
"""

from __future__ import annotations

from . import bugs
from ..grading.checks import (
    check_array, check_equal, check_function, check_node_values, check_tensor, check_true, check_vjp_rule,
    numerical_gradient, without,
)
from ..grading.exercises import ExerciseError, check, exercise, status

__all__ = [
    "ExerciseError", "exercise", "check", "status", "bugs", "check_array", "check_equal", "check_function",
    "check_node_values", "check_tensor", "check_true", "check_vjp_rule", "numerical_gradient", "without",
]
