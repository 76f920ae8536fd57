"""Lesson 8's checks (training an MLP): the accuracy is measured by the check, not read from the student.

* Exercise 1, ``my_adam_step``: checked in the notebook against asgteach's own optimizer, which is switched off
  (``without``) while the student's function runs; ``RULES[1]`` keeps the update in numpy.
* Exercise 2, ``warmup_cosine``: :func:`warmup_cosine_check` compares it with asgteach's schedules, switched off
  while it runs (practice mode); ``RULES[2]`` (no asgteach, nor section 3's ``schedules`` or its loop variable
  ``sched``, which hold the very schedule) is read from its source, in both modes: in graded mode the function runs
  in the sandbox, where switching the judge's library off does nothing.
* Exercise 3, a trained model, its rate chosen on a validation split: :func:`sgd_check`. The accuracies are the
  check's own measurements (:func:`trained_accuracy`, in numpy, from the trainer's parameters, on the check's own
  validation and test splits, made again as the lesson makes them), so no number the student typed
  (``my_val_accuracy``, which must agree with the validation measurement) and no split the submission holds enters
  them. The pass mark is on the validation split; the test accuracy is measured once and shown beside it. What the
  trainer says about itself (its class, its optimizer's class and hyperparameters, its loss history) is read from it: in
  graded mode through the judge's handle, as the submission's account of itself. That account tells an Adam
  trainer, or one that started from trained weights, from an SGD one trained from scratch; it is not a proof
  (a submission that forges a class and a history is forging, and reads so).
"""

from __future__ import annotations

import math
from functools import lru_cache
from types import SimpleNamespace
from typing import Any, Callable, Mapping

import numpy as np

from ..grading.checks import check_function, without
from ..grading.exercises import ExerciseError
from ..grading.remote import Remote, claimed_type
from ..grading.rules import STAND_INS, Rule, enforce, no_asgteach

__all__ = ["LESSON", "RULES", "trained_accuracy", "warmup_cosine_check", "sgd_check", "DIGITS_PARAMS", "MAX_EPOCHS",
           "VAL_PASS"]

LESSON = "08-training-an-mlp"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    1: no_asgteach("the update in numpy"),
    2: Rule(why="compute the schedule yourself: not with asgteach's schedules (no at, no asgteach), nor with "
                "section 3's `schedules` (or `sched`, its loop variable), which hold them",
            imports=STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach", "schedules", "sched"})),
}

#: the parameters of section 5's digits_model() (an MLP 64-64-10) and their shapes
DIGITS_PARAMS = {"mlp.0.weight": (64, 64), "mlp.0.bias": (64,), "mlp.1.weight": (64, 10), "mlp.1.bias": (10,)}
#: exercise 3's limit on the training
MAX_EPOCHS = 30
#: exercise 3's pass mark, on its validation split (270 images: one image is 0.37 points, and the standard error of an
#: accuracy near 0.95 is about 1.3 points; this split happens to be harder than the test split by about 3 points)
VAL_PASS = 0.93
#: an untrained digits_model() starts near ln 10 = 2.30 (2.3 to 2.8 with the library's initial weights); a trained
#: one is below 0.3. A history whose first loss is below this started from trained weights.
UNTRAINED_LOSS = 1.0


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


# --- exercise 2 ------------------------------------------------------------------------------------

def warmup_cosine_check(fn: Callable[[float, int], float]) -> None:
    """``fn(base_lr, step)``: linear warmup over steps 0-9 (``base_lr * (step + 1) / 10``), then half a cosine from
    ``base_lr`` at step 10 to exactly 0 at step 100, then 0 (the notebook states it so).

    Compared with ``LinearWarmup(10, CosineAnnealingLR(90))`` at steps on both sides of each turn, for three base
    rates. The exercise's rule (no asgteach, nor the lesson's own schedules) is read from ``fn``'s source; in
    practice mode the schedules are also switched off while ``fn`` runs.
    """
    import asgteach as at

    enforce(fn, RULES[2], "warmup_cosine")
    reference = at.optim.LinearWarmup(10, at.optim.CosineAnnealingLR(90))
    cases = [((base, s), reference(base, s)) for base in (0.1, 0.5, 0.003)
             for s in (0, 4, 9, 10, 11, 40, 55, 99, 100, 101, 150)]
    with without(attrs=[(at.optim.LinearWarmup, "__call__"), (at.optim.CosineAnnealingLR, "__call__")],
                 why="compute the schedule yourself"):
        check_function(fn, cases, name="warmup_cosine", rtol=1e-9, atol=1e-12)


# --- exercise 3 ------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _digits() -> dict[str, np.ndarray]:
    """Section 5's split and exercise 3's validation split of its training part, made here: the check's own,
    whatever the notebook holds. Keys: x_fit, y_fit, x_val, y_val, x_test, y_test."""
    from ..datasets import load_digits, train_test_split

    x_all, y_all = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(x_all, y_all, test_fraction=0.25, seed=0)
    x_fit, x_val, y_fit, y_val = train_test_split(x_train, y_train, test_fraction=0.2, seed=1)
    return dict(x_fit=x_fit, y_fit=y_fit, x_val=x_val, y_val=y_val, x_test=x_test, y_test=y_test)


