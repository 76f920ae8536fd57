"""A user-defined op, from a notebook cell, works everywhere (issue 12, section 1).

The two ops below are defined HERE, the way a student defines one in a notebook cell, and no
file of the package knows them: one ``register(OpSpec(...))`` call each. Then numpy runs them,
``at.gradcheck`` checks them, the wgpu backend runs them alone and inside a fused elementwise
chain (with both number attributes of the second one), ``explain`` and the inspector show
their texts, ``asgteach check`` sweeps them with a derived sample, ``nn.MLP`` takes them as
activations — and ``registered(...)`` takes them away again, so no other test sees them.

The last test is the other half of "one op = one place": no module outside ``asgteach/ops/``
keeps a list of op names.
"""

from __future__ import annotations

import ast
import io
import pathlib
import warnings

import numpy as np
import pytest

import asgteach as at
from asgteach import explain, opcheck
from asgteach.ops import COMPOSITES, GPU, REGISTRY, OpSpec, apply, registered, unregister
from asgteach.ops.registry import register

HAS_WGPU = "wgpu" in at.available()
needs_wgpu = pytest.mark.gpu   # no adapter: skipped loudly (CI=true: failed); see tests/conftest.py

# --- the two ops, as a notebook cell would write them ------------------------------------------------
SOFTSIGN = dict(
    name="softsign", category="activation", arity=1,
    infer=lambda s, **_: s,
    numpy=lambda x: x / (1 + np.abs(x)),
    vjp=lambda c, g: (g / (1 + at.abs(c.inputs[0])) ** 2,),
    gpu=GPU(expr="x / (1.0 + abs(x))"),
    attrs={},
    explain={
        "en": {"headline": "Softsign: a slow-saturating tanh", "what": "Squashes x into (-1, 1) as x / (1 + |x|).",
               "formula": r"y = \frac{x}{1 + |x|}", "vjp": r"\frac{\partial L}{\partial x} = \frac{g}{(1 + |x|)^2}",
               "why": "Its tails approach ±1 polynomially, not exponentially, so gradients vanish more slowly.",
               "pitfalls": "Not differentiable twice at 0 (|x| has a kink there)."},
        "ru": {"headline": "Softsign: медленно насыщающийся tanh", "what": "Сжимает x в (-1, 1): x / (1 + |x|).",
               "formula": r"y = \frac{x}{1 + |x|}", "vjp": r"\frac{\partial L}{\partial x} = \frac{g}{(1 + |x|)^2}",
               "why": "Хвосты стремятся к ±1 степенным образом, а не экспоненциальным: градиенты гаснут медленнее.",
               "pitfalls": "Вторая производная в нуле не существует (у |x| там излом)."},
    },
)

# two number attributes, read by the GPU formula by their own names
SCALED = dict(
    name="scaled_softsign", category="activation", arity=1,
    infer=lambda s, **_: s,
    numpy=lambda x, alpha=1.0, beta=1.0: alpha * x / (1 + np.abs(beta * x)),
    vjp=lambda c, g: (g * c.attrs["alpha"] / (1 + at.abs(c.attrs["beta"] * c.inputs[0])) ** 2,),
    gpu=GPU(expr="alpha * x / (1.0 + abs(beta * x))"),
    attrs={"alpha": 1.0, "beta": 1.0},
    explain={
        "en": {"headline": "Scaled softsign", "what": "alpha x / (1 + |beta x|).",
               "formula": r"y = \frac{\alpha x}{1 + |\beta x|}",
               "vjp": r"\frac{\partial L}{\partial x} = \frac{\alpha g}{(1 + |\beta x|)^2}",
               "why": "Two knobs: the height alpha / beta of the plateaus and the slope alpha at 0.",
               "pitfalls": "beta = 0 makes it the line alpha x."},
        "ru": {"headline": "Масштабированный softsign", "what": "alpha x / (1 + |beta x|).",
               "formula": r"y = \frac{\alpha x}{1 + |\beta x|}",
               "vjp": r"\frac{\partial L}{\partial x} = \frac{\alpha g}{(1 + |\beta x|)^2}",
               "why": "Две ручки: высота плато alpha / beta и наклон alpha в нуле.",
               "pitfalls": "При beta = 0 это просто прямая alpha x."},
    },
)
NAMES = ("softsign", "scaled_softsign")


