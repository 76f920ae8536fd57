"""The numpy backend: the reference implementation every other backend is checked against.

Running a graph happens in two steps, as in every real framework:

``compile(graph, outputs) -> Plan`` does the work once:
    * **prune** — keep only the nodes the outputs depend on;
    * **order** — node ids are already a topological order, so sorting them is enough;
    * **bind** — look up each op's numpy kernel and freeze its attributes into a closure;
    * **plan memory** — find each value's last use, so the run can drop it right after
      (a value nobody reads any more should not sit in memory).

``plan.run(feeds)`` then just walks the list of bound kernels. Float precision follows
the feeds: float64 in, float64 out; float32 stays float32.

Making the walk cheap (a training loop calls ``run`` thousands of times, and numpy
kernels on small arrays take microseconds, so per-step Python overhead matters):

* the steps are written out once as a straight-line Python function (``plan.source``
  shows it), so running costs one call per kernel and nothing else;
* steps that read only constants (e.g. the seed of a backward pass, scaled and broadcast)
  are folded: computed once per precision and kept with the constants (``plan.folded``);
* feeds are fully checked the first time; later runs whose feeds look the same (the
  same key objects, ndarrays of the declared shapes, one float precision) take a short
  path; anything else gets the full check and its error messages;
* a kernel that is a numpy ufunc (``add``, ``mul``, ...) writes its result into an
  input buffer that dies at this step, when that buffer was made by this run (never a
  fed array or a constant) and no other live value is a view of it — the liveness plan
  says when that is safe, as a real framework's memory planner does;
* compiling is linear in the graph's size: every planning pass visits each step once (the
  in-place planner keeps one number per buffer, not a list of the values living in it),
  so a 16,000-node chain and its gradient compile in about a second and a half;
* outputs are the caller's: fresh, writable, sharing memory with no feed, no constant and
  no other output. A fresh ufunc result is handed over as it is; only an output that may
  alias (a feed or a constant asked for as such, a view such as ``reshape`` of one, the
  same node asked for twice, a read-only ``broadcast_to``) is copied — ``plan.source``
  ends with the lines that decide it;
* the NaN check on the outputs is one reduction per output (``min(x)``, or the dot
  product ``x . x`` for small ones: each is NaN exactly when some element of x is), and
  only a hit triggers the step-by-step search that names the node.
"""

from __future__ import annotations

import builtins
import gc
import math
import re
from dataclasses import dataclass
from functools import partial, wraps
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..graph import Graph, Node, source_line_text
from ..ops.registry import spec
from ..tensor import Tensor

__all__ = ["compile", "Plan", "FeedError", "NumericsError", "KernelError", "resolve_feeds",
           "feed_array", "missing_feed_error"]

NAME = "numpy"


class FeedError(ValueError):
    """A feed is missing, or has the wrong shape or element type. Names the input."""


class NumericsError(FloatingPointError):
    """A NaN appeared. Names the first node that produced it, and why that op can."""


class KernelError(RuntimeError):
    """A kernel failed at run time (e.g. an embedding id out of range). Names the node."""


_NAN_HINTS = {
    "log": "log of a negative number is NaN (and log(0) = -inf); clamp the input or add a small epsilon",
    "sqrt": "sqrt of a negative number is NaN; check the input is >= 0 (e.g. a variance plus eps)",
    "div": "0/0 and inf/inf are NaN; check for a zero denominator",
    "pow": "a negative base to a fractional power is NaN",
    "sub": "inf - inf is NaN; an earlier value overflowed",
    "add": "inf + (-inf) is NaN; an earlier value overflowed",
    "mul": "0 * inf is NaN; an earlier value overflowed",
}


@dataclass(slots=True)
class Step:
    """One bound kernel: read ``args`` slots, write ``out`` slot, then drop ``free`` slots."""

    node: Node
    kernel: Callable[..., np.ndarray]
    args: tuple[int, ...]
    out: int
    free: tuple[int, ...]


