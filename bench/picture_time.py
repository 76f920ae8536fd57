"""How long the static picture of a graph takes (PNG + SVG): what every graph output in a lesson pays.

A lesson draws several graphs; each ``at.show`` output carries its picture (widgets/picture.py), so the
picture must stay cheap next to the cell it sits under. This prints the best of a few runs, wall time and
this process's CPU time (on a busy machine the CPU time is the steadier number), for a small MLP with its
gradients, the size of a lesson's graphs (the test suite keeps no timing of it: speed lives here).

    .venv/bin/python bench/picture_time.py [--repeats N]
"""

from __future__ import annotations

import argparse
import time

import asgteach as at
from asgteach.widgets.picture import picture_mimebundle, picture_png


def mlp_with_gradients() -> at.Tensor:
    with at.Graph(name="mlp"):
        x, y = at.input("x", (8, 4)), at.input("y", (8, 1))
        mlp = at.nn.MLP([4, 8, 8, 1], activation="tanh")
        loss = at.mean((mlp(x) - y) ** 2)
        at.grad(loss, mlp.parameters())
    return loss


def best_of(fn, repeats: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    loss = mlp_with_gradients()
    picture_png(loss)   # matplotlib's first import, paid once per kernel
    nodes = len(loss.graph.nodes)
    wall, cpu = best_of(lambda: picture_mimebundle(loss), args.repeats)
    print(f"MLP + gradients ({nodes} nodes): best wall {wall * 1e3:.0f} ms, CPU {cpu * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
