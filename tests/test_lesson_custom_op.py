"""Lesson 17's checks (asgteach.lessons.lesson17): right ops pass, each shortcut fails with its message.

Every op is registered for one test only (``registered``), so nothing leaks into the registry that
other tests read. The GPU half runs where an adapter exists; the no-GPU path (a numpy stand-in for
WGSL, announced loudly) is tested everywhere by switching the adapter off.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.grading.keys import load as load_keys
from asgteach.lessons import ExerciseError
from asgteach.lessons.lesson17 import bce_check, elu_check, wgsl_standin
from asgteach.ops import GPU, REGISTRY, OpSpec, registered

#: the course's answer keys (instructor/answer_keys.py): the references the checks compare with
answer_keys = load_keys()

_TEXT = {
    "en": {"headline": "ELU", "what": "x for x > 0, alpha (e^x - 1) otherwise",
           "formula": r"y = x \ (x > 0), \quad \alpha (e^x - 1)",
           "vjp": r"\frac{\partial L}{\partial x} = g \ (x > 0), \quad g \alpha e^x", "why": "smooth", "pitfalls": "-"},
    "ru": {"headline": "ELU", "what": "x при x > 0, иначе alpha (e^x - 1)",
           "formula": r"y = x \ (x > 0), \quad \alpha (e^x - 1)",
           "vjp": r"\frac{\partial L}{\partial x} = g \ (x > 0), \quad g \alpha e^x",
           "why": "гладкая", "pitfalls": "-"},
}
ELU = dict(
    name="elu", category="activation", arity=1, attrs={"alpha": 1.0}, infer=lambda s, **_: s,
    numpy=lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))),
    vjp=lambda c, g: (at.where(c.inputs[0] > 0, g, g * (c.out + c.attrs["alpha"])),),
    gpu=GPU(expr="select(alpha * (exp(min(x, 0.0)) - 1.0), x, x > 0.0)"), explain=_TEXT,
)
BCE = dict(
    name="bce_logits", category="loss", arity=2, infer=lambda a, b, **_: a,
    numpy=lambda z, t: np.maximum(z, 0) - z * t + np.log1p(np.exp(-np.abs(z))),
    vjp=lambda c, g: (g * (at.sigmoid(c.inputs[0]) - c.inputs[1]), -g * c.inputs[0]),
    gpu=GPU(expr="max(a, 0.0) - a * b + f_log1p(exp(-abs(a)))"),
)


def _sig(z):
    return 1 / (1 + np.exp(-z))


HAS_WGPU = "wgpu" in at.available()


@pytest.fixture(autouse=True)
def _registry_untouched_and_no_gpu_unless_asked(request, monkeypatch):
    """No op leaks; the checks use the numpy stand-in for WGSL except in the tests named *_on_the_gpu (fast).

    Practice mode: a judge run earlier in this process (tests/test_grading_sandbox.py) leaves IN_JUDGE set."""
    from asgteach.grading import exercises

    monkeypatch.setattr(exercises, "IN_JUDGE", False)
    if not request.node.name.endswith("_on_the_gpu"):
        monkeypatch.setattr(at.backends, "available", lambda: ["numpy"])   # as on a machine without an adapter
    before = set(REGISTRY)
    yield
    assert set(REGISTRY) == before, "a check (or a test) left an op registered"


def _fails(check, spec: dict, words: str, **changes) -> str:
    with registered(OpSpec(**{**spec, **changes})) as op:
        with pytest.raises(ExerciseError, match=words) as info:
            check(op, seed=3)
    return str(info.value)


def test_right_answers_pass() -> None:
    with registered(OpSpec(**ELU)) as op:
        elu_check(op, seed=1)
    with registered(OpSpec(**BCE)) as op:
        bce_check(op, seed=1)
    with registered(OpSpec(**{**BCE, "numpy": lambda z, t: np.logaddexp(0, z) - z * t,
                              "gpu": GPU(expr="f_softplus(a, 1.0) - a * b")})) as op:
        bce_check(op, seed=2)     # numpy's and the shader library's stable tools are fair game


def test_elu_rule_right_at_the_default_alpha_only() -> None:
    msg = _fails(elu_check, ELU, "right at alpha=1.0 only",
                 vjp=lambda c, g: (at.where(c.inputs[0] > 0, g, g * at.exp(c.inputs[0])),))
    assert "c.attrs['alpha']" in msg and "numerical" in msg


def test_elu_kernel_or_formula_with_the_number_written_in() -> None:
    _fails(elu_check, ELU, "right at alpha=1.0 only", numpy=lambda x, alpha=1.0: np.where(x > 0, x, np.expm1(x)))
    _fails(elu_check, ELU, "never names alpha", gpu=GPU(expr="select(exp(x) - 1.0, x, x > 0.0)"))
    # named, but not used: the GPU (or the stand-in) computes at the check's alphas and disagrees
    _fails(elu_check, ELU, r"your GPU formula .* is wrong at",
           gpu=GPU(expr="select(exp(x) - 1.0, x, x > 0.0) + 0.0 * alpha"))


def test_elu_registration_shape_rule_and_texts() -> None:
    with pytest.raises(ExerciseError, match="is not ELU: run your whole answer cell"):
        elu_check(OpSpec(**ELU))                                          # defined, never registered
    _fails(elu_check, ELU, "write \\*\\*_", infer=lambda s: s)            # the rule refuses alpha=...
    _fails(elu_check, ELU, r"attributes should be \{'alpha': 1.0\}", attrs={"beta": 1.0})
    _fails(elu_check, ELU, "has no Russian", explain={"en": _TEXT["en"], "ru": _TEXT["en"]})
    _fails(elu_check, ELU, "'en' and 'ru'", explain={"en": _TEXT["en"]})
    _fails(elu_check, ELU, "not LaTeX the inspector can draw",
           explain={"en": {**_TEXT["en"], "formula": r"\frac{x"}, "ru": _TEXT["ru"]})
    _fails(elu_check, ELU, "never numpy arrays", vjp=lambda c, g: (np.ones(3),))
    _fails(elu_check, ELU, "this check's own reference", numpy=answer_keys.elu)


def test_bce_at_extreme_logits() -> None:
    msg = _fails(bce_check, BCE, "overflows float64",
                 numpy=lambda z, t: -(t * np.log(_sig(z)) + (1 - t) * np.log(1 - _sig(z))))
    assert "extreme logits" in msg and "should be" in msg
    _fails(bce_check, BCE, "inf / inf",
           vjp=lambda c, g: (g * (at.exp(c.inputs[0]) / (1 + at.exp(c.inputs[0])) - c.inputs[1]), -g * c.inputs[0]))
    _fails(bce_check, BCE, "88.7", gpu=GPU(expr="log(1.0 + exp(a)) - a * b"))
    _fails(bce_check, BCE, "wrong for t", vjp=lambda c, g: (g * (at.sigmoid(c.inputs[0]) - c.inputs[1]), None))
    _fails(bce_check, BCE, "both inputs", gpu=GPU(expr="max(a, 0.0) + f_log1p(exp(-abs(a)))"))


def test_bce_refuses_the_librarys_softplus() -> None:
    _fails(bce_check, BCE, "the library's softplus", numpy=lambda z, t: REGISTRY["softplus"].numpy(z) - z * t)
    _fails(bce_check, BCE, "the library's softplus",
           vjp=lambda c, g: (g * (at.sigmoid(c.inputs[0]) - c.inputs[1]) + 0 * at.softplus(c.inputs[0]),
                             -g * c.inputs[0]))
    assert "softplus" in REGISTRY and REGISTRY["softplus"].numpy(np.array([0.0]))[0] == pytest.approx(np.log(2))


def test_the_librarys_kernel_or_the_reference_held_out_of_sight_is_refused() -> None:
    """The registry's softplus switched off does not switch off its kernel held in a default argument, nor does
    a name check see the reference reached by an attribute path built from strings: what runs is watched."""
    import operator

    _fails(bce_check, BCE, "the library's softplus",
           numpy=lambda z, t, _sp=REGISTRY["softplus"].numpy: _sp(z) - z * t)
    find = operator.attrgetter("grading.k" + "eys.load")      # at.grading.keys.load, named by strings
    _fails(elu_check, ELU, "the check's own reference", numpy=lambda x, alpha=1.0: find(at)().elu(x, alpha))
    _fails(bce_check, BCE, "the check's own reference",
           vjp=lambda c, g: (g * (answer_keys.sigmoid(c.inputs[0]) - c.inputs[1]), -g * c.inputs[0]))


def test_a_stub_is_not_done_yet_not_a_failure() -> None:
    def stub(z, t):
        raise NotImplementedError("exercise 2")

    with registered(OpSpec(**{**BCE, "numpy": stub})) as op:
        with pytest.raises(NotImplementedError):   # check(2) reports it as "not done yet"
            bce_check(op, seed=0)


@pytest.mark.gpu
def test_the_formulas_run_as_shaders_on_the_gpu(capsys) -> None:
    with registered(OpSpec(**ELU)) as op:
        elu_check(op, seed=5)
    with registered(OpSpec(**BCE)) as op:
        bce_check(op, seed=5)
    assert "NO WGPU ADAPTER" not in capsys.readouterr().out
    _fails(elu_check, ELU, r"on the GPU \(wgpu, float32\)",
           gpu=GPU(expr="select(exp(x) - 1.0, x, x > 0.0) + 0.0 * alpha"))
    msg = _fails(elu_check, ELU, "parsing error", gpu=GPU(expr="select(alpha * (exp(x) - 1.0), x, x > 0.0"))
    assert "on the wgpu backend failed" in msg
    _fails(bce_check, BCE, "got inf", gpu=GPU(expr="log(1.0 + exp(a)) - a * b"))


def test_without_a_gpu_the_standin_says_so_and_still_checks_the_formula(capsys) -> None:
    with registered(OpSpec(**ELU)) as op:
        elu_check(op, seed=4)
    assert "NO WGPU ADAPTER" in capsys.readouterr().out
    _fails(elu_check, ELU, "numpy stand-in", gpu=GPU(expr="select(exp(x) - 1.0, x, x > 0.0) + 0.0 * alpha"))
    _fails(elu_check, ELU, "a shader compiler would refuse it",
           gpu=GPU(expr="select(alpha * (exp(x) - 1.0), x, x > 0.0"))
    _fails(bce_check, BCE, "stand-in", gpu=GPU(expr="log(1.0 + exp(a)) - a * b"))   # float32 overflow, as on a GPU


def test_wgsl_standin() -> None:
    x = np.array([-2.0, 0.5], dtype=np.float32)
    np.testing.assert_allclose(wgsl_standin("select(alpha * x, x, x > 0.0 && x < 1.0f)", x=x, alpha=0.5), [-1.0, 0.5])
    assert np.isinf(wgsl_standin("log(1.0 + exp(x))", x=np.float32(100.0)))      # float32, like the GPU
    with pytest.raises(ValueError, match="names 'bitcast'"):
        wgsl_standin("bitcast(x)", x=x)
    with pytest.raises(ValueError, match="uses Attribute"):
        wgsl_standin("x.y", x=x)


def test_a_formula_in_katex_cases_is_drawable() -> None:
    """The exercise's own piecewise formula, as KaTeX writes it (\\begin{cases}), passes the texts' check."""
    cases = {**_TEXT["en"], "formula": r"y = \begin{cases} x & x > 0 \\ \alpha (e^x - 1) & x \leq 0 \end{cases}",
             "vjp": r"\frac{\partial L}{\partial x} = \begin{cases} g & x > 0 \\ g \, \alpha e^x & \text{otherwise}"
                    r"\end{cases}"}
    with registered(OpSpec(**{**ELU, "explain": {"en": cases, "ru": _TEXT["ru"]}})) as op:
        elu_check(op, seed=1)


def test_katex_short_names_of_relations_are_drawable() -> None:
    """\\le and \\ge are standard LaTeX, which KaTeX (the inspector) draws: the texts' check takes them."""
    short = {**_TEXT["en"], "formula": r"y = x \ (x > 0), \quad \alpha (e^x - 1) \ (x \le 0)",
             "vjp": r"\frac{\partial L}{\partial x} = g \ (x > 0), \quad g \alpha e^x \ (0 \ge x)"}
    with registered(OpSpec(**{**ELU, "explain": {"en": short, "ru": _TEXT["ru"]}})) as op:
        elu_check(op, seed=1)
    _fails(elu_check, ELU, "not LaTeX the inspector can draw",
           explain={"en": {**short, "formula": r"y \lessthan x \alpha"}, "ru": _TEXT["ru"]})


