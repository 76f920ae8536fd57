"""The numpy plan's memory planner: which kernels may write in place, and which outputs must be copied.

Both questions are answered once, when the plan is compiled, from the steps in run order
(``numpy_plan.Step``: a kernel, the slots it reads, the slot it writes):

* :func:`plan_inplace` — a ufunc kernel (``add``, ``tanh``, ...) may write its result into
  the buffer of an input that dies at this step, when this run allocated that buffer and no
  other live value is a view of it: the same liveness reasoning as a real framework's
  memory planner;
* :func:`plan_outputs` — an output is the caller's (fresh, writable, sharing memory with no
  feed, constant or other output): handed over as it is when a ufunc made it this run,
  copied (or checked at run time) when it may alias.

Both are linear in the number of steps and edges (tests/test_compile_scale.py counts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..graph import Graph

if TYPE_CHECKING:
    from .numpy_plan import Step

__all__ = ["is_ufunc_kernel", "plan_inplace", "plan_outputs", "Handover"]


def is_ufunc_kernel(step: Step) -> bool:
    """A numpy ufunc called as it is (no attributes): it returns new memory and accepts ``out=``."""
    k = step.kernel
    return isinstance(k, np.ufunc) and k.nout == 1 and k.nin == len(step.args)


def plan_inplace(steps: list[Step], graph: Graph, slot: dict[int, int], out_slots: list[int]
                 ) -> tuple[dict[int, int], dict[int, int], dict[int, tuple[int, ...]]]:
    """Which steps may write their result into one of their inputs' buffers (node id -> input position).

    A buffer may be overwritten at step k only if
      * it was allocated by this run: the value came from a ufunc kernel, which always returns
        a fresh array (fed arrays and constants belong to the user or the graph: never written);
      * the value is not an output, and step k is its last use;
      * no other value still needed shares that memory: any kernel that is not a ufunc
        (``reshape``, ``transpose``, ``broadcast_to``...) may return a view of its inputs, so
        its value counts as sharing the memory of all of them, and must be dead by step k too;
      * the result has the buffer's shape (no broadcasting into it) and is not a 0-d scalar.

    The third rule asks about every value that may live in a buffer. Asking them one by one
    at every step made planning quadratic: in a long chain written in place (the gradient of
    an 8,000-step chain flows through ONE buffer) that is thousands of values. Two numbers
    answer it instead, each computed once:

    * ``needed[v]``, walking the steps backwards: the last step that reads v *or any view
      made of it* (forever, for an output): a view keeps its input's memory in use;
    * ``busy_until[buffer]``, walking forwards: the largest ``needed`` of the values that
      live in the buffer (its first value and each one written into it in place).

    "Every value sharing the buffer is dead by step k" is then ``busy_until[root] <= k``:
    one comparison, and planning is linear in the steps and edges.

    Also returns, for ``plan_outputs``: ``root`` (value -> the buffer it lives in, for the
    values that ARE a buffer this run allocated) and ``views`` (value -> its inputs, for the
    values that may be a view of them).
    """
    outputs = set(out_slots)
    never = len(steps)                      # "still needed after the last step": an output
    shape = {slot[n.id]: n.shape for n in (graph.nodes[i] for i in slot)}
    last_use: dict[int, int] = {}
    for k, step in enumerate(steps):
        for a in step.args:
            last_use[a] = k
    fresh = [is_ufunc_kernel(step) and shape[step.out] != () for step in steps]
    needed: dict[int, int] = {}
    views: dict[int, tuple[int, ...]] = {}
    for k in range(len(steps) - 1, -1, -1):   # backwards: a view's readers come after it
        step = steps[k]
        until = never if step.out in outputs else max(last_use.get(step.out, -1), needed.get(step.out, -1))
        needed[step.out] = until
        if not fresh[k]:   # may be a view of its inputs: their memory is needed as long as it is
            views[step.out] = step.args
            for a in step.args:
                if needed.get(a, -1) < until:
                    needed[a] = until
    root: dict[int, int] = {}               # buffer value -> the slot whose allocation it lives in
    busy_until: dict[int, int] = {}         # root slot -> last step that needs a value living in it
    plan: dict[int, int] = {}
    for k, step in enumerate(steps):
        if not fresh[k]:
            continue   # a view (or a scalar): its use of memory is counted in its inputs' ``needed``
        target = None
        if step.kernel.signature is None:   # elementwise (not matmul): may run in place
            for pos, a in enumerate(step.args):
                if a in root and shape[a] == shape[step.out] and busy_until[root[a]] <= k:
                    target = pos
                    break
        if target is not None:  # the ufunc returns its out= array: the very same buffer
            plan[step.node.id] = target
            r = root[step.out] = root[step.args[target]]
        else:
            r = root[step.out] = step.out
        busy_until[r] = max(busy_until.get(r, -1), needed[step.out])
    return plan, root, views


Handover = tuple[str, tuple[int, ...], tuple[int, ...]]


def plan_outputs(out_slots: list[int], root: dict[int, int], views: dict[int, tuple[int, ...]]) -> list[Handover]:
    """How each output is handed to the caller: as it is, copied, or checked at run time.

    The caller owns what ``run`` returns: they may write into it, keep it, feed it back.
    So an output must share no memory with a feed (the user's array), with what the plan
    keeps between runs (constants and folded values), or with another output. Copying
    every output would be safe but slow for big ones; the memory plan (``root``: the
    buffer a run-allocated value lives in; ``views``: the inputs a value may be a view of)
    says when it is needed:

    * ``"as is"``: a ufunc wrote a buffer this run allocated (a fresh array, or one
      written in place — never a feed, a constant or another output's memory);
    * ``"copy"``: a feed, a constant or a folded value, or a value already handed
      over (the same node asked for twice: two independent arrays);
    * ``"own"``: a kernel that may return a view (``reshape``, ``transpose``,
      ``broadcast_to``...) of something the caller or the plan holds, or of memory another
      output lives in. At run time it is kept only if it owns its memory, is writable and
      is none of the arrays it could alias (the feeds/constants in ``avoid``, the earlier
      outputs in ``earlier``); otherwise copied;
    * ``"writable"``: may be a view, but only of this run's dead buffers: kept unless
      read-only (``np.broadcast_to`` gives read-only views) or a numpy scalar.
    """
    def memory(s: int) -> frozenset[int]:
        """The buffers, fed arrays, constants and folded values that value ``s`` may live in."""
        found: set[int] = set()
        stack, seen = [s], set()
        while stack:   # down through the views, to what they may be views of
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in views:
                stack.extend(views[v])
            else:   # a run-allocated buffer, or a leaf / constant / folded value: its own memory
                found.add(root.get(v, v))
        return frozenset(found)

    computed = root.keys() | views.keys()
    mems = {s: memory(s) for s in set(out_slots)}   # (one walk per distinct output)

    def mem(s: int) -> frozenset[int]:
        return mems[s]

    foreign = {r for s in out_slots for r in mem(s) if r not in computed}  # held by the caller or the plan
    users: dict[int, int] = {}   # memory -> how many distinct outputs may live in it
    for s in set(out_slots):
        for r in mem(s):
            users[r] = users.get(r, 0) + 1
    how: list[Handover] = []
    seen: set[int] = set()
    for j, s in enumerate(out_slots):
        if s in seen or s not in computed:
            how.append(("copy", (), ()))
        elif s in root:
            how.append(("as is", (), ()))
        else:
            avoid = tuple(sorted(r for r in mem(s) if r in foreign))
            earlier = tuple(i for i in range(j) if mem(out_slots[i]) & mem(s))
            shared = any(users[r] > 1 for r in mem(s))
            how.append(("own", avoid, earlier) if avoid or shared else ("writable", (), ()))
        seen.add(s)
    return how