def _where(node: Node) -> str:
    text = source_line_text(node.source)
    return f"{node.source}" + (f"\n      {text}" if text else "")


def resolve_feeds(graph: Graph, feeds: Mapping[Any, Any] | None) -> dict[int, Any]:
    """Map feed keys (Tensor, input/parameter name, or node id) to node ids.

    Only inputs and parameters can be fed. A computed node (or a constant) has its value
    decided by the graph; a feed for it used to be dropped without a word, so a student
    who fed ``h = x @ w`` to "try a value" got results that ignored it. Now it is an error.
    """
    out: dict[int, Any] = {}
    for key, value in (feeds or {}).items():
        if isinstance(key, Tensor):
            if key.graph is not graph:
                raise FeedError(f"feed key {key!r} belongs to a different graph than the outputs")
            node_id = key.node_id
        elif isinstance(key, str):
            try:
                node_id = graph.find(key).id
            except KeyError as e:
                raise FeedError(str(e.args[0])) from None
        elif isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            node_id = int(key)
            if not 0 <= node_id < len(graph.nodes):
                raise FeedError(f"feed key {node_id} is not a node of this graph (it has {len(graph.nodes)} nodes)")
        else:
            raise FeedError(f"feed keys are Tensors or names; got {type(key).__name__}")
        node = graph.nodes[node_id]
        if node.op not in ("input", "parameter"):
            what = "a constant: its value is part of the graph" if node.op == "constant" else \
                "computed by the graph from its inputs"
            raise FeedError(
                f"cannot feed {node.op} (node #{node.id} '{node.name}', shape {node.shape}, created at "
                f"{_where(node)}): it is {what}, so a fed value would be ignored.\n"
                f"  Only inputs and parameters take feeds. To choose this value yourself, make it an "
                f"input: at.input(\"{node.name}\", {node.shape})"
            )
        out[node_id] = value
    return out


def missing_feed_error(graph: Graph, node: Node, outputs: Sequence[int]) -> FeedError:
    """The error for a leaf the outputs need but nobody fed: which one, where it was made, and what to do.

    In a notebook the usual cause is a re-run cell: ``x = at.input("x", ...)`` made a NEW
    input called "x", so ``{"x": X}`` feeds the new one, while an output built before the
    re-run still reads the old one. The message says so when the name now means another node.
    """
    needed_by = ", ".join(f"#{o} {graph.nodes[o].op}" for o in outputs)
    msg = (f"missing feed for {node.op} '{node.name}' (shape {node.shape}, created at {_where(node)})\n"
           f"  the requested outputs ({needed_by}) depend on it; pass it in feeds, e.g. {{{node.name}: array}}")
    try:
        now = graph.find(node.name)
    except KeyError:
        now = None
    if now is not None and now.id != node.id:
        msg += (f"\n  note: the name '{node.name}' now means {now.op} #{now.id} (made at {now.source}); "
                f"this output reads the older {node.op} #{node.id} - re-run the cell that builds the output, "
                f"or feed it by its Tensor")
    return FeedError(msg)


def feed_array(node: Node, value: Any) -> np.ndarray:
    """``value`` as an ndarray of ``node``'s declared shape, or a FeedError that names the node.

    Checks the shape, and that the element type suits the node: a float input takes float32
    or float64 (float16 and longer floats are refused: asgteach computes in one of those
    two), an integer input (ids) takes integers. Converts nothing else.
    """
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as e:  # e.g. a ragged nested list: rows of different lengths
        raise FeedError(
            f"feed for {node.op} '{node.name}' is not a rectangular array of numbers ({e}); the graph declared "
            f"shape {node.shape} (at {_where(node)}). Check that every row has the same length."
        ) from None
    if arr.dtype == object:
        raise FeedError(
            f"feed for {node.op} '{node.name}' is not a rectangular array of numbers (numpy made an object "
            f"array of shape {arr.shape}); the graph declared shape {node.shape} (at {_where(node)}). "
            f"Check that every row has the same length."
        )
    if arr.shape != node.shape:
        raise FeedError(
            f"feed for {node.op} '{node.name}' has shape {arr.shape}, but the graph declared "
            f"{node.shape} (at {_where(node)})"
        )
    kind = arr.dtype.kind
    if node.dtype == "float":
        if arr.dtype not in (np.float32, np.float64):
            raise FeedError(
                f"feed for {node.op} '{node.name}' has dtype {arr.dtype}, but it is a float input; "
                f"pass float32 or float64 values (e.g. x.astype(np.float32))"
            )
    elif kind not in "iu":
        raise FeedError(
            f"feed for {node.op} '{node.name}' has dtype {arr.dtype}, but it is an integer input "
            f"(ids); pass an integer array"
        )
    return arr