def test_in_the_judge_the_received_spec_is_checked_in_the_judges_registry(monkeypatch) -> None:
    """Graded mode: the answer's OpSpec arrives as a new OpSpec built by the judge's class from the submission's
    fields (its functions: handles into the sandbox, where the student registered the original). The check asks
    the submission's registry whether it holds those very functions, registers the received spec in this registry
    while it runs (the backends, autograd and the inspector read it there) and removes it afterwards."""
    import dataclasses

    from asgteach.grading import exercises
    from asgteach.grading.keys import KeysMissing

    submission_registry: dict[str, OpSpec] = {}
    monkeypatch.setattr(exercises, "IN_JUDGE", True)
    monkeypatch.setattr(exercises, "SUBMISSION_SIDE", lambda dotted: submission_registry.get)
    sent = OpSpec(**ELU)
    submission_registry["elu"] = sent
    received = dataclasses.replace(sent)          # what the wire builds: the same functions, equal data
    assert "elu" not in REGISTRY
    elu_check(received, seed=1)
    assert "elu" not in REGISTRY                  # the autouse fixture checks this too
    submission_registry["elu"] = OpSpec(**{**ELU, "numpy": lambda x, alpha=1.0: x})   # another op registered
    with pytest.raises(ExerciseError, match="is not ELU: run your whole answer cell"):
        elu_check(received, seed=1)
    del submission_registry["elu"]                # never registered there
    with pytest.raises(ExerciseError, match="is not ELU: run your whole answer cell"):
        elu_check(received, seed=1)

    # a kernel reaching for the keys where it runs (the sandbox has none): said for what it is
    def keys_kernel(x, alpha=1.0):
        raise KeysMissing("this check compares your answer with the course's answer keys, which ...")

    reaching = OpSpec(**{**ELU, "numpy": keys_kernel})
    submission_registry["elu"] = reaching
    with pytest.raises(ExerciseError, match="calls the check's own reference"):
        elu_check(dataclasses.replace(reaching), seed=1)
    assert "elu" not in REGISTRY