def _softsign(x: np.ndarray, alpha: float = 1.0, beta: float = 1.0) -> np.ndarray:
    return alpha * x / (1 + np.abs(beta * x))


@pytest.fixture
def user_ops():
    """The two ops, registered for one test and gone after it (whatever the test did)."""
    assert not set(NAMES) & set(REGISTRY), "a user op leaked in from another test"
    with registered(OpSpec(**SOFTSIGN), OpSpec(**SCALED)) as specs:
        yield specs
    assert not set(NAMES) & set(REGISTRY), "registered() must unregister them"


def _x(shape=(4, 5), seed=0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-3, 3, shape)


# --- the registry ------------------------------------------------------------------------------------
def test_register_with_keywords_fills_in_the_kernel_family_and_the_doc(user_ops) -> None:
    s = REGISTRY["scaled_softsign"]
    assert s.gpu.kernel == "elementwise" and s.float_attrs == ("alpha", "beta")
    assert s.doc == "Scaled softsign", "the English headline is the one-line doc"
    with pytest.raises(ValueError, match="registered twice"):
        register(OpSpec(**SOFTSIGN))


def test_unregister_and_registered_leave_nothing_behind() -> None:
    with registered(OpSpec(**SOFTSIGN)):
        assert "softsign" in at.ops.activations()
        with pytest.raises(RuntimeError):   # an error inside the block unregisters too
            with registered(OpSpec(**SCALED)):
                raise RuntimeError("boom")
        assert "scaled_softsign" not in REGISTRY
    assert "softsign" not in REGISTRY and "softsign" not in at.ops.activations()
    with pytest.raises(KeyError, match="unknown op 'softsign'"):
        with at.Graph():
            apply("softsign", at.input("x", (2,)))
    register(OpSpec(**SOFTSIGN))
    assert unregister("softsign").name == "softsign" and "softsign" not in REGISTRY


def test_register_refuses_what_a_kernel_could_not_use() -> None:
    with pytest.raises(ValueError, match=r"needs its formula, gpu=GPU\(expr="):
        register(OpSpec(**{**SOFTSIGN, "gpu": GPU(kernel="elementwise")}))
    with pytest.raises(TypeError, match=r"gpu is a GPU record, gpu=GPU\(\.\.\.\)"):
        OpSpec(**{**SOFTSIGN, "gpu": "x / (1.0 + abs(x))"})
    with pytest.raises(TypeError, match=r"OpSpec\(wgsl_expr=\.\.\.\) is now written gpu=GPU\(expr=\.\.\.\)"):
        OpSpec(**{**SOFTSIGN, "gpu": GPU(), "wgsl_expr": "x / (1.0 + abs(x))"})   # the spelling before GPU(...)
    with pytest.raises(ValueError, match="has the name of an input"):
        register(OpSpec(**{**SCALED, "attrs": {"x": 1.0}}))
    with pytest.raises(ValueError, match="must be text"):
        register(OpSpec(**{**SOFTSIGN, "explain": {"en": {"headline": 3}}}))
    assert not set(NAMES) & set(REGISTRY)


# --- numpy and gradients ---------------------------------------------------------------------------------
def test_numpy_runs_it_and_gradcheck_passes(user_ops) -> None:
    X = _x()
    with at.Graph():
        x = at.input("x", X.shape)
        y = apply("softsign", x)
        z = apply("scaled_softsign", x, alpha=2.5, beta=0.5)
        loss = at.sum(y * z)
    vy, vz = at.run([y, z], {x: X})
    np.testing.assert_allclose(vy, _softsign(X), rtol=1e-14)
    np.testing.assert_allclose(vz, _softsign(X, 2.5, 0.5), rtol=1e-14)
    for out in (y, z, loss):
        rep = at.gradcheck(out, [x], {x: X})
        assert rep.ok, rep.summary()


