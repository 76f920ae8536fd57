"""The explanations (asgteach/explain/*.toml) are complete, render, match the code, and stay in one language.

Every test that walks ops is parametrised over asgteach.ops.REGISTRY, so an op added
without text, without a numeric check, or with a formula that disagrees with its kernel
or backward rule fails here with the op's name (and the language) in the test id.
"""

from __future__ import annotations

import importlib
import io
import pkgutil
import re
import shutil
import subprocess
import sys
import warnings
from contextlib import contextmanager
from typing import Iterator

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
from matplotlib import mathtext  # noqa: E402

import asgteach as at  # noqa: E402
from asgteach import explain  # noqa: E402
from asgteach.explain import loader, records  # noqa: E402
from asgteach.explain.roles import ROLE_KEYS, resolve_role  # noqa: E402
import asgteach.ops  # noqa: E402
from asgteach.ops import CATEGORIES, REGISTRY  # noqa: E402
from asgteach.ops.leaves import KNOWN_INITS  # noqa: E402
from asgteach.opsamples import SampleInputs  # noqa: E402

from explain_cases import CASES, NOT_DIFFERENTIABLE, Case  # noqa: E402

LANGS = loader.languages()


def _all_ops() -> list[str]:
    """Every op the package can register: REGISTRY plus ops in asgteach/ops/ modules not imported yet.

    (Asked in a fresh interpreter, so importing them here does not change this session's registry.)
    """
    code = ("import importlib, pkgutil, asgteach.ops as o\n"
            "for m in pkgutil.iter_modules(o.__path__): importlib.import_module('asgteach.ops.' + m.name)\n"
            "print(' '.join(o.REGISTRY))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return sorted(set(out.split()) | set(REGISTRY))


OPS = _all_ops()


@contextmanager
def _registered(op: str) -> Iterator[None]:
    """Make ``op`` available for one test even if its module is not wired into asgteach.ops yet; undo after."""
    if op in REGISTRY:
        yield
        return
    saved, before = dict(REGISTRY), set(sys.modules)
    for m in pkgutil.iter_modules(asgteach.ops.__path__):
        importlib.import_module(f"asgteach.ops.{m.name}")
    try:
        yield
    finally:  # leave the registry and the module cache as they were, so a later import registers again
        REGISTRY.clear()
        REGISTRY.update(saved)
        for name in set(sys.modules) - before:
            if name.startswith("asgteach.ops."):
                del sys.modules[name]
                if hasattr(asgteach.ops, name.rsplit(".", 1)[1]):
                    delattr(asgteach.ops, name.rsplit(".", 1)[1])
CYRILLIC = re.compile(r"[\u0400-\u04FF]")
LATIN = re.compile(r"[A-Za-z]")


def _section(lang: str, section: str) -> dict:
    return loader.table(lang).get(section, {})


# --- which languages ---------------------------------------------------------------------------
def test_english_and_russian_ship() -> None:
    assert {"en", "ru"} <= set(LANGS)


def test_a_language_is_one_file(tmp_path, monkeypatch) -> None:
    for path in loader.HERE.glob("*.toml"):
        shutil.copy(path, tmp_path / path.name)
    text = (tmp_path / "en.toml").read_text(encoding="utf-8").replace('code = "en"', 'code = "xx"')
    (tmp_path / "xx.toml").write_text(text, encoding="utf-8")
    monkeypatch.setattr(loader, "HERE", tmp_path)
    loader.reload()   # the folder is read again: the new file is a language
    try:
        assert "xx" in explain.languages()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback warning: the new file answers
            assert explain.explain("add", lang="xx").lang == "xx"
    finally:
        monkeypatch.undo()
        loader.reload()


# --- completeness: every op, role, initialiser and category, in every language ----------------------
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("op", OPS)
def test_every_op_is_explained(op: str, lang: str) -> None:
    with _registered(op):  # its own OpSpec(explain=...) or [ops.<op>] in the language file
        rec = explain.op_record(op, lang)
    assert rec is not None, f"op {op} has no {lang!r} explanation: give explain= to its OpSpec or add [ops.{op}] " \
                            f"to {lang}.toml"
    for f in records.OP_FIELDS:
        value = rec.get(f)
        assert isinstance(value, str) and value.strip(), f"{lang}.toml [ops.{op}] needs a non-empty {f!r}"


@pytest.mark.parametrize("lang", LANGS)
def test_no_text_for_ops_that_do_not_exist(lang: str) -> None:
    stray = set(_section(lang, "ops")) - set(OPS)
    assert not stray, f"{lang}.toml explains ops the registry does not have: {sorted(stray)} (renamed?)"


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("key", ROLE_KEYS)
def test_every_role_is_explained(key: str, lang: str) -> None:
    rec = _section(lang, "roles").get(key)
    assert rec is not None, f'{lang}.toml has no [roles."{key}"]'
    for f in records.ROLE_FIELDS:
        assert isinstance(rec.get(f), str) and rec[f].strip(), f'{lang}.toml [roles."{key}"] needs a non-empty {f!r}'
    assert "{init}" in rec["what"], f'{lang}.toml [roles."{key}"].what must say how it was initialised: {{init}}'
    leftovers = set(re.findall(r"\{(\w+)\}", rec["what"] + rec["why"] + rec["pitfalls"])) - {
        "name", "shape", "layer", "init"}
    assert not leftovers, f"unknown placeholders {leftovers} in {lang}.toml [roles.{key}]"


@pytest.mark.parametrize("lang", LANGS)
def test_no_roles_that_nothing_resolves_to(lang: str) -> None:
    assert set(_section(lang, "roles")) == set(ROLE_KEYS)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name", KNOWN_INITS)
def test_every_initialiser_is_explained(name: str, lang: str) -> None:
    rec = _section(lang, "inits").get(name)
    assert rec is not None, f"{lang}.toml has no [inits.{name}]"
    for f in records.INIT_FIELDS:
        assert isinstance(rec.get(f), str) and rec[f].strip(), f"{lang}.toml [inits.{name}] needs {f!r}"


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name", CATEGORIES)
def test_every_category_is_explained(name: str, lang: str) -> None:
    rec = _section(lang, "categories").get(name)
    assert rec is not None, f"{lang}.toml has no [categories.{name}] (the legend needs it)"
    for f in records.CATEGORY_FIELDS:
        assert isinstance(rec.get(f), str) and rec[f].strip(), f"{lang}.toml [categories.{name}] needs {f!r}"


@pytest.mark.parametrize("lang", LANGS)
def test_labels_and_language_header(lang: str) -> None:
    assert set(_section(lang, "labels")) == set(_section("en", "labels"))
    assert _section(lang, "language").get("code") == lang


@pytest.mark.parametrize("lang", LANGS)
def test_every_ui_word_is_translated(lang: str) -> None:
    """The graph view's buttons and messages ([ui], read by asgteach.widgets.i18n) in every language."""
    from asgteach.widgets.i18n import t

    english, words = _section("en", "ui"), _section(lang, "ui")
    assert set(words) == set(english), f"{lang}.toml [ui] keys differ from English: {set(words) ^ set(english)}"
    for key, text in words.items():
        assert isinstance(text, str) and text.strip(), f"{lang}.toml [ui].{key} is empty"
        assert set(re.findall(r"\{\w+\}", text)) == set(re.findall(r"\{\w+\}", english[key])), \
            f"{lang}.toml [ui].{key} has other placeholders than English"
        assert t(key, lang) == text


# --- LaTeX: every formula renders, and is the same in every language --------------------------------
def _latex_strings() -> list[tuple[str, str]]:
    out = []
    for section, fields in (("ops", ("formula", "vjp")), ("roles", ("formula",)), ("inits", ("formula",))):
        for key, rec in sorted(_section("en", section).items()):
            out += [(f"{section}.{key}.{f}", rec[f]) for f in fields]
    return out


@pytest.mark.parametrize(("where", "tex"), _latex_strings(), ids=[w for w, _ in _latex_strings()])
def test_latex_renders(where: str, tex: str) -> None:
    assert "$" not in tex and "\\begin" not in tex and "\n" not in tex, f"{where}: one line, no $ or environments"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a mathtext warning is a bug in the formula too
        try:
            mathtext.math_to_image(f"${tex}$", io.BytesIO(), format="png")
        except Exception as e:  # noqa: BLE001 - report what mathtext said, with where it came from
            pytest.fail(f"{where} does not render with matplotlib mathtext: {tex!r}\n{type(e).__name__}: {e}")


@pytest.mark.parametrize("lang", [lang for lang in LANGS if lang != "en"])
def test_formulas_are_the_same_in_every_language(lang: str) -> None:
    for section, fields in (("ops", ("formula", "vjp")), ("roles", ("formula",)), ("inits", ("formula",))):
        for key, rec in _section("en", section).items():
            other = _section(lang, section).get(key, {})
            for f in fields:
                assert other.get(f) == rec[f], f"{lang}.toml [{section}.{key}].{f} differs from English (shared maths)"


# --- formulas verified against the kernels and the backward rules ------------------------------------
@pytest.mark.parametrize("op", OPS)
def test_formula_and_vjp_match_the_code(op: str) -> None:
    cases = CASES.get(op)
    assert cases, f"op {op!r} has no numeric check of its formula: add a Case to tests/explain_cases.py"
    with _registered(op):
        for k, c in enumerate(cases):
            _check_case(op, k, c)


def _check_case(op: str, k: int, c: Case) -> None:
    """Run one Case: the kernel against the formula, the backward graph against the vjp expression."""
    b = SampleInputs(1000 + k, leaf=c.leaf)
    with b.graph as g:
        xs = c.make(b)
        y = c.build(*xs)
        assert op in {n.op for n in g.nodes}, f"case {c.label!r} does not build a {op} node"
    arrays, feeds, rng = [b.values[t] for t in xs], b.feeds, b.rng
    got = at.run(y, feeds)
    want = c.formula(*arrays)
    assert got.shape == want.shape, f"{c.label}: kernel gives shape {got.shape}, the formula {want.shape}"
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=f"{c.label}: formula vs kernel")

    floats = [t for t, a in zip(xs, arrays) if a.dtype.kind == "f"]
    seed = rng.standard_normal(y.shape)
    if c.vjp == NOT_DIFFERENTIABLE:
        with pytest.raises(at.NotDifferentiableError, match=op):
            at.grad(y, floats, seed=seed)
        assert REGISTRY[op].not_differentiable, f"{op}: the text says not differentiable, the registry disagrees"
        return
    grads = at.grad(y, floats, seed=seed)
    values = at.run(grads, feeds)
    expected = c.vjp(*arrays, got, seed)
    assert len(expected) == len(values), f"{c.label}: the vjp expression gives {len(expected)} gradients"
    for i, (v, e) in enumerate(zip(values, expected)):
        e = np.broadcast_to(e, v.shape)
        np.testing.assert_allclose(v, e, rtol=1e-9, atol=1e-10, err_msg=f"{c.label}: vjp of input {i}")


