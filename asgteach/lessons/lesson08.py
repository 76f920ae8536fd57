"""Lesson 8's checks (training an MLP): the accuracy is measured by the check, not read from the student.

* Exercises 1 and 2, ``my_adam_step`` and ``warmup_cosine``: checked in the notebook against asgteach's own
  optimizer and schedule, which are switched off (``without``) while the student's function runs;
  ``RULES[1]`` keeps the update in numpy.
* Exercise 3, a trained model: :func:`trained_accuracy` recomputes the test accuracy in numpy from the
  trainer's own parameters, so no number the student typed (``my_accuracy``) enters it; the notebook's
  check then compares the two.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..grading.exercises import ExerciseError
from ..grading.rules import Rule, no_asgteach

__all__ = ["LESSON", "RULES", "trained_accuracy"]

LESSON = "08-training-an-mlp"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    1: no_asgteach("the update in numpy"),
}


def trained_accuracy(trainer: Any, x_test: np.ndarray, y_test: np.ndarray) -> float:
    """The test accuracy of lesson 8's digits MLP (64-64-10, relu) from the trainer's OWN parameters.

    Computed here in numpy, so no number the student typed enters it.
    """
    params = getattr(trainer, "params", None)
    names = ("mlp.0.weight", "mlp.0.bias", "mlp.1.weight", "mlp.1.bias")
    if not isinstance(params, Mapping) or any(n not in params for n in names):
        have = sorted(params) if isinstance(params, Mapping) else type(params).__name__
        raise ExerciseError(f"my_trainer should train digits_model() (parameters {list(names)}), its parameters are "
                            f"{have}")
    w0, b0, w1, b1 = (np.asarray(params[n], dtype=np.float64) for n in names)
    hidden = np.maximum(np.asarray(x_test, dtype=np.float64) @ w0 + b0, 0.0)
    predicted = np.argmax(hidden @ w1 + b1, axis=-1)
    return float(np.mean(predicted == np.asarray(y_test)))
