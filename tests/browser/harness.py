"""Drive a real JupyterLab in Debian's Chromium: start the server, open a notebook, talk to the graph.

Used by the browser tests (tests/browser/) and by bench/widget_paint.py. No browser is
downloaded: Playwright launches /usr/bin/chromium (Debian package ``chromium``).

* :class:`JupyterLab` — a server on 127.0.0.1 with a random free port, a token, a temp root
  dir and its own settings/workspaces (so nothing from the user's setup leaks in); always
  killed on exit, with its log kept for failure messages.
* :func:`browser` — headless Chromium with the flags this machine needs (no network
  chatter, no GPU, no sandbox as root) and a fresh profile.
* :class:`Lab` — a page with helpers: run all cells, wait for the cytoscape graph, click a
  node at its on-screen position (read from the cytoscape instance itself), read the
  inspector, take screenshots.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"

# the cytoscape instance of the first (or n-th) GraphView on the page
_CY = ("(n) => { const els = document.querySelectorAll('.asg-graphview .asg-canvas');"
       " const el = els[n || 0]; return el && el.asgCy ? el : null; }")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_notebook(path: Path, cells: list[str]) -> Path:
    """A notebook of code cells, with no outputs (the browser runs it)."""
    nb = {
        "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                   "source": src.strip("\n")} for src in cells],
        "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                     "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb, indent=1))
    return path


class JupyterLab:
    """A JupyterLab server for one test session (context manager; always stopped)."""

    def __init__(self, root: Path | None = None, startup_timeout: float = 120.0) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="asg-lab-"))
        self.root = root or (self.tmp / "root")
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.token = os.urandom(12).hex()
        self.startup_timeout = startup_timeout
        self.log_path = self.tmp / "jupyterlab.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    #: what the error messages call the server
    app_name = "JupyterLab"

    def command(self) -> list[str]:
        """The server's command line (Notebook 7's test overrides only this and ``app_name``)."""
        return [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
            f"--port={self.port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}", f"--LabApp.workspaces_dir={self.tmp / 'workspaces'}",
            f"--LabApp.user_settings_dir={self.tmp / 'settings'}", "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--ServerApp.disable_check_xsrf=False",
        ]

    def __enter__(self) -> "JupyterLab":
        env = dict(os.environ)
        for key, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                         ("IPYTHONDIR", "ipython"), ("MPLCONFIGDIR", "mpl")):
            env[key] = str(self.tmp / sub)
        env["ASGTEACH_NO_PROGRESS"] = "1"
        env.pop("JUPYTER_PATH", None)
        cmd = self.command()
        # no "get Jupyter news?" toast over the notebook
        notify = self.tmp / "settings" / "@jupyterlab" / "apputils-extension"
        notify.mkdir(parents=True, exist_ok=True)
        (notify / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True, cwd=str(self.root))
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.app_name} exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"{self.app_name} did not answer within {self.startup_timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:  # the server and its kernels share our new session: end them together
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        if getattr(self, "_log", None):
            self._log.close()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}?token={self.token}&reset"


def _missing(what: str, install: str) -> None:
    """Under pytest, the suite's one way to say what this machine lacks (tests/wgpu_helpers.missing: a loud skip, and
    under CI=true a failure); elsewhere (bench/widget_paint.py, scripts/class-loadtest) an error saying the same."""
    if "PYTEST_CURRENT_TEST" in os.environ:
        from wgpu_helpers import missing

        missing(what, install)
    raise RuntimeError(f"{what} is missing: {install}")


@contextmanager
def browser(width: int = 1500, height: int = 1000) -> Iterator[Any]:
    """A headless Debian Chromium page (Playwright sync API), closed on exit."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("Playwright (the Python module that drives the browser)",
                 "pip install -e '.[dev]', or ./scripts/setup")
    if not os.path.exists(CHROMIUM):
        _missing(f"Debian's Chromium ({CHROMIUM})",
                 "apt-get install chromium (no browser is downloaded), or ./scripts/setup")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            ctx = b.new_context(viewport={"width": width, "height": height})
            page = ctx.new_page()
            yield page
        finally:
            b.close()


