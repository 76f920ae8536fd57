"""The GraphView in a real JupyterLab + Chromium: drawn, fitted, clickable, steppable, bilingual.

One JupyterLab server and one headless Chromium serve the whole module; each notebook is
run once and the tests then act on its output in order. Screenshots land in
test-artifacts/browser/ (look at them when a test fails, or to review the look).
"""

from __future__ import annotations

import json
import time

import pytest

from .harness import CHROMIUM, JupyterLab, Lab, browser, write_notebook
from .notebooks import MLP, TRANSFORMER

pytestmark = pytest.mark.slow  # a real JupyterLab and Chromium (./scripts/test runs it; the inner loop skips it)


@pytest.fixture(scope="module")
def lab():
    with JupyterLab() as server:
        write_notebook(server.root / "mlp.ipynb", MLP)
        write_notebook(server.root / "transformer.ipynb", TRANSFORMER)
        with browser() as page:
            yield Lab(page, server)


@pytest.fixture(scope="module")
def mlp(lab):
    lab.open("mlp.ipynb")
    lab.run_all()
    lab.wait_idle_cells(len(MLP))
    lab.wait_graph(0, min_nodes=5)
    text = lab.page.locator(".jp-OutputArea-output", has_text="EXPECTED=").first.inner_text()
    expected = json.loads(text.split("EXPECTED=", 1)[1].strip())
    return expected


def _fitted(lab: Lab, n: int = 0, timeout: float = 10.0) -> dict:
    """Wait until the drawn graph lies inside its canvas and fills a fair part of it."""
    deadline = time.monotonic() + timeout
    while True:
        r = lab.fit_report(n)
        inside = r["x1"] >= -2 and r["y1"] >= -2 and r["x2"] <= r["w"] + 2 and r["y2"] <= r["h"] + 2
        fills = (r["x2"] - r["x1"]) >= 0.5 * r["w"] or (r["y2"] - r["y1"]) >= 0.5 * r["h"]
        if (inside and fills and r["w"] > 100 and r["h"] > 100) or time.monotonic() > deadline:
            assert inside and fills, lab.fail(f"graph not fitted into its canvas: {r}")
            return r
        time.sleep(0.25)


def test_chromium_is_debian_package():
    import os

    assert os.path.exists(CHROMIUM), "apt-get install chromium: the browser tests use Debian's chromium"


def test_graph_is_drawn_and_fitted(lab, mlp):
    ids = lab.node_ids()
    for key in ("param", "tanh", "hostile", "fanout"):
        assert mlp[key] in ids, lab.fail(f"{key} node {mlp[key]} not drawn; drawn: {ids}")
    assert any(i.startswith("g:") for i in ids), "layer groups (compound boxes) should be drawn"
    r = _fitted(lab)
    assert r["n"] == len(ids)
    lab.screenshot("mlp_first_paint", lab.page.locator(".asg-graphview").first)


def test_click_updates_inspector(lab, mlp):
    lab.click_node(mlp["param"])
    lab.wait_inspector("mlp.0.weight")
    first = lab.inspector_text()
    assert "Parameter" in first and "Role in this model" in first, first[:600]
    assert "Value" in first and "Gradient" in first, "feeds were given: value and gradient stats expected"
    assert lab.wait_classes("selected", [mlp["param"]]) == [mlp["param"]]
    lab.click_node(mlp["tanh"])
    lab.wait_inspector("tanh")
    second = lab.inspector_text()
    assert second != first
    assert "Local derivative" in second, second[:800]
    assert lab.page.locator(".asg-inspector-panel .asg-math .katex math").count() > 0, \
        lab.fail("the formula was not typeset (KaTeX, as MathML)")
    lab.screenshot("mlp_inspector_tanh", lab.page.locator(".asg-graphview").first)
    # wgpu (lavapipe) is installed here, so the button is shown and brings the kernel's WGSL source
    wgsl = lab.page.locator("button.asg-wgsl").first
    wgsl.wait_for(state="visible", timeout=60_000)
    wgsl.click()
    lab.page.wait_for_function("() => { const p = document.querySelector('.asg-wgsl pre');"
                               " return p && p.innerText.includes('@compute'); }", timeout=60_000)


