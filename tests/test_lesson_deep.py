"""Lesson 14's checks (asgteach.lessons.lesson14): they pass the work and name what is wrong in the shortcuts."""

from __future__ import annotations

import math

import numpy as np
import pytest

import asgteach as at
from asgteach.grading.keys import load as load_keys
from asgteach.lessons import ExerciseError, lesson14
from asgteach.lessons.lesson14 import (
    FACTOR_CASES, clip_by_global_norm_check, clipped_training_check, grad_norm_ratio_check, measured_factor,
    predicted_factor_check,
)
from asgteach.nn.optim import clip_grad_norm

#: the course's answer keys (instructor/answer_keys.py): the references the checks compare with
answer_keys = load_keys()


# --- exercise 1 ----------------------------------------------------------------------------------------

def _ratio(loss, weights, feeds):
    grads = at.run(at.grad(loss, list(weights)), feeds)
    return float(np.linalg.norm(grads[0]) / np.linalg.norm(grads[-1]))


def test_the_ratio_check_passes_the_measurement() -> None:
    grad_norm_ratio_check(_ratio)


@pytest.mark.parametrize(("answer", "words"), [
    (lambda loss, weights, feeds: 1.0 / _ratio(loss, weights, feeds), "last over first"),
    (lambda loss, weights, feeds: np.linalg.norm(feeds[weights[0]]) / np.linalg.norm(feeds[weights[-1]]),
     "WEIGHTS' norms"),
    (lambda loss, weights, feeds: _ratio(loss, weights, feeds) ** 2, "squared norms"),
    (lambda loss, weights, feeds: 1.76e-19, "on a net of the check's"),
    (lambda loss, weights, feeds: [1.0, 2.0], "should return one number"),
])
def test_the_ratio_check_names_the_slip(answer, words: str) -> None:
    with pytest.raises(ExerciseError, match=words):
        grad_norm_ratio_check(answer)


# --- exercise 2 ----------------------------------------------------------------------------------------

def _measure_with_a_graph(width, std, slope):
    with at.Graph():
        x = at.input("x", (4, width))
        return float(np.linalg.norm(at.run(at.grad(at.sum(at.leaky_relu(x @ at.constant(
            std * np.ones((width, width))), slope)), x), {x: np.ones((4, width))})))


# answers as a notebook writes them: no global of the notebook holds what they import inside the function
_NOTEBOOK: dict = {"at": at, "np": np}
exec("def _imports_the_answer(width, std, slope):\n"
     "    from asgteach.grading.keys import load\n"
     "    return load().predicted_factor(width, std, slope)\n\n"
     "def _library_imported_inside(grads, max_norm):\n"
     "    from asgteach.nn.optim import clip_grad_norm   # read while the check has it switched off\n"
     "    return at.run(clip_grad_norm([at.constant(g) for g in grads], max_norm), {}), 0.0\n\n"
     "def _reference_imported_inside(grads, max_norm):\n"
     "    from asgteach.grading.keys import load\n"
     "    return load().clip_by_global_norm(grads, max_norm)\n", _NOTEBOOK)


def _factor(width, std, slope):
    return std * math.sqrt(width * (1 + slope ** 2) / 2)


def test_the_formula_agrees_with_the_checks_measurements_well_inside_the_tolerance() -> None:
    """The check is fair: the right prediction is within 2% of every measurement (it accepts 5%)."""
    for case in FACTOR_CASES:
        assert abs(measured_factor(*case) / _factor(*case) - 1) < 0.02, case


def test_the_factor_check_passes_the_prediction() -> None:
    predicted_factor_check(_factor)


@pytest.mark.parametrize(("answer", "words"), [
    (lambda width, std, slope: std * math.sqrt(width), r"off by about sqrt\(2\)"),           # the linear net's
    (lambda width, std, slope: std * math.sqrt(width * (1 + slope) / 2), "gradient's SQUARE"),
    (lambda width, std, slope: std * std * width * (1 + slope ** 2) / 2, "SQUARED norm"),
    (lambda width, std, slope: -1.0, "positive number"),
    (lambda width, std, slope: measured_factor(width, std, slope, seed=5), "the check's own answer"),
    (lambda width, std, slope: _measure_with_a_graph(width, std, slope), "PREDICT the factor"),
    (answer_keys.predicted_factor, "the check's own answer"),
    (_NOTEBOOK["_imports_the_answer"], "which the exercise asks you to write yourself"),
])
def test_the_factor_check_names_the_slip(answer, words: str) -> None:
    with pytest.raises(ExerciseError, match=words):
        predicted_factor_check(answer)


