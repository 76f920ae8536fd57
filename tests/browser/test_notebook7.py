"""The GraphView in Notebook 7 (``jupyter notebook``), not only in JupyterLab.

Notebook 7 is built from JupyterLab's components but is a different application (its own
pages, menus and shell), and a class may be given either. This starts a real Notebook 7
server on 127.0.0.1 with a token, opens a notebook that calls ``at.show`` on a small graph in
headless Debian Chromium, waits for the cytoscape graph, clicks two nodes and checks that the
inspector follows. The screenshot lands in test-artifacts/browser/notebook7-*.png.

The helpers are tests/browser/harness.py's (same Chromium flags, same page helpers); only the
server differs, see :class:`Notebook7`.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request

import pytest

from .harness import JupyterLab, Lab, browser, write_notebook

pytestmark = pytest.mark.slow  # a real JupyterLab and Chromium (./scripts/test runs it; the inner loop skips it)

CELLS = [
    """
import json
import numpy as np
import asgteach as at

with at.Graph("nb7") as g:
    x = at.input("x", (3, 2))
    w = at.parameter("w", (2, 2))
    y = at.sum(at.tanh(x @ w))
    at.grad(y, [w])
rng = np.random.default_rng(0)
at.show(y, feeds={x: rng.standard_normal((3, 2)), w: rng.standard_normal((2, 2))})
""",
    """
ids = {"w": f"n{w.node_id}", "tanh": f"n{[n.id for n in g.nodes if n.op == 'tanh'][0]}"}
print("EXPECTED=" + json.dumps(ids))
""",
]


class Notebook7(JupyterLab):
    """A Notebook 7 server (``python -m notebook``) with the harness's isolation: temp root, config, token."""

    app_name = "Notebook 7"

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "notebook", "--no-browser", "--allow-root", "--ip=127.0.0.1",
            f"--port={self.port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}", f"--JupyterNotebookApp.workspaces_dir={self.tmp / 'workspaces'}",
            f"--JupyterNotebookApp.user_settings_dir={self.tmp / 'settings'}",
        ]

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/notebooks/{name}?token={self.token}"


@pytest.fixture(scope="module")
def nb7():
    with Notebook7() as server:
        write_notebook(server.root / "nb7.ipynb", CELLS)
        with browser(width=1400, height=1000) as page:
            yield Lab(page, server)


def test_notebook7_is_the_notebook_app(nb7: Lab) -> None:
    with urllib.request.urlopen(f"{nb7.server.url}/tree?token={nb7.server.token}", timeout=10) as r:
        page = r.read().decode()
    m = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S)
    assert r.status == 200 and m, page[:300]
    config = json.loads(m.group(1))
    assert config["appName"] == "Jupyter Notebook" and config["appVersion"].startswith("7."), \
        {k: config.get(k) for k in ("appName", "appVersion")}


def test_graph_draws_and_a_click_fills_the_inspector(nb7: Lab) -> None:
    nb7.open("nb7.ipynb")
    assert "/notebooks/nb7.ipynb" in nb7.page.url and "/lab" not in nb7.page.url, nb7.page.url
    nb7.run_all()
    nb7.wait_idle_cells(len(CELLS))
    nb7.wait_graph(0, min_nodes=5)
    text = nb7.page.locator(".jp-OutputArea-output", has_text="EXPECTED=").first.inner_text()
    ids = json.loads(text.split("EXPECTED=", 1)[1].strip())
    drawn = nb7.node_ids()
    assert ids["w"] in drawn and ids["tanh"] in drawn, nb7.fail(f"nodes not drawn: {ids} vs {drawn}")

    before = nb7.inspector_text()
    nb7.click_node(ids["w"])
    nb7.wait_inspector("Parameter")
    first = nb7.inspector_text()
    assert first != before, nb7.fail("clicking the parameter did not change the inspector")
    assert "Value" in first and "Gradient" in first, first[:600]
    nb7.click_node(ids["tanh"])
    nb7.wait_inspector("tanh")
    second = nb7.inspector_text()
    assert second != first, nb7.fail("clicking tanh did not change the inspector")
    assert nb7.wait_classes("selected", [ids["tanh"]]) == [ids["tanh"]]
    shot = nb7.screenshot("notebook7-graph-and-inspector")
    assert shot.stat().st_size > 20_000, "the screenshot should show the graph and the inspector"
