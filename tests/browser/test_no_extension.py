"""The graph in a JupyterLab with no extension of ours: only the widget manager and anywidget's own.

asgteach installs no JupyterLab extension. The graph view is an anywidget: its browser code
(cytoscape.js and KaTeX, one ES module inside the wheel) travels from the kernel with the widget.
What the browser needs is what ``pip install anywidget`` brings with it: ``@jupyter-widgets/
jupyterlab-manager`` (ipywidgets' manager, from the jupyterlab_widgets package) and anywidget's
own small lab extension, which runs any anywidget's module. Both are prebuilt extensions that pip
installs with those packages (nothing to build or enable); a hub image or a student's
environment that has anywidget has them. So "no extension of ours" means: every other
federated extension of this environment is disabled for this server (ipycytoscape's
``jupyter-cytoscape``, left over in environments that had an older asgteach, among them), and
the graph must still draw and answer clicks.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from pathlib import Path

import pytest

from .harness import JupyterLab, Lab, browser, write_notebook

pytestmark = pytest.mark.slow  # a real JupyterLab and Chromium (./scripts/test runs it; the inner loop skips it)

#: What anywidget needs in the browser: the widget manager and anywidget's own extension (both come with pip).
NEEDED = {"@jupyter-widgets/jupyterlab-manager", "anywidget"}

CELLS = [
    """
import numpy as np
import asgteach as at

with at.Graph("bare") as g:
    x = at.input("x", (3, 2))
    w = at.parameter("w", (2, 2))
    y = at.sum(at.tanh(x @ w))
    at.grad(y, [w])
rng = np.random.default_rng(0)
at.show(y, feeds={x: rng.standard_normal((3, 2)), w: rng.standard_normal((2, 2))})
""",
    """
print("W=n%d" % w.node_id)
""",
]


def _federated(server: JupyterLab) -> tuple[set[str], set[str]]:
    """(every federated extension this server knows, the ones it disables), from its page's config data."""
    with urllib.request.urlopen(f"{server.url}/lab?token={server.token}", timeout=20) as r:
        page = r.read().decode()
    m = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S)
    assert m, page[:300]
    config = json.loads(m.group(1))
    names = {e["name"] for e in config.get("federated_extensions", [])}
    disabled = set(config.get("disabledExtensions", []))
    return names, {n for n in names if n in disabled or any(d.startswith(n + ":") for d in disabled)}


@pytest.fixture(scope="module")
def bare():
    server = JupyterLab()
    # every prebuilt extension installed here, except the two that anywidget needs, is turned off
    ext_root = Path(sys.prefix) / "share" / "jupyter" / "labextensions"   # the server runs in this environment
    installed = {str(p.parent.relative_to(ext_root)) for p in ext_root.glob("**/package.json")
                 if "node_modules" not in p.parts and "static" not in p.parts}
    labconfig = server.tmp / "config" / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    (labconfig / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {name: True for name in installed - NEEDED}}))
    with server:
        write_notebook(server.root / "bare.ipynb", CELLS)
        with browser(width=1400, height=1000) as page:
            lab = Lab(page, server)
            lab.installed = installed
            yield lab


def test_asgteach_brings_no_lab_extension(bare: Lab) -> None:
    names, off = _federated(bare.server)
    assert not [n for n in names if "asg" in n.lower()], f"a lab extension named like ours: {sorted(names)}"
    running = names - off
    assert running == NEEDED, f"this server should load only anywidget and the widget manager: {sorted(running)}"
    if "jupyter-cytoscape" in bare.installed:   # an environment that had the old graph view: it stays off here
        assert "jupyter-cytoscape" in off


def test_graph_draws_and_answers_clicks_without_any_extension_of_ours(bare: Lab) -> None:
    bare.open("bare.ipynb")
    bare.run_all()
    bare.wait_idle_cells(len(CELLS))
    bare.wait_graph(0, min_nodes=5)
    w = bare.page.locator(".jp-OutputArea-output", has_text="W=").first.inner_text().split("W=", 1)[1].strip()
    bare.click_node(w)
    bare.wait_inspector("Parameter")
    text = bare.inspector_text()
    assert "Value" in text and "Gradient" in text, text[:500]
    assert bare.wait_classes("selected", [w]) == [w]
    errors = [m for m in bare.console if m.startswith("pageerror") or "Failed to load model class" in m]
    assert not errors, bare.fail(f"the page reported errors: {errors}")
    bare.screenshot("no-extension-graph-and-inspector", bare.page.locator(".asg-graphview").first)