class Lab:
    """A JupyterLab page with helpers for notebooks that display GraphViews."""

    def __init__(self, page: Any, server: JupyterLab, timeout_ms: int | None = None) -> None:
        timeout_ms = timeout_ms or int(os.environ.get("ASG_BROWSER_TIMEOUT_MS", "120000"))
        self.page, self.server, self.timeout = page, server, timeout_ms
        self.console: list[str] = []
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))
        page.on("dialog", self._dialog)

    def _dialog(self, d: Any) -> None:
        """Leaving a notebook asks "leave page?" (accept); any other dialog is logged as a failure sign."""
        if d.type == "beforeunload":
            d.accept()
            return
        self.console.append(f"DIALOG: {d.type}: {d.message}")
        d.dismiss()

    def fail(self, what: str) -> str:
        """A failure message with what the page and the server said."""
        try:
            shot = self.screenshot("failure-" + time.strftime("%H%M%S"))
        except Exception:  # noqa: BLE001 - the page may be gone
            shot = "(no screenshot)"
        tail = "\n".join(self.console[-25:])
        return (f"{what}\n(screenshot: {shot})\n--- browser console ---\n{tail}\n"
                f"--- jupyterlab log ---\n{self.server.log_tail(2500)}")

    def open(self, name: str) -> None:
        self.page.goto(self.server.notebook_url(name), timeout=self.timeout)
        self.page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=self.timeout)
        # the kernel must be ready before "Run All" or the cells queue forever on a dead session
        self.page.wait_for_function(
            "() => { const s = document.querySelector('.jp-Notebook-ExecutionIndicator, .jp-Toolbar-kernelStatus');"
            " return !s || !/(Connecting|Starting|Initializing)/i.test(s.getAttribute('data-status') || "
            "s.textContent || ''); }", timeout=self.timeout)
        self.page.wait_for_function("() => document.querySelector('.jp-KernelStatus, .jp-Toolbar-kernelName')",
                                    timeout=self.timeout)

    def run_all(self, attempts: int = 3) -> None:
        """Run > Run All Cells, through the menu; retried if no cell starts (kernel not ready yet)."""
        for _ in range(attempts):
            self.page.locator(".jp-Notebook").first.click()
            self.page.get_by_role("menuitem", name="Run", exact=True).click()
            self.page.get_by_role("menuitem", name="Run All Cells", exact=False).first.click()
            try:
                self.page.wait_for_function(
                    "() => [...document.querySelectorAll('.jp-InputArea-prompt')]"
                    ".some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))", timeout=30_000)
                return
            except Exception:  # noqa: BLE001 - try the menu again
                self.page.keyboard.press("Escape")
        raise AssertionError(self.fail(f"Run All Cells started no cell in {attempts} attempts"))

    def wait_idle_cells(self, count: int) -> None:
        """Wait until ``count`` cells show an execution number (they finished)."""
        try:
            self.page.wait_for_function(
                "(n) => { const p = [...document.querySelectorAll('.jp-InputArea-prompt')]"
                ".filter(e => /\\[\\d+\\]/.test(e.textContent)); return p.length >= n; }",
                arg=count, timeout=self.timeout)
        except Exception as e:  # noqa: BLE001 - re-raised with context
            raise AssertionError(self.fail(f"the notebook's {count} cells did not all finish: {e}")) from e

    def wait_graph(self, n: int = 0, min_nodes: int = 1) -> None:
        """Wait for the n-th GraphView's cytoscape instance to hold ``min_nodes`` nodes."""
        try:
            self.page.wait_for_function(
                f"([n, k]) => {{ const el = ({_CY})(n); return el && el.asgCy.nodes().length >= k; }}",
                arg=[n, min_nodes], timeout=self.timeout)
        except Exception as e:  # noqa: BLE001
            raise AssertionError(self.fail(f"graph view #{n} never drew {min_nodes} nodes: {e}")) from e

    def cy(self, script: str, n: int = 0, arg: Any = None) -> Any:
        """Evaluate ``script`` (a JS function body with ``cy``, ``el`` and ``arg`` in scope) in the page."""
        return self.page.evaluate(
            f"([n, arg]) => {{ const el = ({_CY})(n); const cy = el.asgCy; {script} }}", [n, arg])

    def node_ids(self, n: int = 0) -> list[str]:
        """The view's stable ids of the drawn nodes ("n12", "g:block"; cytoscape's own ids change per rebuild)."""
        return self.cy("return cy.nodes().map(e => e.data('key'));", n)

    def classes_of(self, cls: str, n: int = 0) -> list[str]:
        return self.cy("return cy.$('.' + arg).map(e => e.data('key'));", n, cls)

    def wait_classes(self, cls: str, expected: list[str], n: int = 0, timeout_ms: int | None = None) -> list[str]:
        """The keys of the elements carrying class ``cls``, once they are ``expected`` (the inspector's text and the
        graph's classes arrive as separate widget messages, so one can be drawn before the other)."""
        try:
            self.page.wait_for_function(
                f"([n, cls, want]) => {{ const el = ({_CY})(n); if (!el) return false;"
                " const got = el.asgCy.$('.' + cls).map(e => e.data('key'));"
                " return JSON.stringify(got.sort()) === JSON.stringify(want.slice().sort()); }",
                arg=[n, cls, expected], timeout=timeout_ms or self.timeout)
        except Exception:  # noqa: BLE001 - the assertion at the call site shows what is there instead
            pass
        return self.classes_of(cls, n)

    def fit_report(self, n: int = 0) -> dict:
        """Where the drawn graph lies relative to its canvas (rendered pixels)."""
        return self.cy("const bb = cy.elements().renderedBoundingBox();"
                       "return {x1: bb.x1, y1: bb.y1, x2: bb.x2, y2: bb.y2, w: cy.width(), h: cy.height(),"
                       " zoom: cy.zoom(), n: cy.nodes().length};", n)

    def click_node(self, element_id: str, n: int = 0) -> None:
        """Click node ``element_id`` where it is drawn (position from cytoscape, in page pixels)."""
        try:  # the element exists and the layout has placed it (a rebuild may still be on its way)
            self.page.wait_for_function(
                f"([n, id]) => {{ const el = ({_CY})(n); if (!el) return false;"
                " const e = el.asgCy.nodes().filter(x => x.data('key') === id);"
                " return e.nonempty() && e.renderedBoundingBox().w > 0; }", arg=[n, element_id], timeout=30_000)
        except Exception:  # noqa: BLE001 - reported below with the drawn ids
            pass
        # the view may be below the window (a notebook of several views): scroll its canvas into the window first
        self.cy("el.scrollIntoView({block: 'nearest'}); return null;", n)
        # a graph bigger than its canvas pans instead of shrinking its labels: bring the node into view first
        # (and into the part of the canvas that shows: inside the window and inside every panel scrolling
        # around it; a tall canvas can reach below the window, or under the notebook's toolbar)
        self.cy("const e = cy.nodes().filter(x => x.data('key') === arg); if (e.empty()) return null;"
                "const r = el.getBoundingClientRect();"
                "let vt = 0, vb = innerHeight, vl = 0, vr = innerWidth;"
                "for (let q = el.parentElement; q; q = q.parentElement) {"
                "  const st = getComputedStyle(q);"
                "  if (!/(auto|scroll)/.test(st.overflowY) || q.scrollHeight <= q.clientHeight + 1) continue;"
                "  const b = q.getBoundingClientRect(); vt = Math.max(vt, b.top); vb = Math.min(vb, b.bottom);"
                "  vl = Math.max(vl, b.left); vr = Math.min(vr, b.right); }"
                "const top = Math.max(0, vt - r.top) + 20, bottom = Math.min(cy.height(), vb - r.top) - 20;"
                "const left = Math.max(0, vl - r.left) + 20, right = Math.min(cy.width(), vr - r.left) - 20;"
                "const p = e.renderedPosition();"
                "if (p.x < left || p.x > right || p.y < top || p.y > bottom)"
                "  cy.panBy({x: (left + right) / 2 - p.x, y: (top + bottom) / 2 - p.y});"
                "return null;", n, element_id)
        pos = self.cy("const e = cy.nodes().filter(x => x.data('key') === arg); if (e.empty()) return null;"
                      "const bb = e.renderedBoundingBox(); const r = el.getBoundingClientRect();"
                      "return {x: r.left + (bb.x1 + bb.x2) / 2, y: r.top + Math.min(bb.y1 + 8, (bb.y1 + bb.y2) / 2),"
                      " inside: bb.x1 >= 0 && bb.y1 >= 0 && bb.x2 <= cy.width() && bb.y2 <= cy.height()};",
                      n, element_id)
        assert pos is not None, self.fail(f"node {element_id} is not in the drawn graph: {self.node_ids(n)}")
        self.page.mouse.click(pos["x"], pos["y"])

    def inspector_text(self, n: int = 0) -> str:
        return self.page.locator(".asg-inspector-panel").nth(n).inner_text()

    def wait_inspector(self, needle: str, n: int = 0, timeout_ms: int | None = None) -> None:
        try:
            self.page.wait_for_function(
                "([n, s]) => { const p = document.querySelectorAll('.asg-inspector-panel')[n];"
                " return p && p.innerText.includes(s); }", arg=[n, needle], timeout=timeout_ms or self.timeout)
        except Exception as e:  # noqa: BLE001
            raise AssertionError(self.fail(f"inspector #{n} never showed {needle!r}; it shows:\n"
                                           f"{self.inspector_text(n)[:800]}")) from e

    def screenshot(self, name: str, element: Any = None) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        (element or self.page).screenshot(path=str(path))
        return path
