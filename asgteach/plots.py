"""Matplotlib figures: the gradient check (``rep.plot()``) and the live loss chart (``fit(chart=True)``).

Figures are returned, not shown, so a notebook displays them once and a script can save
them (``fig.savefig(...)``). This module imports nothing of ours (matplotlib only, when a
figure is drawn): gradcheck and the Trainer, far below the notebook widgets, may use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .gradcheck import GradcheckReport

__all__ = ["gradcheck_figure", "LossChart", "mpl_text"]


def mpl_text(text: object) -> str:
    """User text for a matplotlib title or label, shown as typed: ``$`` would start mathtext.

    A name such as ``$\\href{javascript:alert(1)}{x}$`` would otherwise make the figure fail to
    draw (mathtext knows no ``\\href``) and ``$x^2$`` would be typeset instead of shown.
    """
    return str(text).replace("$", r"\$")


def gradcheck_figure(report: "GradcheckReport") -> Any:
    """Numerical vs analytical gradient per input, and the error-vs-eps curve.

    Left panels: each dot is one entry of the Jacobian; a correct backward rule puts every
    dot on the diagonal. Right panel: the error of a central difference as eps shrinks —
    first falling like eps^2 (truncation), then rising like 1/eps (round-off).
    """
    from matplotlib.figure import Figure

    n = len(report.inputs)
    fig = Figure(figsize=(3.6 * (n + 1), 3.4), layout="constrained")
    axes = fig.subplots(1, n + 1, squeeze=False)[0]
    for ax, check in zip(axes, report.inputs):
        if check.numerical_jacobian is not None:
            num = check.numerical_jacobian.ravel()
            ana = check.analytical_jacobian.ravel()
        else:  # fast mode: only the worst direction is kept
            num, ana = np.array([check.numerical]), np.array([check.analytical])
        lo = float(min(num.min(), ana.min())) if num.size else -1.0
        hi = float(max(num.max(), ana.max())) if num.size else 1.0
        pad = 0.05 * (hi - lo or 1.0)
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="#999", lw=1, zorder=0)
        ax.scatter(num, ana, s=12, color="#1a7f37" if check.ok else "#cf222e")
        ax.set_xlabel("numerical (central difference)")
        ax.set_ylabel("analytical (autograd)")
        ax.set_title(f"d/d{mpl_text(check.name)}: {'ok' if check.ok else 'MISMATCH'}\nmax err {check.max_abs_err:.2g}",
                     fontsize=9)
    ax = axes[-1]
    eps, err = report.error_vs_eps()
    floor = np.finfo(np.float64).tiny
    ax.loglog(eps, np.maximum(err, floor), marker="o", ms=3)
    ax.axvline(report.eps, color="#999", ls="--", lw=1)
    ax.set_xlabel("eps (large to small: the axis is inverted)")
    ax.set_ylabel("|numerical - analytical|")
    # large eps sit on the left (inverted axis): there the truncation error, eps^2, dominates
    ax.set_title("error vs eps: truncation (left) vs round-off (right)", fontsize=9)
    ax.invert_xaxis()
    return fig


class LossChart:
    """A loss curve that redraws in place while a Trainer runs, at most every ``interval`` s (and never more than
    a fifth of the time: a redraw that took d seconds waits at least 4 d before the next one).

    In a notebook it updates ONE output (an IPython display handle), so a thousand steps do
    not print a thousand figures. Outside IPython it does nothing.
    """

    def __init__(self, interval: float = 0.5, title: str = "training loss") -> None:
        import time

        self._time = time.monotonic
        self.interval, self.title = interval, title
        self._next = -float("inf")   # monotonic time before which no redraw happens
        self._handle: Any = None
        try:
            from IPython import get_ipython

            self.enabled = get_ipython() is not None
        except ImportError:
            self.enabled = False

    def figure(self, history: list[float]) -> Any:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(5, 3), layout="constrained")
        ax = fig.subplots()
        ax.plot(np.arange(1, len(history) + 1), history, lw=1.2)
        if history and min(history) > 0:
            ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        last = f": {history[-1]:.4g}" if history else ""
        ax.set_title(f"{mpl_text(self.title)}{last}", fontsize=10)
        return fig

    def update(self, history: list[float], final: bool = False) -> None:
        if not self.enabled:
            return
        start = self._time()
        if not final and start < self._next:
            return
        from IPython.display import display

        fig = self.figure(history)
        if self._handle is None:
            self._handle = display(fig, display_id=True)
        else:
            self._handle.update(fig)
        # the next redraw waits `interval`, or 4x what this one took (drawing a figure on a busy machine can take
        # longer than the interval: the chart then costs at most a fifth of the training's time, not all of it)
        end = self._time()
        self._next = end + max(self.interval, 4 * (end - start))
