"""Hostile names in a real JupyterLab: shown as typed, never typeset, never run.

JupyterLab's MathJax loads every TeX package (``\\href`` included) and typesets ``text/html``
outputs; the graph view's inspector typesets its own formula boxes (``.asg-math``) with KaTeX.
A graph whose every name is hostile is shown, its nodes clicked (in English and Russian, and through the step-through),
and the page checked: no ``<a href="javascript:...">``, no typeset maths (KaTeX or MathJax) outside our own
formula boxes (``.asg-math``), no ``<img src=x>``, no dialog, and the names readable as
typed. tests/test_widget_escape.py checks the same on the HTML strings, for every page.
"""

from __future__ import annotations

import json

import pytest

from .harness import JupyterLab, Lab, browser, write_notebook

pytestmark = pytest.mark.slow  # a real JupyterLab and Chromium (./scripts/test runs it; the inner loop skips it)

HREF = r"$\href{javascript:alert(1)}{x}$"
PAREN = r"\(x\)"
BRACKET = r"\[x\]"
IMG = "<img src=x onerror=alert(1)>"
ENV = r"\begin{align}\href{javascript:alert(2)}{e}\end{align}"

NOTEBOOK = [
    f"""
import json
import numpy as np
import asgteach as at

HREF, PAREN, BRACKET, IMG, ENV = {HREF!r}, {PAREN!r}, {BRACKET!r}, {IMG!r}, {ENV!r}
with at.Graph("hostile") as g:
    x = at.input(HREF, (3, 2))
    w = at.parameter(PAREN, (2, 2), layer=IMG, role="weight", layer_kind="Linear")
    b = at.parameter(BRACKET, (2,), layer=IMG, role="bias", init="zeros")
    c = at.constant(np.full(2, 0.5), name=ENV)
    mm = at.matmul(x, w)  # its "local derivative" section names its inputs
    z = (mm + b) * c
    y = at.sum(at.tanh(z) + z)  # z is used twice: a step shows a sum formula
    at.grad(y, [x, w, b])
rng = np.random.default_rng(0)
feeds = {{x: rng.standard_normal((3, 2)), w: rng.standard_normal((2, 2)), b: rng.standard_normal(2)}}
print("EXPECTED=" + json.dumps({{"x": f"n{{x.node_id}}", "w": f"n{{w.node_id}}", "b": f"n{{b.node_id}}",
                                 "c": f"n{{c.node_id}}", "mm": f"n{{mm.node_id}}"}}))
""",
    """
view = at.show(y, feeds=feeds, display=False, collapse=False)
view
""",
    """
at.show(y, static=True)
""",
]

#: JS: everything in the inspector panel that betrays a name turned into markup or maths.
_LEAKS = """() => {
  const p = document.querySelector('.asg-inspector-panel');
  const out = {anchors: [], stray_math: [], ignored_math: 0, imgs: 0, math: 0};
  for (const a of p.querySelectorAll('a')) out.anchors.push(a.getAttribute('href') || '');
  for (const m of p.querySelectorAll('.katex, math, mjx-container, .MathJax')) {
    if (!m.closest('.asg-math')) out.stray_math.push(m.textContent.slice(0, 80));
    else if (m.matches('.katex')) out.math++;
  }
  out.ignored_math = p.querySelectorAll('.mathjax_ignore :is(.katex, math, mjx-container, .MathJax)').length;
  out.imgs = p.querySelectorAll('img:not(.asg-heatmap)').length;
  return out;
}"""


@pytest.fixture(scope="module")
def hostile_lab():
    with JupyterLab() as server:
        write_notebook(server.root / "hostile.ipynb", NOTEBOOK)
        with browser() as page:
            dialogs: list[str] = []
            page.on("dialog", lambda d: dialogs.append(f"{d.type}: {d.message}"))
            lab = Lab(page, server)
            lab.dialogs = dialogs
            lab.open("hostile.ipynb")
            lab.run_all()
            lab.wait_idle_cells(len(NOTEBOOK))
            lab.wait_graph(0, min_nodes=5)
            text = lab.page.locator(".jp-OutputArea-output", has_text="EXPECTED=").first.inner_text()
            lab.expected = json.loads(text.split("EXPECTED=", 1)[1].strip())
            yield lab


def _typeset(lab: Lab) -> None:
    """Wait until the panel is typeset (our formula boxes hold KaTeX's MathML)."""
    try:
        lab.page.wait_for_function(
            "() => { const p = document.querySelector('.asg-inspector-panel');"
            " const boxes = p.querySelectorAll('.asg-math');"
            " return boxes.length > 0 && [...boxes].every(b => b.querySelector('.katex math')); }",
            timeout=60_000)
    except Exception as e:  # noqa: BLE001 - re-raised with the page's state
        raise AssertionError(lab.fail(f"the inspector's formulas were never typeset: {e}")) from e


