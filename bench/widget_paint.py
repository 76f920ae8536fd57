"""How fast the GraphView paints and answers clicks, measured in real JupyterLab + Chromium.

    .venv/bin/python bench/widget_paint.py [--clicks 12] [--blocks 6] [--rounds 3]

Builds a graph of six transformer blocks, forward and backward (1,015 nodes), and in a
headless Debian Chromium measures:

* **first paint, every node drawn** (``collapse=False``): from the moment the cell is run
  (Shift+Enter) until cytoscape holds every node and has drawn a frame after placing them;
  it includes the kernel's share (elements, layout, the picture beside the widget; printed
  by the cell itself), the widget's messages, and cytoscape's drawing;
* **first paint, layers collapsed** (the default for a graph this size);
* **click on a layer -> opened and laid out** (the collapsed view's first block);
* **click -> inspector**: from the mouse-down on a node of the fully drawn graph to the
  inspector's DOM showing that node (and, separately, to KaTeX having typeset its
  formulas), median over clicks spread over the graph.

Paints are the median over ``--rounds`` runs of the same cell. Targets (issue 24, item 6):
every node drawn < 1.5 s, click -> inspector < 100 ms median. Issue 13's ipycytoscape view,
one widget per element, took 2.96 s to draw the graph fully expanded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from browser.harness import JupyterLab, Lab, browser, write_notebook  # noqa: E402

SETUP = """
import time
import asgteach as at
from asgteach import nn

with at.Graph("bench") as g:
    x = at.input("x", (2, 4, 8))
    out = x
    for k in range({blocks}):
        out = nn.TransformerBlock(8, 2, name=f"block{{k}}")(out)
    loss = at.mean(out * out)
    at.grad(loss, [at.Tensor(g, p.id) for p in g.parameters()])