def test_hostile_node_name_is_text(lab, mlp):
    lab.click_node(mlp["hostile"])
    lab.wait_inspector("<img src=x onerror=alert(1)>")
    assert lab.page.locator(".asg-inspector-panel img[src='x']").count() == 0
    assert not [m for m in lab.console if m.startswith("DIALOG")], lab.fail("a node name ran as HTML")


def test_step_through_follows_the_engine_order(lab, mlp):
    steps = mlp["steps"]
    non_leaf = [s for s in steps if int(s[1:]) in set(mlp["order"])]
    assert non_leaf == [f"n{i}" for i in mlp["order"]]
    button = lab.page.locator("button.asg-step").first
    seen = []
    for k, want in enumerate(steps):
        button.click()
        lab.page.wait_for_function(
            "(s) => { const e = document.querySelector('.asg-step-status'); return e && e.innerText.startsWith(s); }",
            arg=f"Step {k + 1} of {len(steps)}", timeout=30_000)
        lab.page.wait_for_function(
            "([id]) => { const el = document.querySelector('.asg-graphview .asg-canvas');"
            " return el.asgCy.$('.step-current').map(e => e.data('key')).join() === id; }",
            arg=[want], timeout=30_000)
        seen.append(lab.classes_of("step-current")[0])
        if want == mlp["fanout"]:
            lab.wait_inspector("SUM of 2 contributions")
            lab.screenshot("mlp_step_fanout", lab.page.locator(".asg-graphview").first)
            widths = lab.page.evaluate(  # a long formula must scroll in its own box, not widen the panel
                "() => { const p = document.querySelector('.asg-inspector-panel');"
                " return [p.scrollWidth, p.clientWidth]; }")
            assert widths[0] <= widths[1] + 1, f"the inspector's text runs past its panel (scroll, client): {widths}"
    assert seen == steps
    lab.wait_inspector("The backward sweep is complete.")


def test_language_toggle(lab, mlp):
    lab.page.locator(".asg-lang button", has_text="RU").first.click()
    lab.wait_inspector("Технические детали")
    assert lab.page.locator("button.asg-fit", has_text="Вписать").count() == 1
    lab.click_node(mlp["tanh"])
    lab.wait_inspector("Локальная производная")
    lab.screenshot("mlp_russian", lab.page.locator(".asg-graphview").first)
    lab.page.locator(".asg-lang button", has_text="EN").first.click()
    lab.wait_inspector("Technical details")


def test_fit_button_refits_after_zoom(lab, mlp):
    # zoom is capped (2x) so labels stay sane: zoom in all the way and pan away instead
    lab.cy("cy.zoom(cy.maxZoom()); cy.pan({x: -3 * cy.width(), y: -3 * cy.height()}); return null;")
    r = lab.fit_report()
    assert r["x2"] < 0 or r["y2"] < 0, "panning away should leave the graph out of view"
    lab.page.locator("button.asg-fit").first.click()
    _fitted(lab)


def test_transformer_collapses_layers_and_expands_on_click(lab):
    lab.open("transformer.ipynb")
    lab.run_all()
    lab.wait_idle_cells(len(TRANSFORMER))
    lab.wait_graph(0, min_nodes=3)
    before = lab.node_ids()
    assert "g:block" in before, lab.fail(f"the transformer block should start collapsed; drawn: {before}")
    assert len(before) < 80, f"collapsed view should be small, got {len(before)} nodes"
    _fitted(lab)
    lab.screenshot("transformer_collapsed", lab.page.locator(".asg-graphview").first)
    lab.click_node("g:block")
    lab.page.wait_for_function(
        "(n) => { const el = document.querySelector('.asg-graphview .asg-canvas');"
        " const b = el.asgCy.nodes().filter(e => e.data('key') === 'g:block');"
        " return el.asgCy.nodes().length > n && b.nonempty() && b.isParent(); }",
        arg=len(before), timeout=60_000)
    lab.wait_inspector("block")
    after = lab.node_ids()
    assert "g:block.attn" in after, f"inner layers stay collapsed until clicked: {after}"
    # an open block is bigger than the canvas: the view pans rather than shrinking labels below legible
    time.sleep(3.0)
    px = lab.cy("return Math.min(...cy.nodes().map(n => parseFloat(n.style('font-size')) * cy.zoom()));")
    assert px >= 11 - 1e-6, lab.fail(f"labels shrank below 11 CSS px after opening the block: {px:.2f}")
    lab.screenshot("transformer_block_open", lab.page.locator(".asg-graphview").first)
