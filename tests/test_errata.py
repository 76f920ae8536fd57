"""Issue 14's errata, each pinned by a test: texts that said something the code or the maths does not do."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import asgteach as at
from asgteach.explain import loader

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"


def _cells(stem: str) -> dict[str, dict]:
    nb = json.loads((LESSONS / f"{stem}.ipynb").read_text(encoding="utf-8"))
    return {c["id"]: c for c in nb["cells"]}


def _text(cell: dict) -> str:
    return "".join(cell["source"])


def _out(cell: dict) -> str:
    return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))


def test_error_vs_eps_title_puts_truncation_where_the_large_steps_are() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        y = at.sum(at.tanh(x) * x)
    report = at.gradcheck(y, [x], {x: np.array([0.3, -1.0, 2.0])})
    ax = report.plot().axes[-1]
    left, right = ax.get_xlim()
    assert left > right, "the eps axis runs from large (left) to small (right)"
    assert "truncation (left)" in ax.get_title() and "round-off (right)" in ax.get_title()
    eps, err = report.error_vs_eps()
    big, small = np.argmax(eps), np.argmin(eps)
    assert err[big] > 1e-9 and err[small] > 1e-9   # both ends of the V are errors: truncation and round-off


def test_lesson_07_repeats_the_plot_the_right_way_round() -> None:
    summary = _text(_cells("07-normalisation")["8ac016cb"])
    assert "truncation on the left" in summary and "round-off on the right" in summary


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_pooling_rules_index_their_sums_by_the_windows_that_hold_p_q(lang: str) -> None:
    ops = loader.table(lang)["ops"]
    for text in (ops["max_pool2d"]["vjp"], ops["max_pool2d_grad"]["formula"]):
        assert r"\sum_{(i,j):\ (p^{*}_{ij},\, q^{*}_{ij}) = (p,q)}" in text
    assert r"\sum_{(i,j):\ 0 \leq p - s i < k_h,\ 0 \leq q - s j < k_w}" in ops["avg_pool2d"]["vjp"]


def test_max_pool_gradient_adds_up_over_the_windows_a_cell_wins() -> None:
    """What the corrected formula says: overlapping windows (stride 1) send several gradients to one cell."""
    x = np.array([[0.0, 0.0, 0.0], [0.0, 9.0, 0.0], [0.0, 0.0, 0.0]]).reshape(1, 1, 3, 3)
    with at.Graph():
        xi = at.input("x", x.shape)
        (dx,) = at.grad(at.sum(at.max_pool2d(xi, 2, stride=1)), [xi])
    assert at.run(dx, {xi: x})[0, 0, 1, 1] == 4.0   # the centre wins all four 2x2 windows


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_masks_are_minus_1e9_as_in_the_code(lang: str) -> None:
    table = loader.table(lang)
    for text in (table["ops"]["where"]["why"], table["roles"]["attention.key.weight"]["pitfalls"]):
        assert "−1e9" in text and "NaN" in text, text
    assert float(at.nn.causal_mask(3)[0, 2]) == -1e9


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_erf_saturates_to_one_in_float32_only(lang: str) -> None:
    """What the pitfall says, done by our erf: at 4 it is 1 in float32 and not yet 1 in float64."""
    assert "float32" in loader.table(lang)["ops"]["erf"]["pitfalls"]
    with at.Graph():
        x = at.input("x", (2,))
        y = at.erf(x)
    assert at.run(y, {x: np.array([4.0, 6.0], np.float32)}).tolist() == [1.0, 1.0]
    at64 = at.run(y, {x: np.array([4.0, 6.0])})
    assert at64.dtype == np.float64 and at64[0] < 1.0 and at64[1] == 1.0


@pytest.mark.parametrize("term", ["Случайные значения", "инициализация Хе (Kaiming)", "дилатация d",
                                  "сквозные оценки", "Бенджио"])
def test_russian_terms(term: str) -> None:
    assert term in (ROOT / "asgteach" / "explain" / "ru.toml").read_text(encoding="utf-8")


def test_lesson_09_a_fully_masked_row_depends_on_the_dtype_and_finfo_min_is_finite_in_each() -> None:
    cells = _cells("09-attention-and-a-transformer-block")
    why = _text(cells["72f05dad"]) + _text(cells["b11f3835"])
    assert "**added**" in why and "**replace**" in why and "np.finfo(dtype).min" in why
    out = _out(cells["69a3debf"])
    own = re.search(r"the scores' own softmax: +(\[\[.*?\]\])", out).group(1)
    per_dtype = dict(re.findall(r"^(float\d\d): (.*?)(?=^float|^NaN|\Z)", out, re.M | re.S))
    added = {name: re.search(r"-1e9 added +(\[\[.*?\]\])", text).group(1) for name, text in per_dtype.items()}
    assert added == {"float64": own, "float32": "[[0.25 0.25 0.25 0.25]]", "float16": "[[nan nan nan nan]]"}
    assert "numbers near -1e9 are 64 apart" in per_dtype["float32"] and "-1e9 is -inf" in per_dtype["float16"]
    for text in per_dtype.values():     # finfo.min: finite in every dtype, uniform; added twice it overflows
        assert re.search(r"finfo.min added +\[\[0.25 0.25 0.25 0.25\]\]", text)
        assert re.search(r"finfo.min added twice +\[\[nan nan nan nan\]\]", text)
    assert "scores_row = np.array([[2.0, -1.0, 0.5, 0.0]])" in _text(cells["69a3debf"])   # non-zero scores
    assert "np.finfo(dtype).min" in _text(cells["32df4bf4"])


def test_lesson_10_explains_why_jvp_nodes_say_backward() -> None:
    cells = _cells("10-higher-order-and-forward-mode")
    assert "their phase: ['backward'], their mode: ['jvp']" in _out(cells["c009"])
    assert 'their `phase` is `"backward"`' in _text(cells["c010"])


def test_teaching_md_lists_every_lesson_and_four_bug_hunts() -> None:
    text = (ROOT / "docs" / "teaching.md").read_text(encoding="utf-8")
    for path in sorted(LESSONS.glob("*.ipynb")):
        number = path.name.split("-")[0]      # "01b" for lessons/01b-autograd-from-scratch.ipynb
        assert re.search(rf"^\| {number} \| ", text, re.M), f"{path.name} missing from the lesson list"
    assert "Four lessons are **bug hunts**" in text
    for step in ("asgteach course", "nbgrader generate_assignment", "nbgrader autograde", "nbgrader export",
                 "nbgrader generate_feedback"):
        assert step in text