print("NODES", len(g.nodes))
"""
SHOW = """
t0 = time.perf_counter()
view = at.show(loss, collapse={collapse}, display=False)
print("KERNEL_BUILD_S %.3f ELEMENTS %d" % (time.perf_counter() - t0, len(view.canvas.elements)))
view
"""

# set up in the page before the cell runs: t0 at Shift+Enter, t1 when the n-th graph has N laid-out nodes
_WATCH_PAINT = """([n, want]) => new Promise((resolve) => {
  const t0 = performance.now();
  let tView = null;
  const tick = () => {
    const els = document.querySelectorAll('.asg-graphview .asg-canvas');
    const el = els[n];
    if (el && tView === null) tView = performance.now() - t0;
    const cy = el && el.asgCy;
    if (performance.now() - t0 > 180000) {
      resolve({ms: null, nodes: cy ? cy.nodes().length : 0, edges: cy ? cy.edges().length : 0});
      return;
    }
    if (cy && cy.nodes().length >= want) {
      const bb = cy.elements().boundingBox();
      if (bb.w > 0 && bb.h > 0) {
        requestAnimationFrame(() => resolve({ms: performance.now() - t0, view: tView, nodes: cy.nodes().length,
                                              edges: cy.edges().length}));
        return;
      }
    }
    requestAnimationFrame(tick);
  };
  tick();
})"""

_WATCH_CLICK = """([n, nid]) => new Promise((resolve) => {
  const panel = document.querySelectorAll('.asg-inspector-panel')[n];
  let t0 = null, tDom = null;
  document.addEventListener('mousedown', () => { t0 = performance.now(); }, {capture: true, once: true});
  const start = performance.now();
  const check = () => {
    if (performance.now() - start > 20000) { resolve({dom: null, math: null}); return; }
    if (t0 !== null) {
      const box = panel.querySelector('.asg-inspector[data-node="' + nid + '"]');
      if (box && tDom === null) tDom = performance.now();
      if (box && (box.querySelector('.katex') || !box.querySelector('.asg-math'))) {
        resolve({dom: tDom - t0, math: performance.now() - t0});
        return;
      }
    }
    requestAnimationFrame(check);
  };
  check();
})"""


def run_cell(lab: Lab, index: int, attempts: int = 4) -> None:
    """Run cell ``index`` with Shift+Enter (retried while the kernel is still starting)."""
    cell = lab.page.locator(".jp-Notebook .jp-Cell").nth(index)
    for _ in range(attempts):
        cell.locator(".jp-InputArea-editor").click()
        lab.page.keyboard.press("Shift+Enter")
        try:
            lab.page.wait_for_function(
                "(i) => /\\[(\\*|\\d+)\\]/.test(document.querySelectorAll('.jp-Notebook .jp-Cell')[i]"
                ".querySelector('.jp-InputArea-prompt').textContent)", arg=index, timeout=20_000)
            return
        except Exception:  # noqa: BLE001 - not started: try again
            continue
    raise RuntimeError(lab.fail(f"cell {index} never started"))


def _start(lab: Lab, watcher: str, arg: list) -> None:
    """Start a watcher promise in the page WITHOUT waiting for it (evaluate would wait)."""
    lab.page.evaluate(f"(arg) => {{ window.__asgWatch = ({watcher})(arg); return null; }}", arg)


def _result(lab: Lab) -> dict:
    return lab.page.evaluate("() => window.__asgWatch")


def measure_paint(lab: Lab, cell: int, view_index: int, want_nodes: int) -> dict:
    _start(lab, _WATCH_PAINT, [view_index, want_nodes])
    run_cell(lab, cell)
    return _result(lab)


def _close_dialogs(lab: Lab) -> None:
    """JupyterLab may put up a dialog of its own (a kernel or file notice) over the page: say what, and close it."""
    for dialog in lab.page.locator(".jp-Dialog").all():
        print(f"(closing a JupyterLab dialog: {dialog.inner_text()[:200]!r})")
        lab.page.keyboard.press("Escape")


def _kernel_line(lab: Lab, k: int) -> str:
    """The k-th KERNEL_BUILD_S line the cells printed."""
    # text_content: an output scrolled out of view has no rendered text (JupyterLab skips drawing it)
    return (lab.page.locator(".jp-OutputArea-output", has_text="KERNEL_BUILD_S").nth(k).text_content() or "").strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clicks", type=int, default=12)
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3, help="paints of each view (the median is reported)")
    args = ap.parse_args()
    rounds = max(1, args.rounds)
    cells = [SETUP.format(blocks=args.blocks)]
    cells += [SHOW.format(collapse="None")] * rounds + [SHOW.format(collapse="False")] * rounds
    with JupyterLab() as server:
        write_notebook(server.root / "bench.ipynb", cells)
        with browser() as page:
            lab = Lab(page, server)
            lab.open("bench.ipynb")
            run_cell(lab, 0)
            lab.page.wait_for_function("() => document.body.innerText.includes('NODES ')", timeout=lab.timeout)
            n_graph = int(page.locator(".jp-OutputArea-output", has_text="NODES").first.inner_text().split()[1])
            coll, full = [], []
            for k in range(rounds):
                r = measure_paint(lab, 1 + k, k, 2)
                if r["ms"] is None:
                    raise SystemExit(lab.fail(f"the collapsed graph did not paint within 180 s: {r}"))
                coll.append(r)
            time.sleep(1.0)
            lab.screenshot("bench_collapsed_graph", page.locator(".asg-graphview").first)
            # open one block of the first view: from the click until the expanded layer is laid out
            _close_dialogs(lab)
            n_before = len(lab.node_ids())
            t0 = time.perf_counter()
            lab.click_node("g:block0")
            lab.page.wait_for_function(
                "(n) => { const el = document.querySelector('.asg-graphview .asg-canvas');"
                " const cy = el.asgCy; return cy.nodes().length > n && cy.elements().boundingBox().w > 0; }",
                arg=n_before, timeout=lab.timeout)
            expand_ms = (time.perf_counter() - t0) * 1000
            for k in range(rounds):
                r = measure_paint(lab, 1 + rounds + k, rounds + k, n_graph)
                if r["ms"] is None:
                    raise SystemExit(lab.fail(f"the full graph did not paint within 180 s: {r}"))
                full.append(r)
            last = 2 * rounds - 1
            time.sleep(1.0)
            lab.screenshot("bench_full_graph", page.locator(".asg-graphview").nth(last))
            ids = lab.cy("return cy.nodes().filter(e => e.data('kind') === 'node').map(e => e.data('nid'));", last)
            _close_dialogs(lab)
            picks = [ids[int(k * (len(ids) - 1) / max(1, args.clicks - 1))] for k in range(args.clicks)]
            dom, math = [], []
            for nid in picks:
                _start(lab, _WATCH_CLICK, [last, nid])
                lab.click_node(f"n{nid}", last)
                r = _result(lab)
                if r["dom"] is None:
                    sel = lab.cy("return cy.$('.selected').map(e => e.id());", last)
                    raise SystemExit(lab.fail(f"a click on n{nid} never reached the inspector (selected: {sel})"))
                dom.append(r["dom"])
                math.append(r["math"])
            lines = [_kernel_line(lab, k) for k in range(2 * rounds)]
    med = lambda rs: statistics.median(r["ms"] for r in rs)  # noqa: E731
    print(f"graph: {n_graph} nodes (forward + backward); Debian Chromium, headless; JupyterLab 4; "
          f"{rounds} paints of each view")
    print(f"first paint, layers collapsed (default): median {med(coll):.0f} ms "
          f"({', '.join(str(round(r['ms'])) for r in coll)}; {coll[0]['nodes']} nodes, "
          f"{coll[0]['edges']} edges; the view appeared at {statistics.median(r['view'] for r in coll):.0f} ms; "
          f"kernel: {lines[0]})")
    print(f"first paint, every node drawn           : median {med(full):.0f} ms "
          f"({', '.join(str(round(r['ms'])) for r in full)}; {full[0]['nodes']} nodes, "
          f"{full[0]['edges']} edges; the view appeared at {statistics.median(r['view'] for r in full):.0f} ms; "
          f"kernel: {lines[rounds]})")
    print(f"click on a layer -> opened and laid out : {expand_ms:.0f} ms")
    print(f"click -> inspector DOM                  : median {statistics.median(dom):.0f} ms, "
          f"max {max(dom):.0f} ms over {len(dom)} clicks (every node drawn)")
    print(f"click -> formulas typeset               : median {statistics.median(math):.0f} ms, max {max(math):.0f} ms")
    print("targets: every node drawn < 1500 ms, click -> inspector < 100 ms")


if __name__ == "__main__":
    main()
