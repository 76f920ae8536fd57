"""The GraphView in marimo: a real ``marimo run`` app in headless Debian Chromium, clicked.

marimo is not Jupyter: it has no ipywidgets manager and no IPython display, but it draws
anywidgets itself (its own front-end loads the widget's ES module from the kernel). The graph
view is one anywidget (asgteach/widgets/canvas.py), and ``GraphView._display_`` hands it to
marimo, so ``at.show(y, ...)`` as a cell's last expression is the clickable graph.

This starts ``marimo run`` on 127.0.0.1 (no token, a random port, no network) with a small app
that calls ``at.show``, waits for the cytoscape graph (marimo may draw the widget inside a shadow
root: the page scripts look through open shadow roots), clicks two nodes and checks that the
inspector follows, and takes a screenshot (test-artifacts/browser/marimo-*.png).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from .harness import ARTIFACTS, browser, free_port

pytestmark = pytest.mark.slow  # a marimo server and Chromium (./scripts/test runs it; the inner loop skips it)

APP = '''
import marimo

app = marimo.App(width="full")


@app.cell
def _():
    import numpy as np
    import asgteach as at

    with at.Graph("mo") as g:
        x = at.input("x", (3, 2))
        w = at.parameter("w", (2, 2))
        y = at.sum(at.tanh(x @ w))
        at.grad(y, [w])
    rng = np.random.default_rng(0)
    at.show(y, feeds={x: rng.standard_normal((3, 2)), w: rng.standard_normal((2, 2))})
    return


if __name__ == "__main__":
    app.run()
'''

#: JS: every element matching a selector, in the page and inside open shadow roots.
_FIND = """(sel) => { const out = [];
  const walk = (root) => { out.push(...root.querySelectorAll(sel));
    for (const e of root.querySelectorAll('*')) if (e.shadowRoot) walk(e.shadowRoot); };
  walk(document); return out; }"""


class Marimo:
    """``marimo run APP`` on 127.0.0.1, its own HOME and config (always stopped)."""

    def __init__(self, app: str) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="asg-marimo-"))
        self.app = self.tmp / "app.py"
        self.app.write_text(app)
        self.port = free_port()
        self.log_path = self.tmp / "marimo.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "Marimo":
        env = dict(os.environ, HOME=str(self.tmp), XDG_CONFIG_HOME=str(self.tmp / "config"),
                   ASGTEACH_NO_PROGRESS="1", MARIMO_SKIP_UPDATE_CHECK="1")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "marimo", "run", str(self.app), "--headless", "--host", "127.0.0.1",
             "--port", str(self.port), "--no-token"],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=str(self.tmp), start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"marimo exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url, timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"marimo did not answer within 60 s:\n{self.log_tail()}")

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(timeout=10)
        self._log.close()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def test_marimo_draws_the_graph_and_a_click_fills_the_inspector() -> None:
    with Marimo(APP) as server, browser(width=1400, height=1000) as page:
        console: list[str] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))

        def fail(what: str) -> str:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "marimo-failure.png"))
            return f"{what}\n--- console ---\n" + "\n".join(console[-25:]) + f"\n--- marimo ---\n{server.log_tail()}"

        page.goto(server.url, timeout=60_000)
        cy = f"(n) => {{ const el = ({_FIND})('.asg-graphview .asg-canvas')[n || 0]; return el && el.asgCy; }}"
        try:
            page.wait_for_function(f"() => {{ const cy = ({cy})(0); return cy && cy.nodes().length >= 5; }}",
                                   timeout=90_000)
        except Exception as e:  # noqa: BLE001 - re-raised with what the page and the server said
            raise AssertionError(fail(f"marimo never drew the graph: {e}")) from e
        # the app's output is the view alone (marimo run shows no prints): find the nodes by what they draw
        ids = page.evaluate(f"() => {{ const cy = ({cy})(0); const one = (op) => cy.nodes()"
                            ".filter(n => n.data('op') === op && n.data('phase') === 'forward').map(n => n.id());"
                            " return {w: one('parameter'), tanh: one('tanh')}; }")
        assert len(ids["w"]) == 1 and len(ids["tanh"]) == 1, fail(f"the parameter and tanh nodes: {ids}")
        ids = {k: v[0] for k, v in ids.items()}

        def inspector() -> str:
            return page.evaluate(f"() => ({_FIND})('.asg-inspector-panel')[0].innerText")

        def click(node: str, needle: str) -> str:
            pos = page.evaluate(
                f"(id) => {{ const cy = ({cy})(0); const el = ({_FIND})('.asg-graphview .asg-canvas')[0];"
                " el.scrollIntoView({block: 'center'}); const bb = cy.getElementById(id).renderedBoundingBox();"
                " const r = el.getBoundingClientRect(); return {x: r.left + (bb.x1 + bb.x2) / 2,"
                " y: r.top + (bb.y1 + bb.y2) / 2}; }", node)
            page.mouse.click(pos["x"], pos["y"])
            try:
                page.wait_for_function(
                    f"(s) => {{ const p = ({_FIND})('.asg-inspector-panel')[0];"
                    " return p && p.innerText.includes(s); }",
                    arg=needle, timeout=30_000)
            except Exception as e:  # noqa: BLE001
                raise AssertionError(fail(f"a click on {node} never reached the inspector ({needle!r}); it shows "
                                          f"{inspector()[:400]!r}: {e}")) from e
            return inspector()

        before = inspector()
        first = click(ids["w"], "Parameter")
        assert first != before and "Value" in first and "Gradient" in first, first[:600]
        second = click(ids["tanh"], "tanh")
        assert second != first and "Local derivative" in second, second[:600]
        lit = page.evaluate(f"() => ({cy})(0).$('.selected').map(n => n.id())")
        assert lit == [ids["tanh"]], fail(f"the clicked node is not the selected one: {lit}")
        typeset = page.evaluate(f"() => ({_FIND})('.asg-inspector-panel .asg-math .katex math').length")
        assert typeset > 0, fail("the inspector's formulas were not typeset")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / "marimo-graph-and-inspector.png"
        page.screenshot(path=str(shot))
        assert shot.stat().st_size > 20_000