def _cycle_collector_paused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` with Python's cycle collector paused (and restored after).

    Compiling a big graph allocates tens of thousands of small objects (steps, tuples,
    dicts), none of them in a reference cycle; the collector would wake up again and again
    to rescan all of them, a fifth of the compile time for a 16,000-node chain. Plain
    reference counting still frees everything as usual.
    """
    @wraps(fn)
    def paused(*args: Any, **kwargs: Any) -> Any:
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()
    return paused


class Plan:
    """A compiled, ready-to-run list of kernels for some outputs of a graph."""

    backend = NAME

    @_cycle_collector_paused
    def __init__(self, graph: Graph, outputs: list[int]) -> None:
        self.graph = graph
        self.outputs = list(outputs)
        self.node_ids = graph.ancestors(outputs)
        self.slot = slot = {nid: k for k, nid in enumerate(self.node_ids)}
        self.leaves: list[Node] = []     # inputs and parameters, fed at run time
        self.constants: list[Node] = []
        self.steps: list[Step] = []
        # (every loop below visits each node or edge once: compiling is linear in the graph's size)
        specs: dict[str, Any] = {}
        compute: list[tuple[Node, Any, tuple[int, ...]]] = []   # (node, its op, its input slots)
        last_use: dict[int, int] = {}    # slot -> index (in compute) of the last step reading it
        for i in self.node_ids:
            node = graph.nodes[i]
            op = specs.get(node.op)
            if op is None:
                op = specs[node.op] = spec(node.op)
            if not op.leaf:
                args = tuple(slot[j] for j in node.inputs)
                for a in args:
                    last_use[a] = len(compute)
                compute.append((node, op, args))
            elif node.op == "constant":
                self.constants.append(node)
            elif node.op in ("input", "parameter"):
                self.leaves.append(node)
        keep = {slot[i] for i in outputs}
        for k, (node, op, args) in enumerate(compute):
            kernel = partial(op.numpy, **node.attrs) if node.attrs else op.numpy
            free = tuple(sorted({a for a in args if last_use[a] == k and a not in keep}))
            self.steps.append(Step(node, kernel, args, slot[node.id], free))
        self._const_cache: dict[Any, list[tuple[int, np.ndarray]]] = {}
        self._out_slots = [self.slot[i] for i in self.outputs]
        # Constant folding: a step that reads only constants (or folded values) computes the same
        # thing on every run — e.g. the seed chain of a backward pass, neg(1) / 64 broadcast to
        # (64, 10). It runs once per precision, with the constants, and is then one of them.
        const_slots = {self.slot[n.id] for n in self.constants}
        self._folded_steps: list[Step] = []
        self._live_steps: list[Step] = []
        out_set = set(self._out_slots)
        for step in self.steps:
            # (an output is left live, computed on every run: see _plan_outputs)
            if step.out not in out_set and all(a in const_slots for a in step.args):
                const_slots.add(step.out)
                self._folded_steps.append(step)
            else:
                self._live_steps.append(step)
        #: node ids computed once per precision at the first run, not on every run
        self.folded: list[int] = [st.node.id for st in self._folded_steps]
        #: node id -> position of the input whose (dead, run-owned) buffer the step writes into
        self.inplace: dict[int, int]
        self.inplace, root, views = _plan_inplace(self._live_steps, graph, self.slot, self._out_slots)
        handover = _plan_outputs(self._out_slots, root, views)
        preloaded = sorted({a for st in self._live_steps for a in st.args if a in const_slots}
                           | {self.slot[n.id] for n in self.leaves} | (out_set & const_slots))
        # Equal small constants (a backward pass makes a `1` for every tanh) are read once by the program.
        same: dict[int, int] = {}   # constant slot -> the slot of the first equal one
        first: dict[Any, int] = {}
        pre = set(preloaded)
        for node in self.constants:
            s, v = self.slot[node.id], graph.constants[node.id]
            if s in pre and v.size <= 64:
                same[s] = first.setdefault((v.dtype.str, v.shape, v.tobytes()), s)
        #: the Python source of the generated program (see ``_generate``)
        self.source, self._program, self._line_step = _generate(self._live_steps, self.inplace, preloaded,
                                                                self._out_slots, handover, same)
        # For the short feed path: which slot each feed key fills, and what each leaf expects.
        self._key_slots: dict[int, tuple[Any, int]] = {}   # id(key) -> (key, slot or -1)
        self._leaf_spec = {self.slot[n.id]: (n.shape, n.dtype == "float") for n in self.leaves}
        self._env_template: dict[np.dtype, list[Any]] = {}

    # -- memory planning, for the curious (and for lesson 13) ----------------------------
    def liveness(self, itemsize: int = 4) -> list[dict[str, Any]]:
        """Bytes alive after each step when values are dropped at their last use."""
        live: dict[int, int] = {}
        for n in self.leaves + self.constants:
            live[self.slot[n.id]] = n.size * itemsize
        rows = []
        for s in self.steps:
            live[s.out] = s.node.size * itemsize
            for f in s.free:
                live.pop(f, None)
            rows.append({"node": s.node.id, "op": s.node.op, "live_bytes": sum(live.values()),
                         "live_values": len(live)})
        return rows

    def __repr__(self) -> str:
        return (f"<numpy Plan: {len(self.steps)} kernels, {len(self.leaves)} fed leaves, "
                f"{len(self.constants)} constants, outputs {self.outputs}>")

    # -- running ---------------------------------------------------------------------------
    def _prepare(self, feeds: Mapping[Any, Any] | None, dtype: Any) -> tuple[list[Any], np.dtype]:
        given = resolve_feeds(self.graph, feeds)
        env: list[Any] = [None] * len(self.node_ids)
        arrays: list[tuple[Node, np.ndarray]] = []
        for node in self.leaves:
            if node.id not in given:
                raise missing_feed_error(self.graph, node, self.outputs)
            arrays.append((node, feed_array(node, given[node.id])))
        run_dtype = np.dtype(dtype) if dtype is not None else None
        if run_dtype is None:
            float_dtypes = [a.dtype for n, a in arrays if n.dtype == "float"]
            run_dtype = np.result_type(*float_dtypes) if float_dtypes else np.dtype(np.float64)
        if run_dtype not in (np.float32, np.float64):
            raise FeedError(f"asgteach runs in float32 or float64, not {run_dtype}")
        for node, arr in arrays:
            if node.dtype == "float" and arr.dtype != run_dtype:
                arr = arr.astype(run_dtype)
            env[self.slot[node.id]] = arr
        for slot, value in self._constants_for(run_dtype):
            env[slot] = value
        return env, run_dtype

    def _constants_for(self, dtype: np.dtype) -> list[tuple[int, np.ndarray]]:
        """(slot, value) of every constant in ``dtype``, and of every folded step (computed here, once)."""
        cached = self._const_cache.get(dtype)
        if cached is None:
            cached = []
            values: dict[int, Any] = {}
            for node in self.constants:
                v = self.graph.constants[node.id]
                if v.dtype.kind == "f":
                    v = v.astype(dtype)
                values[self.slot[node.id]] = v
            for step in self._folded_steps:
                try:
                    with np.errstate(all="ignore"):
                        values[step.out] = step.kernel(*[values[a] for a in step.args])
                except (NumericsError, KernelError):
                    raise
                except Exception as e:
                    raise self._kernel_error(step, e) from e
            cached = list(values.items())
            for _, v in cached:  # shared by every run, and returned when an output is constant:
                if isinstance(v, np.ndarray):  # read-only, so a caller's `out += 1` cannot change later runs
                    v.setflags(write=False)
            self._const_cache[dtype] = cached
        return cached

    def run(
        self,
        feeds: Mapping[Any, Any] | None = None,
        params: Mapping[Any, Any] | None = None,
        dtype: Any = None,
        on_nan: str = "raise",
    ) -> list[np.ndarray]:
        """Compute the outputs. ``feeds``/``params``: {Tensor or name: array}.

        ``dtype`` forces the float precision (default: that of the float feeds).
        ``on_nan``: "raise" (default) explains the first node that produced a NaN;
        "warn" or "ignore" return NaNs as they are.
        """
        env = self._quick_env(feeds, params, dtype)
        all_feeds = None
        if env is None:  # first run, or something unusual: the full check, with its messages
            all_feeds = {**(feeds or {}), **(params or {})}
            env, _ = self._prepare(all_feeds, dtype)
            self._learn_keys(all_feeds)
        with np.errstate(all="ignore"):  # inf and NaN are values here; NaNs are explained below
            outs = self._execute(env)
            nan = on_nan != "ignore" and _has_nan(outs)
        if nan:
            if all_feeds is None:
                all_feeds = {**(feeds or {}), **(params or {})}
            self._nan_found(all_feeds, dtype, on_nan)
        return outs

    # -- the short feed path -----------------------------------------------------------------
    def _learn_keys(self, feeds: Mapping[Any, Any]) -> None:
        """Remember which slot each key of a feed dict that passed the full check fills.

        Keyed by the key object's identity (and holding on to it, so the id cannot be reused):
        a Tensor's or a name's node never changes, because graphs only grow.
        """
        if len(self._key_slots) > 1024:  # keys made afresh on every call: do not hoard them
            self._key_slots.clear()
        for key in feeds:
            (nid,) = resolve_feeds(self.graph, {key: None})
            self._key_slots[id(key)] = (key, self.slot.get(nid, -1))

    def _quick_env(self, feeds: Mapping[Any, Any] | None, params: Mapping[Any, Any] | None,
                   dtype: Any) -> list[Any] | None:
        """The environment for feeds like ones already fully checked, or None to take the long way.

        "Like" means: every key seen before (the very same object), every value an ndarray
        of its leaf's declared shape, all float feeds in one precision (float32 or float64,
        and that of ``dtype`` if given), integer feeds holding integers, each leaf fed once.
        Anything else goes through :meth:`_prepare`, which converts or explains.
        """
        key_slots, leaf_spec = self._key_slots, self._leaf_spec
        filled: list[tuple[int, np.ndarray]] = []
        run_dtype = None
        for group in (feeds, params):
            if not group:
                continue
            for key, value in group.items():
                hit = key_slots.get(id(key))
                if hit is None or hit[0] is not key:
                    return None
                slot = hit[1]
                if slot < 0:
                    continue  # a node of the graph that these outputs do not need
                if type(value) is not np.ndarray:
                    return None
                shape, is_float = leaf_spec[slot]
                if value.shape != shape:
                    return None
                vt = value.dtype
                if is_float:
                    if vt is not run_dtype:
                        if run_dtype is not None or (vt != np.float32 and vt != np.float64):
                            return None
                        run_dtype = vt
                elif vt.kind not in "iu":
                    return None
                filled.append((slot, value))
        if run_dtype is None or len(filled) != len(leaf_spec) or (dtype is not None and np.dtype(dtype) != run_dtype):
            return None
        template = self._env_template.get(run_dtype)
        if template is None:
            template = [None] * len(self.node_ids)
            for slot, value in self._constants_for(run_dtype):
                template[slot] = value
            self._env_template[run_dtype] = template
        env = template.copy()
        for slot, value in filled:
            if env[slot] is not None:  # the same leaf fed twice (e.g. in feeds and params)
                return None
            env[slot] = value
        return env

    def _execute(self, env: list[Any], watch: Callable[[Step, list[Any]], None] | None = None) -> list[Any]:
        """Run every step; return the outputs. With ``watch``: one step at a time, nothing overwritten.

        Callers run this under ``np.errstate(all="ignore")``.
        """
        step = self.steps[0] if self.steps else None
        try:
            if watch is None:
                return self._program(env)
            for step in self.steps:
                env[step.out] = step.kernel(*[env[a] for a in step.args])
                watch(step, env)
            return [env[s] for s in self._out_slots]
        except (NumericsError, KernelError, _Stop):
            raise  # already explained by the kernel (or the watcher's own signal)
        except Exception as e:
            error = e
        if watch is None:  # which line of the generated program raised: that is the step
            tb = error.__traceback__
            while tb is not None and tb.tb_frame.f_code is not self._program.__code__:
                tb = tb.tb_next
            k = self._line_step.get(tb.tb_lineno) if tb is not None else None
            if k is None:
                raise error
            step = self._live_steps[k]
        raise self._kernel_error(step, error) from error

    def _kernel_error(self, step: Step, error: BaseException) -> KernelError:
        node = step.node
        shapes = ", ".join(str(self.graph.nodes[i].shape) for i in node.inputs)
        return KernelError(
            f"{node.op} (node #{node.id} '{node.name}', inputs {shapes}) failed while running: {error}\n"
            f"  created at {_where(node)}"
        )

    def _nan_found(self, feeds: Mapping[Any, Any], dtype: Any, on_nan: str) -> None:
        """Re-run step by step to find the first NaN, and explain it."""
        import warnings

        env, _ = self._prepare(feeds, dtype)
        for node in self.leaves:
            arr = env[self.slot[node.id]]
            if arr.dtype.kind == "f" and np.isnan(arr).any():
                where = tuple(int(i) for i in np.argwhere(np.isnan(arr))[0])
                msg = (f"the feed for {node.op} '{node.name}' contains NaN "
                       f"({int(np.isnan(arr).sum())} of {arr.size} values, first at index {where})")
                if on_nan == "raise":
                    raise NumericsError(msg)
                warnings.warn(msg, RuntimeWarning, stacklevel=3)
                return

        def watch(step: Step, env: list[Any]) -> None:
            out = env[step.out]
            if out.dtype.kind != "f" or not np.isnan(out).any():
                return
            node = step.node
            lines = []
            for i in node.inputs:
                v = env[self.slot[i]]
                src = self.graph.nodes[i]
                if v.dtype.kind == "f" and v.size:
                    lines.append(f"    input #{i} {src.op} '{src.name}' {v.shape}: min {np.nanmin(v):.4g}, "
                                 f"max {np.nanmax(v):.4g}, NaN {int(np.isnan(v).sum())}")
            first = tuple(int(i) for i in np.argwhere(np.isnan(out))[0])
            hint = _NAN_HINTS.get(node.op, "check this op's inputs for values outside its domain")
            msg = (f"NaN first appears in {node.op} (node #{node.id} '{node.name}', {node.phase} pass), "
                   f"created at {_where(node)}\n  {int(np.isnan(out).sum())} of {out.size} values are NaN, "
                   f"first at index {first}\n" + "\n".join(lines) + f"\n  why: {hint}")
            if on_nan == "raise":
                raise NumericsError(msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=4)
            raise _Stop

        try:
            with np.errstate(all="ignore"):
                self._execute(env, watch)
        except _Stop:
            pass


class _Stop(Exception):
    pass


def _has_nan(outs: Sequence[Any]) -> bool:
    """Whether any float output holds a NaN.

    One reduction per output, no temporary, and it cannot invent a NaN (a sum could, from
    inf - inf): ``min`` propagates NaN; so does the dot product ``x . x`` (squares are never
    negative, overflow gives inf), which BLAS does faster on small arrays. NaN is the one
    value not equal to itself. A hit is confirmed element by element. (Call under errstate:
    the dot product may overflow, harmlessly.)
    """
    for o in outs:
        if o.dtype.kind != "f":
            continue
        if o.ndim == 0:
            r = o
        elif o.size > 16384:
            r = np.minimum.reduce(o, axis=None)
        else:
            flat = o if o.ndim == 1 else o.ravel()
            r = flat.dot(flat)
        if r != r and np.isnan(o).any():
            return True
    return False


def _is_ufunc_kernel(step: Step) -> bool:
    """A numpy ufunc called as it is (no attributes): it returns new memory and accepts ``out=``."""
    k = step.kernel
    return isinstance(k, np.ufunc) and k.nout == 1 and k.nin == len(step.args)


def _plan_inplace(steps: list[Step], graph: Graph, slot: dict[int, int], out_slots: list[int]
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

    Also returns, for ``_plan_outputs``: ``root`` (value -> the buffer it lives in, for the
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
    fresh = [_is_ufunc_kernel(step) and shape[step.out] != () for step in steps]
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


def _plan_outputs(out_slots: list[int], root: dict[int, int], views: dict[int, tuple[int, ...]]) -> list[Handover]:
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


def _copy(a: Any) -> np.ndarray:
    """A new array holding ``a``'s values (always an ndarray, also for a numpy scalar)."""
    return np.array(a, copy=True)


def _writable(a: Any) -> np.ndarray:
    """``a`` if it is a writable ndarray, else a writable copy."""
    return a if type(a) is np.ndarray and a.flags.writeable else np.array(a, copy=True)


def _own(a: Any, avoid: tuple[Any, ...]) -> np.ndarray:
    """``a`` if it owns its memory, is writable and is none of ``avoid``; else a copy.

    An array that owns its memory is no view of anything, so it can only alias another
    array by *being* it (a kernel may return its input unchanged): hence the ``is`` tests.
    """
    if type(a) is np.ndarray and a.flags.owndata and a.flags.writeable and not any(a is b for b in avoid):
        return a
    return np.array(a, copy=True)


def _literal(value: Any) -> str | None:
    """``value`` as Python source, when it is a plain literal that reads back equal; else None."""
    if value is None or type(value) in (bool, int, str) or (type(value) is float and math.isfinite(value)):
        return repr(value)
    if type(value) is tuple:
        parts = [_literal(v) for v in value]
        if all(p is not None for p in parts):
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"  # type: ignore[arg-type]
    return None


_RESERVED = re.compile(r"[vo]\d+|env|program|_copy|_own|_writable")


def _generate(steps: list[Step], inplace: dict[int, int], preloaded: list[int], out_slots: list[int],
              handover: list[Handover], same: dict[int, int]) -> tuple[str, Callable[[list[Any]], list[Any]],
                                                                       dict[int, int]]:
    """Write the plan out as one straight-line Python function, and compile it.

    Walking a list of steps costs a few hundred nanoseconds of interpreter work per step;
    a function with one line per kernel costs only the call. The source reads like the
    graph itself: ``v9 = add(v8, v3)  # node #12`` adds values 8 and 3 (``v`` + the value's
    slot in the plan) and computes node #12; ``del`` lines free each value at its last use,
    exactly as the liveness plan says. A write in place passes the buffer as the ufunc's
    ``out`` and keeps its name: ``v8 = add(v8, v3, out=v8)``. Equal constants (``same``:
    slot -> first equal slot) share one name too. A name is deleted when the last value
    bound to it dies. The last lines hand the outputs over as ``_plan_outputs`` decided
    (``o1 = _copy(v0)``: a feed asked for as an output is copied, not returned).

    Compiling Python source is not free (about ten microseconds per line, so a second for a
    graph of 60,000 steps), so the program holds nothing but the steps: no bookkeeping
    statement per step (which step failed is read from the traceback's line number:
    ``line -> step index`` is returned alongside the source and the function), and each
    constant read once.
    """
    lines = ["def program(env):"]
    var: dict[int, str] = {}    # slot -> its variable; a result written in place takes its buffer's variable
    users: dict[str, int] = {}  # variable -> how many live values are bound to it
    for s in preloaded:  # fed leaves, constants and folded values
        rep = same.get(s, s)
        var[s] = f"v{rep}"
        users[var[s]] = users.get(var[s], 0) + 1
        if rep == s:
            lines.append(f"    v{s} = env[{s}]")
    names: dict[str, Any] = {"_copy": _copy, "_own": _own, "_writable": _writable}
    kernel_name: dict[int, str] = {}   # id(kernel) -> its name in the program (one per distinct kernel)
    line_step: dict[int, int] = {}
    for k, step in enumerate(steps):
        kernel, args = step.kernel, ", ".join(var[a] for a in step.args)
        if isinstance(kernel, partial) and not kernel.args and all(key.isidentifier() for key in kernel.keywords):
            # pass the node's attributes as keywords directly: cheaper than calling a partial
            for key, value in kernel.keywords.items():
                text = _literal(value)
                if text is None:  # not a plain literal (an array, a function): a name bound to it
                    text = f"a{k}_{key}"
                    names[text] = value
                args += f", {key}={text}"
            kernel = kernel.func
        name = kernel_name.get(id(kernel))
        if name is None:
            base = step.node.op   # the kernel is called by its op's name
            if not base.isidentifier() or _RESERVED.fullmatch(base):
                base = "k_" + re.sub(r"\W", "_", base)
            name, n = base, 1
            while name in names:
                n += 1
                name = f"{base}_{n}"
            names[name] = kernel
            kernel_name[id(kernel)] = name
        note = ""
        if step.node.id in inplace:  # ``v2 = tanh(v2, out=v2)``: the same buffer, so the same name
            var[step.out] = var[step.args[inplace[step.node.id]]]
            args += f", out={var[step.out]}"
            note = " (in place)"
        else:
            var[step.out] = f"v{step.out}"
        lines.append(f"    {var[step.out]} = {name}({args})  # node #{step.node.id}{note}")
        line_step[len(lines)] = k
        users[var[step.out]] = users.get(var[step.out], 0) + 1
        dead = []
        for f in step.free:
            users[var[f]] -= 1
            if not users[var[f]]:
                dead.append(var[f])
        if dead:
            lines.append("    del " + ", ".join(dead))
    for s in out_slots:
        var.setdefault(s, f"v{s}")
    for j, (s, (how, avoid, earlier)) in enumerate(zip(out_slots, handover)):
        v = var[s]
        if how == "as is":
            lines.append(f"    o{j} = {v}")
        elif how == "copy":
            lines.append(f"    o{j} = _copy({v})")
        elif how == "writable":
            lines.append(f"    o{j} = _writable({v})")
        else:
            others = [f"env[{a}]" for a in avoid] + [f"o{i}" for i in earlier]
            lines.append(f"    o{j} = _own({v}, ({', '.join(others)}{',' if len(others) == 1 else ''}))")
    lines.append(f"    return [{', '.join(f'o{j}' for j in range(len(out_slots)))}]")
    source = "\n".join(lines) + "\n"
    exec(builtins.compile(source, "<asgteach numpy plan>", "exec"), names)  # noqa: S102 - our own generated code
    return source, names["program"], line_step


def compile(graph: Graph, outputs: list[int]) -> Plan:  # noqa: A001 - the verb every backend uses
    """Compile the outputs (node ids) of ``graph`` into a :class:`Plan`."""
    return Plan(graph, outputs)