@pytest.mark.parametrize("op", [op for op in REGISTRY if REGISTRY[op].zero_gradient or REGISTRY[op].not_differentiable])
def test_texts_of_ops_without_gradient_say_so(op: str) -> None:
    vjp = _section("en", "ops")[op]["vjp"]
    if REGISTRY[op].not_differentiable:
        assert "NotDifferentiableError" in vjp
    else:
        assert re.fullmatch(r"(\\frac\{\\partial L\}\{\\partial \w\} = 0(,\\quad )?)+", vjp), vjp


# --- one language per file ----------------------------------------------------------------------------
def test_no_cyrillic_in_english() -> None:
    text = (loader.HERE / "en.toml").read_text(encoding="utf-8")
    bad = [line for line in text.splitlines() if CYRILLIC.search(line)]
    assert not bad, f"Cyrillic in en.toml: {bad[:3]}"


def _prose(lang: str) -> list[tuple[str, str]]:
    out = []
    for section, fields in (("ops", ("headline", "what", "why", "pitfalls")), ("roles", ("what", "why", "pitfalls")),
                            ("inits", ("what",)), ("categories", ("label", "what")), ("labels", None)):
        for key, rec in _section(lang, section).items():
            if fields is None:
                out.append((f"labels.{key}", rec))
            else:
                out += [(f"{section}.{key}.{f}", rec[f]) for f in fields]
    return out