def _class_name(obj: Any) -> str:
    """The dotted name of ``obj``'s class. In the judge, ``obj`` is a handle to an object of the submission: the
    name is the one the submission's process gave with it (the submission's word, not the judge's finding)."""
    return claimed_type(obj)


def _is(obj: Any, cls: type, subclass: bool = False) -> bool:
    """Is ``obj`` a ``cls`` (or, with ``subclass``, of a subclass)? In the judge: does the submission say so?"""
    if isinstance(obj, Remote):
        return _class_name(obj) == f"{cls.__module__}.{cls.__qualname__}"
    return isinstance(obj, cls) if subclass else type(obj) is cls


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        return None
    return float(x)


def sgd_check(trainer: Any, val_accuracy: Any) -> float:
    """Exercise 3: ``trainer`` trained section 5's digits_model() with plain SGD (momentum allowed) from fresh
    weights, on ``X_fit``, for at most 30 epochs, to at least :data:`VAL_PASS` accuracy on the validation split;
    ``val_accuracy`` is that accuracy, measured.

    * the accuracies are measured here (:func:`trained_accuracy`) from ``trainer.params`` (plain arrays), on the
      check's own validation and test splits (the lesson's, made again here), never from ``val_accuracy`` or the
      notebook's arrays; the validation one decides, the test one is printed beside it;
    * the trainer's class, its optimizer's class and hyperparameters (``optimizer.hyperparameters()``) and its loss
      history are what the trainer says about itself: in graded mode the submission's account, read through the
      judge's handle. They tell Adam from SGD, an untrained start (a first loss near ln 10) from trained weights
      loaded or passed in (``initial=``), and count the steps; they cannot prove how the weights were made.

    Returns the measured validation accuracy.
    """
    import asgteach as at

    split = _digits()
    if not _is(trainer, at.Trainer, subclass=True):
        raise ExerciseError(f"my_trainer should be the at.Trainer you trained, got {_class_name(trainer)}")
    opt = trainer.optimizer
    if not _is(opt, at.optim.SGD):
        raise ExerciseError(f"my_trainer's optimizer should be at.optim.SGD (momentum is allowed), got "
                            f"{_class_name(opt).rpartition('.')[2]}")
    hyper = opt.hyperparameters()
    lr = _number(hyper.get("lr")) if isinstance(hyper, Mapping) else None
    momentum = _number(hyper.get("momentum", 0.0)) if isinstance(hyper, Mapping) else None
    if lr is None or not math.isfinite(lr) or lr <= 0 or momentum is None or not 0 <= momentum < 1:
        raise ExerciseError(f"my_trainer's SGD should have a learning rate > 0 and a momentum in [0, 1): its "
                            f"hyperparameters are {hyper!r:.200}")

    history = trainer.history
    if not isinstance(history, list) or any(_number(h) is None for h in history):
        raise ExerciseError(f"my_trainer.history should be the list of its losses, got {type(history).__name__}")
    steps, limit = len(history), MAX_EPOCHS * (len(split["x_fit"]) // 64)
    if not 0 < steps <= limit:
        raise ExerciseError(f"train for at most {MAX_EPOCHS} epochs ({limit} steps); my_trainer ran {steps}")
    if not float(history[0]) >= UNTRAINED_LOSS:
        raise ExerciseError(f"my_trainer's first step had a loss of {float(history[0]):.3f}: that of a model already "
                            f"trained (a new digits_model() starts near ln 10 = 2.3). Train a new model from its "
                            "fresh weights with SGD, not from weights Adam trained (section 5's tr, or section 6's "
                            "file, loaded or passed as initial=)")

    params = trainer.params
    if not isinstance(params, Mapping) or any(n not in params for n in DIGITS_PARAMS):
        have = sorted(params) if isinstance(params, Mapping) else type(params).__name__
        raise ExerciseError(f"my_trainer should train digits_model() (parameters {list(DIGITS_PARAMS)}), its "
                            f"parameters are {have}")
    for name, shape in DIGITS_PARAMS.items():
        value = params[name]
        if not isinstance(value, np.ndarray) or value.shape != shape or not np.all(np.isfinite(value)):
            what = (f"shape {value.shape}" if isinstance(value, np.ndarray) else type(value).__name__)
            raise ExerciseError(f"my_trainer's parameter {name} should be a finite array of shape {shape} (a new "
                                f"digits_model()), got {what}")
    weights = SimpleNamespace(params=params)           # the arrays, read once
    measured = trained_accuracy(weights, split["x_val"], split["y_val"])
    if measured < VAL_PASS:
        raise ExerciseError(f"my_trainer's validation accuracy is {measured:.3f}: at least {VAL_PASS} is needed (try "
                            "another lr, momentum=0.9, or more epochs, and compare them on X_val)")
    mine = _number(val_accuracy)
    if mine is None or abs(mine - measured) >= 0.01:
        raise ExerciseError(f"my_val_accuracy is {val_accuracy!r:.60}, but my_trainer's parameters give "
                            f"{measured:.3f} on the validation split (X_val, y_val): measure it there, do not type "
                            "it (and not on the test split)")
    test = trained_accuracy(weights, split["x_test"], split["y_test"])
    print(f"SGD (lr={lr:g}, momentum={momentum:g}), {steps} steps: validation accuracy {measured:.3f}; the test "
          f"split, read once now: {test:.3f}")
    return measured