# --- exercise 3 ----------------------------------------------------------------------------------------

def _clip(grads, max_norm):
    norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
    scale = max_norm / norm if norm > max_norm else 1.0
    return [g * scale for g in grads], norm


def _clip_eps(grads, max_norm):   # PyTorch's formula, max_norm / (norm + 1e-6): passes too
    norm = np.sqrt(sum(np.sum(g * g) for g in grads))
    return [g * min(1.0, max_norm / (norm + 1e-6)) for g in grads], norm


def _norm(grads):
    return float(np.sqrt(sum(np.sum(g * g) for g in grads)))


def _per_tensor(grads, max_norm):
    return [g * min(1.0, max_norm / n) if (n := np.linalg.norm(g)) > 0 else g for g in grads], _norm(grads)


def _by_value(grads, max_norm):
    return [np.clip(g, -max_norm, max_norm) for g in grads], _norm(grads)


def _always(grads, max_norm):
    n = _norm(grads)
    return [g * max_norm / n if n > 0 else g for g in grads], n


def _zero_nan(grads, max_norm):
    n = _norm(grads)
    return [g / n * min(n, max_norm) for g in grads], n


def _after(grads, max_norm):
    clipped, n = _clip(grads, max_norm)
    return clipped, min(n, max_norm)


def _library(grads, max_norm):
    return at.run(at.optim.clip_grad_norm([at.constant(g) for g in grads], max_norm), {}), _norm(grads)


def _library_by_name(grads, max_norm):
    return at.run(clip_grad_norm([at.constant(g) for g in grads], max_norm), {}), _norm(grads)




@pytest.mark.parametrize("answer", [_clip, _clip_eps])
def test_the_clip_check_passes_global_norm_clipping(answer) -> None:
    clip_by_global_norm_check(answer)
    clipped_training_check(answer)


@pytest.mark.parametrize(("answer", "words"), [
    (_per_tensor, "its OWN norm"),
    (_by_value, "each ELEMENT"),
    (_always, "should come back unchanged"),
    (_zero_nan, "all zero, so their norm is 0"),
    (_after, "AFTER clipping"),
    (_library, "clip_grad_norm"),                                 # refused, by name or switched off
    (_library_by_name, "hands the work to asgteach's own clipping"),  # the library's function under a global name
    (_NOTEBOOK["_library_imported_inside"], "which the exercise asks you to write yourself"),
    (_NOTEBOOK["_reference_imported_inside"], "which the exercise asks you to write yourself"),
    (answer_keys.clip_by_global_norm, "hands the work to asgteach's own clipping"),
    (clip_grad_norm, "hands the work to asgteach's own clipping"),
    (lambda grads, max_norm: grads, "should return two things"),
])
def test_the_clip_check_names_the_slip(answer, words: str) -> None:
    with pytest.raises(ExerciseError, match=words):
        clip_by_global_norm_check(answer)


def test_the_clip_check_wants_the_norm_of_an_inf_gradient_to_be_inf() -> None:
    def hides_inf(grads, max_norm):
        clipped, n = _clip([np.where(np.isfinite(g), g, 0.0) for g in grads], max_norm)
        return clipped, n

    with pytest.raises(ExerciseError, match="should be inf"):
        clip_by_global_norm_check(hides_inf)


def test_the_training_check_fails_a_clip_that_does_nothing() -> None:
    with pytest.raises(ExerciseError, match="diverges without clipping"):
        clipped_training_check(lambda grads, max_norm: (grads, _norm(grads)))


def test_the_module_exports_only_the_checks() -> None:
    assert sorted(lesson14.__all__) == sorted(["LESSON", "RULES", "grad_norm_ratio_check", "predicted_factor_check",
                                               "clip_by_global_norm_check", "clipped_training_check"])