def _cyrillic_share(text: str) -> float:
    text = re.sub(r"`[^`]*`|\$[^$]*\$|\{\w+\}", " ", text)  # code, inline maths and placeholders are not prose
    cyr, lat = len(CYRILLIC.findall(text)), len(LATIN.findall(text))
    return cyr / (cyr + lat) if cyr + lat else 1.0


@pytest.mark.parametrize("lang", [lang for lang in LANGS if lang not in ("en",)])
def test_translated_prose_is_in_its_own_script(lang: str) -> None:
    if lang != "ru":
        pytest.fail(f"add the script check for {lang!r} here (which alphabet its prose uses)")
    low = [(w, round(_cyrillic_share(t), 2)) for w, t in _prose(lang) if _cyrillic_share(t) < 0.6]
    assert not low, f"{lang}.toml prose that is mostly not Cyrillic (field, share): {low}"
    for section in ("ops", "roles", "inits"):
        for key, rec in _section(lang, section).items():
            maths = rec.get("formula", "") + rec.get("vjp", "")
            assert not CYRILLIC.search(maths), f"Cyrillic in the maths of {lang}.toml [{section}.{key}]"


# --- the explain() API ------------------------------------------------------------------------------------
def test_explain_by_name_node_and_tensor() -> None:
    with at.Graph():
        x = at.input("x", (2, 3))
        y = at.relu(x)
    by_name, by_node, by_tensor = explain.explain("relu"), explain.explain(y.node), explain.explain(y)
    assert by_name == by_node == by_tensor
    assert by_name.category.name == "activation" and by_name.role is None
    ru = explain.explain(y, lang="ru")
    assert ru.lang == "ru" and ru.formula == by_name.formula and ru.what != by_name.what


