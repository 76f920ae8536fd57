"""Planted bugs for the bug-hunt lessons: each is a context manager that breaks autograd, then repairs it.

Inside the ``with`` block, gradients built by ``at.grad`` (and by ``at.gradcheck``, which
builds its own) are wrong in one specific way; on leaving the block everything is restored,
even after an error. Forward values are never touched: only backward rules are, which is
exactly what a gradient check can catch.

* :func:`div_forgets_broadcast_sum` — RustyASG's hardest bug: ``div``'s backward rule does
  not sum the gradient over the axes its inputs were broadcast along. Autograd insists that
  a gradient has its input's shape, so the buggy rule keeps the shape by keeping only the
  FIRST copy's contribution, and silently drops the others.
* :func:`fanout_overwrites` — at a fan-out (a value used twice), the contributions are
  assigned (``=``) instead of added (``+=``): only the last one survives.
* :func:`sub_sign_flipped` — ``sub``'s backward rule sends ``+g`` to its second input
  instead of ``-g``.

The lessons plant them as ``bugs.mystery(4)`` (the bug of lesson 4) so that the cell does
not give the answer away; :func:`reveal` says which one it was.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .. import autograd
from ..ops import registry
from ..ops import shape as _shape
from ..ops.elementwise import neg
from ..tensor import Tensor

__all__ = ["div_forgets_broadcast_sum", "fanout_overwrites", "sub_sign_flipped", "mystery", "reveal", "PLANTED",
           "Planted"]


def _first_copy(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Shrink ``t`` to ``shape`` by keeping the first copy along every broadcast axis (the bug: no sum)."""
    if t.shape == tuple(shape):
        return t
    lead = len(t.shape) - len(shape)
    index: list[Any] = [0] * lead
    for size, full in zip(shape, t.shape[lead:]):
        index.append(slice(0, 1) if size == 1 and full != 1 else slice(None))
    return t[tuple(index)]


def _div_vjp_without_sum(c: registry.VjpContext, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
    a, b = c.inputs
    da = _first_copy(g / b, a.shape) if c.needs[0] else None
    db = _first_copy(neg(g) * c.out / b, b.shape) if c.needs[1] else None
    return da, db


def _sub_vjp_wrong_sign(c: registry.VjpContext, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
    a, b = c.inputs
    return (_shape.sum_to(g, a.shape) if c.needs[0] else None,
            _shape.sum_to(g, b.shape) if c.needs[1] else None)   # should be sum_to(-g, b.shape)


@contextmanager
def div_forgets_broadcast_sum() -> Iterator[None]:
    """``div``'s backward rule keeps one broadcast copy's gradient instead of summing all of them."""
    with registry.patched("div", vjp=_div_vjp_without_sum):
        yield


@contextmanager
def sub_sign_flipped() -> Iterator[None]:
    """``sub``'s backward rule gives its second input ``+g`` (it should be ``-g``)."""
    with registry.patched("sub", vjp=_sub_vjp_wrong_sign):
        yield


@contextmanager
def fanout_overwrites() -> Iterator[None]:
    """At a fan-out, the gradient contributions overwrite each other (``=``) instead of adding up (``+=``).

    Uses :func:`asgteach.autograd.accumulation`, the hook on the one place where a node's
    contributions are summed, so that only the last contribution it received survives.
    """
    def last_one_wins(parts: list[Tensor], node_id: int, graph: Any) -> Tensor:
        return parts[-1]

    with autograd.accumulation(last_one_wins):
        yield


@dataclass(frozen=True)
class Planted:
    """What a lesson's mystery bug is: the context manager, and where gradcheck should point."""

    plant: Callable[[], Any]
    op: str | None          # the op whose backward rule is wrong (None: no single rule is wrong)
    input_index: int | None  # which input of that op gets the wrong gradient
    story: str


PLANTED: dict[int, Planted] = {
    3: Planted(fanout_overwrites, None, None,
               "at a fan-out the gradient contributions were assigned (=) instead of added (+=): a value used "
               "twice kept only the gradient of its last use. No single backward rule is wrong, so gradcheck "
               "found no culprit node: the error is in how contributions are combined."),
    4: Planted(div_forgets_broadcast_sum, "div", 1,
               "div's backward rule did not sum its divisor's gradient over the broadcast axis (it kept the "
               "first copy only) - the bug RustyASG's author hunted longest, found by a gradient check of "
               "a LayerNorm-like graph."),
    5: Planted(sub_sign_flipped, "sub", 1,
               "sub's backward rule sent +g to its second input instead of -g: d(a - b)/db = -1."),
}


@contextmanager
def mystery(lesson: int) -> Iterator[None]:
    """Plant lesson ``lesson``'s bug without naming it (``with bugs.mystery(4): ...``)."""
    if lesson not in PLANTED:
        raise KeyError(f"no bug is planted for lesson {lesson}; lessons with a bug hunt: {sorted(PLANTED)}")
    with PLANTED[lesson].plant():
        yield


def reveal(lesson: int) -> str:
    """The answer to lesson ``lesson``'s bug hunt, in one paragraph."""
    p = PLANTED[lesson]
    where = f"{p.op} (input {p.input_index})" if p.op else "the accumulation of contributions in autograd"
    return f"the planted bug was in {where}: {p.story}"


def check_diagnosis(lesson: int, op: str | None, input_index: int | None) -> None:
    """Check a bug-hunt answer: the op whose rule is wrong (None if none is) and the input it gets wrong.

    A wrong answer gets a hint that narrows the search (where to look, what to compare), never
    the answer itself: the check must not be a way to read the truth off a first wrong guess.
    """
    from ..grading.exercises import ExerciseError

    p = PLANTED[lesson]
    if p.op is None:
        if op is not None:
            raise ExerciseError(f"{op!r} is not the answer: gradcheck re-checked every node's own rule with its real "
                                f"inputs, and report.culprits lists the ones it found wrong. Is a {op} node among "
                                "them? If none is, what else combines gradients?")
        return
    if op is None:
        raise ExerciseError("a single backward rule IS to blame here: read report.culprits")
    if op != p.op:
        raise ExerciseError(f"the op whose backward rule is wrong is not {op!r}: read report.culprits (each names "
                            f"a node, its op and the input whose gradient is off)")
    if input_index != p.input_index:
        raise ExerciseError(f"{op} is right, but input {input_index!r} is not the one whose gradient is off "
                            f"(inputs count from 0: in a - b or a / b, a is input 0 and b input 1)")
