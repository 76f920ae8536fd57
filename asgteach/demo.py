"""``asgteach demo``: the whole idea in one headless run, no Jupyter needed.

1. the DESIGN example ``y = sum(relu(x @ w + c) ** 2)``: its nodes (forward ones are what
   you wrote, backward ones are what ``at.grad`` appended), values and gradient check;
2. a small model trained: XOR with a 2-8-1 tanh MLP and Adam — the loss printed as it falls;
3. a static HTML page of the trained model's graph (forward and backward), written to a file
   you can open in any browser.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, TextIO

import numpy as np

__all__ = ["example_graph", "print_example", "train_xor", "write_graph_page"]


def example_graph(seed: int = 0) -> dict[str, Any]:
    """Build ``y = sum(relu(x @ w + c) ** 2)`` and its gradients ``dy/dx, dy/dw``, with seeded feeds.

    Returns a dict with the graph ``g``, the tensors ``x, w, y, dx, dw`` and float64 ``feeds``.
    """
    import asgteach as at

    with at.Graph(name="demo") as g:
        x = at.input("x", (4, 3))
        w = at.parameter("w", (3, 2), init="xavier_uniform")
        c = at.constant(np.ones(2))
        y = at.sum(at.relu(x @ w + c) ** 2)
        dx, dw = at.grad(y, [x, w])
    rng = np.random.default_rng(seed)
    feeds = {x: rng.standard_normal((4, 3)), w: rng.standard_normal((3, 2))}
    return {"g": g, "x": x, "w": w, "y": y, "dx": dx, "dw": dw, "feeds": feeds}


def print_example(out: TextIO, seed: int = 0, backend: str = "numpy") -> bool:
    """Part 1: list the example's nodes, print its values on ``backend`` and its gradient check."""
    import asgteach as at

    ex = example_graph(seed=seed)
    g = ex["g"]
    print("with at.Graph() as g:", file=out)
    print("    x = at.input('x', (4, 3))", file=out)
    print("    w = at.parameter('w', (3, 2), init='xavier_uniform')", file=out)
    print("    c = at.constant(np.ones(2))", file=out)
    print("    y = at.sum(at.relu(x @ w + c) ** 2)", file=out)
    print("    dx, dw = at.grad(y, [x, w])", file=out)
    print(file=out)
    print(f"{g!r} - forward nodes are what you wrote, backward nodes are what at.grad appended:", file=out)
    for n in g.nodes:
        inputs = ", ".join(f"#{i}" for i in n.inputs) or "-"
        print(f"  #{n.id:<3d} {n.phase:8s} {n.op:12s} {n.name[:18]:18s} shape={str(n.shape):8s} inputs: {inputs}",
              file=out)
    print(file=out)
    y, dx, dw = at.run([ex["y"], ex["dx"], ex["dw"]], ex["feeds"], backend=backend)
    with np.printoptions(precision=4, suppress=True):
        print(f"values on the {backend} backend (x, w drawn with seed {seed}):", file=out)
        print(f"  y = {float(y):.6g}", file=out)
        print(f"  dy/dx =\n{np.asarray(dx)}", file=out)
        print(f"  dy/dw =\n{np.asarray(dw)}", file=out)
    print(file=out)
    report = at.gradcheck(ex["y"], [ex["x"], ex["w"]], ex["feeds"])
    print(report.summary(), file=out)
    return report.ok


def train_xor(out: TextIO, steps: int = 300, seed: int = 0, backend: str = "numpy", every: int = 50) -> Any:
    """Part 2: train XOR (2-8-1 tanh MLP, sigmoid output, MSE, Adam) and print the loss every ``every`` steps.

    Returns ``(loss tensor, history, predictions)``.
    """
    import asgteach as at

    X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float64)
    T = np.array([[0], [1], [1], [0]], dtype=np.float64)
    with at.Graph("xor") as g:
        x, t = at.input("x", (4, 2)), at.input("t", (4, 1))
        net = at.nn.MLP([2, 8, 1], activation="tanh", name="mlp")
        pred = at.sigmoid(net(x))
        loss = at.nn.mse_loss(pred, t)
    tr = at.Trainer(loss, optimizer=at.optim.Adam(lr=0.05), backend=backend, seed=seed)
    print(f"training XOR: a 2-8-1 tanh MLP, mean squared error, Adam(lr=0.05), {steps} steps on {backend} "
          f"({len(g.nodes)} nodes: forward, backward and the optimizer's updates, all one graph); "
          f"the bar is the loss on a log scale, 10 characters per factor of 10", file=out)

    def report(step: int, value: float) -> None:
        if step == 1 or step % every == 0 or step == steps:
            bar = "#" * int(np.clip(round(10 * (np.log10(max(value, 1e-12)) + 5)), 1, 60))  # 10 chars a decade
            print(f"  step {step:4d}   loss {value:.6f}   {bar}", file=out, flush=True)

    history = tr.fit({x: X, t: T}, steps=steps, callback=report, progress=False)
    (p,) = tr.run([pred], {x: X})
    with np.printoptions(precision=3, suppress=True):
        print(f"  predictions for (0,0) (0,1) (1,0) (1,1): {np.asarray(p).ravel()}  (targets 0 1 1 0)", file=out)
    return loss, history, np.asarray(p)


def write_graph_page(target: Any, path: str | os.PathLike | None = None, title: str = "asgteach graph") -> Path:
    """Part 3: write a standalone HTML page (inline SVG, no JavaScript) of ``target``'s graph; return its path.

    Without ``path``: ``./asgteach-demo.html``, or the temp folder when the current one is read-only.
    """
    from .widgets.static import static_html

    if path is None:
        here = Path.cwd()
        folder = here if os.access(here, os.W_OK) else Path(tempfile.gettempdir())
        path = folder / "asgteach-demo.html"
    path = Path(path).resolve()
    body = static_html(target)
    page = (f"<!doctype html>\n<html lang='en'><head><meta charset='utf-8'><title>{title}</title></head>\n"
            f"<body style='font-family:sans-serif'><h1>{title}</h1>\n<p>Solid boxes: the forward graph you built. "
            f"Dashed: the backward graph <code>at.grad</code> appended. Hover a node for its op and shape; "
            f"in Jupyter, <code>at.show(loss)</code> draws the same graph and lets you click nodes.</p>\n{body}\n"
            f"</body></html>\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