# --- the GPU: alone, and inside a fused chain -----------------------------------------------------------
@needs_wgpu
def test_wgpu_runs_it_alone_with_its_formula(user_ops) -> None:
    X = _x()
    with at.Graph():
        x = at.input("x", X.shape)
        y = apply("softsign", x)
        z = apply("scaled_softsign", x, alpha=2.5, beta=0.5)
    plan = at.compile([y, z], backend="wgpu")
    assert not plan.fusion.chains, "two outputs of x: each is its own one-op kernel"
    assert "return x / (1.0 + abs(x));" in plan.shader_for(y)
    src = plan.shader_for(z)
    assert "fn op(x: f32, alpha: f32, beta: f32) -> f32 { return alpha * x / (1.0 + abs(beta * x)); }" in src
    gy, gz = plan.run({x: X.astype(np.float32)})
    np.testing.assert_allclose(gy, _softsign(X), rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(gz, _softsign(X, 2.5, 0.5), rtol=2e-6, atol=2e-6)


@needs_wgpu
def test_wgpu_fuses_it_into_a_chain_and_honours_both_attributes(user_ops) -> None:
    X, B = _x(), _x((5,), 1)
    with at.Graph():
        x, b = at.input("x", X.shape), at.input("b", (5,))
        h = apply("softsign", x * 2.0 + b) * 0.5   # one chain: mul, add, softsign, mul (h is read twice)
        # two nodes of one op with different attributes, in one chain
        out = apply("scaled_softsign", h, alpha=2.5, beta=0.5) - apply("scaled_softsign", h, alpha=-1.0, beta=3.0)
        (dx,) = at.grad(at.sum(out), [x])   # the backward graph runs on the GPU too
    plan = at.compile([out], backend="wgpu")
    chains = {root: [plan.graph.nodes[m].op for m in c.members] for root, c in plan.fusion.chains.items()}
    assert chains == {h.node_id: ["mul", "add", "softsign", "mul"],
                      out.node_id: ["scaled_softsign", "scaled_softsign", "sub"]}, chains
    assert len(plan.dispatches) == 2, "two chains, two kernels"
    fused = plan.shader_for(out)
    assert "fn op_scaled_softsign(x: f32, alpha: f32, beta: f32) -> f32" in fused and fused.count("fn op_") == 2
    assert "fn op_softsign(x: f32) -> f32 { return x / (1.0 + abs(x)); }" in plan.shader_for(h)
    (got,) = plan.run({x: X.astype(np.float32), b: B.astype(np.float32)})
    want, want_dx = at.run([out, dx], {x: X, b: B})
    H = 0.5 * _softsign(2 * X + B)
    np.testing.assert_allclose(want, _softsign(H, 2.5, 0.5) - _softsign(H, -1.0, 3.0), rtol=1e-12)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    (got_dx,) = at.run([dx], {x: X.astype(np.float32), b: B.astype(np.float32)}, backend="wgpu")
    np.testing.assert_allclose(got_dx, want_dx, rtol=2e-5, atol=2e-5)


# --- texts: explain and the inspector --------------------------------------------------------------------
def test_explain_returns_the_registered_record(user_ops) -> None:
    from matplotlib import mathtext

    rec = explain.explain("softsign", "ru")
    assert rec.headline == SOFTSIGN["explain"]["ru"]["headline"] and rec.lang == "ru"
    assert rec.formula == r"y = \frac{x}{1 + |x|}" and rec.category.label == explain.category("activation", "ru").label
    assert explain.explain("scaled_softsign", "en").why.startswith("Two knobs")
    for name in NAMES:
        for f in ("formula", "vjp"):
            mathtext.math_to_image(f"${explain.op_record(name, 'en')[f]}$", io.BytesIO(), format="png")
    with registered(OpSpec(**{**SOFTSIGN, "name": "softsign_en", "explain": {"en": SOFTSIGN["explain"]["en"]}})):
        with pytest.warns(UserWarning, match=r"registered with no explain\['ru'\]"):
            assert explain.explain("softsign_en", "ru").lang == "ru"


def test_show_draws_it_and_the_inspector_shows_its_texts(user_ops) -> None:
    from asgteach.widgets import elements as E
    from asgteach.widgets.inspector import InspectorData, node_html

    X = _x()
    with at.Graph():
        x = at.input("x", X.shape)
        y = apply("scaled_softsign", x, alpha=2.0, beta=0.5)
        loss = at.sum(y)
        at.grad(loss, [x])
    view = at.show(loss, feeds={x: X}, display=False)
    drawn = [e["data"] for e in E.build_elements(E.scope_of(loss), "both") if e["group"] == "nodes"]
    assert any(d.get("label", "").startswith("scaled_softsign") for d in drawn), drawn
    for lang in ("en", "ru"):
        html = node_html(view.data, y.node_id, lang)
        rec = SCALED["explain"][lang]
        for field in ("headline", "why"):
            assert rec[field] in html, (lang, field)
        assert "\\frac{\\alpha x}{1 + |\\beta x|}" in html and "asg-formula" in html and "asg-vjp" in html
    assert "alpha" in node_html(InspectorData(view.data.graph), y.node_id, "en")   # its attributes are listed
    assert "<svg" in at.show(loss, static=True).data


# --- asgteach check, the test cases, nn ----------------------------------------------------------------------
def test_the_check_sweep_includes_it_with_a_derived_sample(user_ops, monkeypatch) -> None:
    from opcases import cases_for

    swept: list[str] = []
    monkeypatch.setattr(opcheck, "check_op", lambda op, backends: swept.append(op) or opcheck.OpResult(op, "", {}))
    opcheck.sweep(["numpy"], progress=False)
    assert set(NAMES) <= set(swept) and len(swept) == sum(not s.leaf for s in REGISTRY.values())
    monkeypatch.undo()
    backends = ["numpy"] + (["wgpu"] if HAS_WGPU else [])
    for name in NAMES:
        result = opcheck.check_op(name, backends)
        assert result.ok, result.results
        assert [c.label for c in cases_for(name)] == ["sample ()", "sample (5,)", "sample (2,3)"]
        for c in cases_for(name):
            b = c.build()
            assert at.gradcheck(b.y, b.xs, b.feeds).ok, c.id


def test_mlp_takes_a_registered_activation(user_ops) -> None:
    rng = np.random.default_rng(0)
    with at.Graph() as g:
        x = at.input("x", (4, 2))
        net = at.nn.MLP([2, 3, 1], activation="softsign", name="m")
        loss = at.sum(net(x) ** 2)
        params = net.parameters()
    assert sum(n.op == "softsign" for n in g.nodes) == 1
    assert net.layers[0].weight.node.meta["init"] == "xavier_uniform"
    feeds = {x: rng.standard_normal((4, 2)), **{p: rng.standard_normal(p.shape) for p in params}}
    assert at.gradcheck(loss, params, feeds).ok


def test_composites_are_activations_made_of_other_ops() -> None:
    assert {"hardtanh", "relu6", "gelu_tanh"} <= set(COMPOSITES) <= set(at.ops.activations())
    with at.Graph() as g:
        x = at.input("x", (5,))
        y = apply("hardtanh", x, min_val=-0.5, max_val=0.5)
        net = at.nn.MLP([5, 2], activation="relu6", name="r6")
    assert [n.op for n in g.nodes if n.op not in ("input", "parameter", "constant")][:2] == ["maximum", "minimum"]
    assert net.layers[0].weight.node.meta["init"] == "kaiming_uniform"
    X = np.array([-2.0, -0.3, 0.1, 0.7, 3.0])
    np.testing.assert_allclose(at.run(y, {x: X}), np.clip(X, -0.5, 0.5))
    with pytest.raises(ValueError, match="unknown activation 'softsine'"):
        at.nn.MLP([2, 1], activation="softsine")


# --- one place: no module outside asgteach/ops/ lists op names ----------------------------------------------
ROOT = pathlib.Path(__file__).resolve().parents[1] / "asgteach"

#: (file, the op names one literal holds) -> why it is not a list of ops. Each must still match something.
ALLOWED = {
    ("backends/wgpu_kernels.py", ("layer_norm", "softmax")):
        "the keys of _FAMILIES are WGSL kernel families (files in shaders/), two of which share an op's name",
    ("widgets/inspector.py", ("max", "mean")):
        "min/mean/max are the statistics the inspector prints (keys of widgets.values.stats), not ops",
    ("lessons/wgsl_standin.py", ("abs", "exp", "log", "max", "pow", "sign", "sqrt", "tanh")):
        "the keys of _WGSL_FUNCTIONS are WGSL's built-in functions (lesson 17's numpy stand-in for a GPU formula), "
        "some of which share an op's name",
    ("lessons/lesson03.py", ("add", "div", "exp", "mul", "sub", "tanh")):
        "what lesson 3's exercise 2 asks the student's MORE_RULES to hold (the lesson's RULES plus sub, div and "
        "exp): the exercise's statement, not a list of the registry's ops",
    ("lessons/lesson03.py", ("div", "exp", "sub")):
        "lesson 3's exercise 2: the three ops whose rules the student writes, each with its derivative (the "
        "exercise's statement, not a list of the registry's ops)",
}


def _op_name_literals() -> dict[tuple[str, tuple[str, ...]], int]:
    """Every list/tuple/set literal or dict display with two or more names of (non-leaf) ops, outside ops/.

    input/parameter/constant are the graph's leaf kinds, which code outside ops/ may name.
    """
    names = {n for n, s in REGISTRY.items() if not s.leaf} | set(COMPOSITES)
    found: dict[tuple[str, tuple[str, ...]], int] = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("ops/"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
                items = node.elts
            elif isinstance(node, ast.Dict):
                items = [k for k in node.keys if k is not None]
            else:
                continue
            hits = sorted({e.value for e in items if isinstance(e, ast.Constant) and e.value in names})
            if len(hits) >= 2:
                found[(rel, tuple(hits))] = node.lineno
    return found


def test_no_module_outside_ops_keeps_a_list_of_op_names() -> None:
    found = _op_name_literals()
    bad = [f"asgteach/{rel}:{line}: {list(ops)}" for (rel, ops), line in found.items()
           if (rel, ops) not in ALLOWED]
    assert not bad, ("op names listed outside asgteach/ops/ (move the knowledge into the ops' OpSpecs, or allow "
                     "the literal in ALLOWED with the reason it is not an op list):\n" + "\n".join(bad))
    stale = [k for k in ALLOWED if k not in found]
    assert not stale, f"ALLOWED entries that match nothing any more (delete them): {stale}"


def test_a_re_registered_op_runs_its_new_kernel_in_a_graph_that_already_ran():
    """A notebook re-runs its register cell with a fixed kernel: the graph compiled before must not keep the old
    one (plans cached on the graph are dropped when the registry changes)."""
    import asgteach as at
    from asgteach.ops import OpSpec, apply, register, unregister

    def make(factor):
        return OpSpec(**{**SOFTSIGN, "name": "scaled_test_op", "numpy": lambda x: factor * x,
                         "vjp": lambda c, g: (g * factor,), "gpu": GPU(expr=f"{factor:.1f} * x")})

    register(make(2.0))
    try:
        with at.Graph():
            x = at.input("x", (3,))
            y = apply("scaled_test_op", x)
        assert np.allclose(at.run(y, {x: np.ones(3)}), 2.0)
        unregister("scaled_test_op")
        register(make(3.0))
        assert np.allclose(at.run(y, {x: np.ones(3)}), 3.0), "the plan kept the old kernel"
    finally:
        unregister("scaled_test_op")