def test_unknown_language_warns_and_falls_back_to_english() -> None:
    with pytest.warns(UserWarning, match=r"known languages: .*en.*ru") as rec:
        text = explain.explain("add", lang="xx")
    assert "'xx'" in str(rec[0].message)
    assert text == explain.explain("add", lang="en")


@pytest.mark.parametrize("spelling", ["ru", "RU", "ru-RU", "ru_RU", "Russian", "русский"])
def test_language_spellings(spelling: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert explain.explain("mul", lang=spelling).lang == "ru"


def test_unknown_op_is_a_clear_error() -> None:
    with pytest.raises(KeyError, match="relu"):
        explain.explain("relux")


def test_missing_record_falls_back_to_english_with_a_warning(monkeypatch) -> None:
    real = loader.table("ru")
    partial = {**real, "ops": {k: v for k, v in real["ops"].items() if k != "add"}}
    monkeypatch.setattr("asgteach.explain.table", lambda lang: partial if lang == "ru" else loader.table(lang))
    with pytest.warns(UserWarning, match=r"ru.toml has no \[ops.add\]"):
        text = explain.explain("add", lang="ru")
    assert text.headline == explain.explain("add", lang="en").headline


@pytest.mark.parametrize("lang", LANGS)
def test_parameter_node_gets_its_role_and_initialiser(lang: str) -> None:
    with at.Graph():
        w = at.parameter("fc1.weight", (3, 2), init="kaiming_normal", layer="fc1", role="weight")
        g = at.parameter("ln.gamma", (2,), init="ones", layer="ln", role="weight")
        e = at.parameter("emb", (10, 2), init="normal", layer="tok_emb", role="weight", std=0.02)
    rec = explain.explain(w, lang=lang)
    assert rec.op == "parameter" and rec.category.name == "parameter"
    assert rec.role is not None and rec.role.key == "linear.weight"
    init = explain.init("kaiming_normal", lang)
    assert rec.role.init is not None and rec.role.init.headline == init.headline
    assert init.headline in rec.role.what and "(3, 2)" in rec.role.what and "fc1" in rec.role.what
    assert not re.search(r"\{(name|shape|layer|init)\}", rec.role.what + rec.role.why + rec.role.pitfalls)
    ln = explain.explain(g, lang=lang).role
    assert ln.key == "layer_norm.weight" and explain.init("ones", lang).headline in ln.what
    emb = explain.explain(e, lang=lang).role
    assert emb.key == "embedding.weight" and "std=0.02" in emb.what  # init arguments are shown too


def test_parameter_without_metadata_is_still_explained() -> None:
    with at.Graph():
        p = at.parameter("theta", (4,), init="normal")
    rec = explain.explain(p)
    assert rec.role.key == "generic" and "theta" in rec.role.what


@pytest.mark.parametrize(("meta", "key"), [
    ({"layer": "fc1", "role": "weight"}, "linear.weight"),
    ({"layer": "mlp.0", "role": "bias"}, "linear.bias"),
    ({"layer": "ln_f", "role": "gamma"}, "layer_norm.weight"),
    ({"layer": "block0.norm1", "role": "beta"}, "layer_norm.bias"),
    ({"layer": "tok_emb", "role": "table"}, "embedding.weight"),
    ({"layer": "wte", "role": None}, "embedding.weight"),
    ({"layer": "pos_emb", "role": "weight"}, "positional.weight"),
    ({"layer": "blocks.0.attn", "role": "q_weight"}, "attention.query.weight"),
    ({"layer": "blocks.0.attn", "role": "w_k"}, "attention.key.weight"),
    ({"layer": "mha.v", "role": "bias"}, "attention.value.bias"),
    ({"layer": "blocks.1.attn.out_proj", "role": "weight"}, "attention.output.weight"),
    ({"layer": "block.ffn", "role": "w1"}, "feed_forward.in.weight"),
    ({"layer": "block.ffn.down", "role": "bias"}, "feed_forward.out.bias"),
    ({"layer": "conv1", "role": "weight"}, "conv2d.weight"),
    ({"layer": "c", "role": "bias", "layer_kind": "Conv2d"}, "conv2d.bias"),
    ({"layer": "c1", "role": "weight", "layer_kind": "Conv2d"}, "conv2d.weight"),
    ({"layer": "blk.ffn.fc_in", "role": "weight", "layer_kind": "Linear"}, "feed_forward.in.weight"),
    ({"layer": "enc", "role": "weight", "layer_kind": "MultiHeadAttention"}, "generic.weight"),
    ({"layer": "x", "role": "attention.key.bias"}, "attention.key.bias"),
    ({"layer": "mystery", "role": "weight"}, "generic.weight"),
    ({}, "generic"),
])
def test_role_resolution_from_metadata(meta: dict, key: str) -> None:
    assert resolve_role(meta) == key


def test_every_parameter_of_the_nn_layers_gets_its_specific_role() -> None:
    with at.Graph():
        layers = [at.nn.Linear(3, 4, name="fc"), at.nn.LayerNorm(4, name="ln"), at.nn.Embedding(10, 4, name="tok"),
                  at.nn.LearnedPositionalEmbedding(8, 4, name="pos"), at.nn.TransformerBlock(4, 2, name="blk")]
        params = [p for layer in layers for p in layer.parameters()]
    got = {p.name: resolve_role(p.node.meta) for p in params}
    want = {"fc.weight": "linear.weight", "fc.bias": "linear.bias", "ln.weight": "layer_norm.weight",
            "ln.bias": "layer_norm.bias", "tok.weight": "embedding.weight", "pos.weight": "positional.weight",
            "blk.ln1.weight": "layer_norm.weight", "blk.ln2.bias": "layer_norm.bias",
            "blk.ffn.fc_in.weight": "feed_forward.in.weight", "blk.ffn.fc_out.bias": "feed_forward.out.bias"}
    for proj in ("query", "key", "value", "output"):
        want[f"blk.attn.{proj}.weight"] = f"attention.{proj}.weight"
        want[f"blk.attn.{proj}.bias"] = f"attention.{proj}.bias"
    assert {k: got.get(k) for k in want} == want
    assert all(not key.startswith("generic") for key in got.values()), got


@pytest.mark.parametrize("lang", LANGS)
def test_categories_and_labels_api(lang: str) -> None:
    for name in CATEGORIES:
        cat = explain.category(name, lang)
        assert cat.name == name and cat.label and cat.lang == lang
    assert {"what", "formula", "vjp", "why", "pitfalls", "role", "init"} <= set(explain.labels(lang))