def _check_clean(lab: Lab, where: str) -> dict:
    leaks = lab.page.evaluate(_LEAKS)
    assert not leaks["anchors"], lab.fail(f"{where}: links in the inspector: {leaks['anchors']}")
    assert not leaks["stray_math"], lab.fail(f"{where}: typeset text outside our formulas: {leaks}")
    assert leaks["ignored_math"] == 0 and leaks["imgs"] == 0, lab.fail(f"{where}: {leaks}")
    assert leaks["math"] > 0, "our own formulas are still typeset"
    assert not lab.dialogs and not [m for m in lab.console if m.startswith("DIALOG")], \
        lab.fail(f"{where}: a dialog fired: {lab.dialogs}")
    return leaks


def _click_and_check(lab: Lab, key: str, name: str, where: str) -> None:
    node = lab.expected[key][1:]
    for attempt in range(3):  # wait for this node's page, not the last one (which may name this node too)
        lab.click_node(lab.expected[key])
        try:
            lab.page.wait_for_selector(f'.asg-inspector-panel .asg-inspector[data-node="{node}"]', timeout=10_000)
            break
        except Exception as e:  # noqa: BLE001 - a click during a redraw can be lost: click again
            if attempt == 2:
                raise AssertionError(lab.fail(f"{where}: clicks on #{node} never reached the inspector: {e}")) from e
    lab.wait_inspector(name)  # innerText: the name reads exactly as typed
    _typeset(lab)
    _check_clean(lab, where)
    if key == "mm":  # not its own name: the names of its inputs, in the local-derivative section
        local = lab.page.locator(".asg-inspector-panel .asg-local").first.inner_text()
        assert HREF in local and PAREN in local, lab.fail(f"{where}: input names not shown as typed: {local[:300]}")
        return
    shown = lab.page.locator(".asg-inspector-panel .asg-name .mathjax_ignore").first
    assert shown.is_visible() and shown.inner_text() == name, lab.fail(f"{where}: the name is not shown as typed")


def test_hostile_names_stay_text_in_the_inspector(hostile_lab, tmp_path):
    lab = hostile_lab
    for key, name in (("mm", "Local derivative"), ("x", HREF), ("w", PAREN), ("b", BRACKET), ("c", ENV)):
        _click_and_check(lab, key, name, f"EN {key}")
    # the role text names the parameter and its layer (both hostile), in prose
    _click_and_check(lab, "w", PAREN, "EN w again")
    role_box = lab.page.locator(".asg-inspector-panel .asg-role").first
    role = role_box.inner_text()
    assert PAREN in role and IMG in role, role[:400]
    role_box.scroll_into_view_if_needed()
    role_box.screenshot(path=str(tmp_path / "injection_role.png"))
    lab.page.screenshot(path=str(tmp_path / "injection_en.png"))
    lab.screenshot("injection_en", lab.page.locator(".asg-graphview").first)

    lab.page.locator(".asg-lang button", has_text="RU").first.click()
    lab.wait_inspector("Технические детали")
    for key, name in (("mm", "Локальная производная"), ("x", HREF), ("w", PAREN)):
        _click_and_check(lab, key, name, f"RU {key}")
    lab.page.screenshot(path=str(tmp_path / "injection_ru.png"))
    lab.page.locator(".asg-lang button", has_text="EN").first.click()
    lab.wait_inspector("Technical details")

    # the step-through text names each node too; one step shows a sum formula of its own
    button = lab.page.locator("button.asg-step").first
    for k in range(6):
        button.click()
        lab.page.wait_for_function(
            "(s) => { const e = document.querySelector('.asg-step-status'); return e && e.innerText.startsWith(s); }",
            arg=f"Step {k + 1} of", timeout=30_000)
        _typeset(lab)
        _check_clean(lab, f"step {k + 1}")
    lab.page.screenshot(path=str(tmp_path / "injection_step.png"))
    print("screenshots:", tmp_path)


def test_static_picture_output_is_not_typeset(hostile_lab):
    """``at.show(y, static=True)``: the picture (SVG beside a PNG); its names are SVG text, never maths or links."""
    lab = hostile_lab
    out = lab.page.locator(".jp-Notebook .jp-Cell").nth(2).locator(".jp-OutputArea-output").first
    out.wait_for(state="attached", timeout=30_000)
    found = out.evaluate(
        "async (o) => { const img = o.querySelector('img');"
        " let svg = o.querySelector('svg');"
        " if (!svg && img && img.src.startsWith('data:image/svg')) {"
        "   const text = await (await fetch(img.src)).text();"
        "   svg = new DOMParser().parseFromString(text, 'image/svg+xml').documentElement; }"
        " return {math: o.querySelectorAll('.katex, math, mjx-container, .MathJax').length,"
        " a: o.querySelectorAll('a').length, how: svg ? (o.querySelector('svg') ? 'inline svg' : 'svg image')"
        " : (img ? img.src.slice(0, 22) : o.innerHTML.slice(0, 200)),"
        " text: svg ? [...svg.querySelectorAll('text')].map(t => t.textContent).join('|') : ''}; }")
    assert found["math"] == 0 and found["a"] == 0, lab.fail(f"the picture was typeset: {found}")
    assert HREF in found["text"] and PAREN in found["text"] and BRACKET in found["text"], found
    assert not lab.dialogs, lab.fail(f"a dialog fired: {lab.dialogs}")
