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
* the NaN check on the outputs is one reduction per output (``min(x)``, or the dot
  product ``x . x`` for small ones: each is NaN exactly when some element of x is), and
  only a hit triggers the step-by-step search that names the node.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..graph import Graph, Node, source_line_text
from ..ops.registry import spec
from ..tensor import Tensor

__all__ = ["compile", "Plan", "FeedError", "NumericsError", "KernelError", "resolve_feeds"]

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


@dataclass
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
    """Map feed keys (Tensor, input/parameter name, or node id) to node ids."""
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
        elif isinstance(key, (int, np.integer)):
            node_id = int(key)
        else:
            raise FeedError(f"feed keys are Tensors or names; got {type(key).__name__}")
        out[node_id] = value
    return out


class Plan:
    """A compiled, ready-to-run list of kernels for some outputs of a graph."""

    backend = NAME

    def __init__(self, graph: Graph, outputs: list[int]) -> None:
        self.graph = graph
        self.outputs = list(outputs)
        self.node_ids = graph.ancestors(outputs)
        self.slot = {nid: k for k, nid in enumerate(self.node_ids)}
        self.leaves: list[Node] = []     # inputs and parameters, fed at run time
        self.constants: list[Node] = []
        self.steps: list[Step] = []
        last_use: dict[int, int] = {}
        compute = [graph.nodes[i] for i in self.node_ids if not spec(graph.nodes[i].op).leaf]
        for k, node in enumerate(compute):
            for i in node.inputs:
                last_use[i] = k
        keep = set(outputs)
        for k, node in enumerate(compute):
            op = spec(node.op)
            kernel = partial(op.numpy, **node.attrs) if node.attrs else op.numpy
            free = tuple(sorted({self.slot[i] for i in node.inputs if last_use[i] == k and i not in keep}))
            self.steps.append(Step(node, kernel, tuple(self.slot[i] for i in node.inputs), self.slot[node.id], free))
        for i in self.node_ids:
            node = graph.nodes[i]
            if node.op == "constant":
                self.constants.append(node)
            elif node.op in ("input", "parameter"):
                self.leaves.append(node)
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
            # (an output is left live: the caller gets a fresh array it may modify)
            if step.out not in out_set and all(a in const_slots for a in step.args):
                const_slots.add(step.out)
                self._folded_steps.append(step)
            else:
                self._live_steps.append(step)
        #: node ids computed once per precision at the first run, not on every run
        self.folded: list[int] = [st.node.id for st in self._folded_steps]
        #: node id -> position of the input whose (dead, run-owned) buffer the step writes into
        self.inplace: dict[int, int] = _plan_inplace(self._live_steps, graph, self.slot, self._out_slots)
        preloaded = sorted({a for st in self._live_steps for a in st.args if a in const_slots}
                           | {self.slot[n.id] for n in self.leaves} | (out_set & const_slots))
        #: the Python source of the generated program (see ``_generate``)
        self.source, self._program = _generate(self._live_steps, self.inplace, preloaded, self._out_slots)
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
        for nid in given:
            if not 0 <= nid < len(self.graph.nodes):
                raise FeedError(f"feed key {nid} is not a node of this graph")
        env: list[Any] = [None] * len(self.node_ids)
        arrays: list[tuple[Node, np.ndarray]] = []
        for node in self.leaves:
            if node.id not in given:
                needed_by = ", ".join(f"#{o} {self.graph.nodes[o].op}" for o in self.outputs)
                raise FeedError(
                    f"missing feed for {node.op} '{node.name}' (shape {node.shape}, created at {_where(node)})\n"
                    f"  the requested outputs ({needed_by}) depend on it; pass it in feeds, "
                    f"e.g. {{{node.name}: array}}"
                )
            arrays.append((node, np.asarray(given[node.id])))
        run_dtype = np.dtype(dtype) if dtype is not None else None
        if run_dtype is None:
            float_dtypes = [a.dtype for n, a in arrays if n.dtype == "float" and a.dtype.kind == "f"]
            run_dtype = np.result_type(*float_dtypes) if float_dtypes else np.dtype(np.float64)
        if run_dtype not in (np.float32, np.float64):
            raise FeedError(f"asgteach runs in float32 or float64, not {run_dtype}")
        for node, arr in arrays:
            if arr.shape != node.shape:
                raise FeedError(
                    f"feed for {node.op} '{node.name}' has shape {arr.shape}, but the graph declared "
                    f"{node.shape} (at {_where(node)})"
                )
            kind = arr.dtype.kind
            if node.dtype == "float":
                if kind != "f" or arr.dtype.itemsize < 4:
                    raise FeedError(
                        f"feed for {node.op} '{node.name}' has dtype {arr.dtype}, but it is a float input; "
                        f"pass float32 or float64 values (e.g. x.astype(np.float32))"
                    )
                if arr.dtype != run_dtype:
                    arr = arr.astype(run_dtype)
            elif kind not in "iu":
                raise FeedError(
                    f"feed for {node.op} '{node.name}' has dtype {arr.dtype}, but it is an integer input "
                    f"(ids); pass an integer array"
                )
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
        except _StepFailed as failed:  # from the generated program: which step, and what it raised
            step, error = self._live_steps[failed.step], failed.__cause__
        except (NumericsError, KernelError, _Stop):
            raise
        except Exception as e:
            error = e
        if isinstance(error, (NumericsError, KernelError)):
            raise error  # already explained by the kernel (outside the except: no chained context)
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


class _StepFailed(Exception):
    """Raised by a generated program, ``from`` the kernel's error: carries the step index."""

    def __init__(self, step: int) -> None:
        super().__init__(step)
        self.step = step


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


def _is_elementwise_kernel(step: Step) -> bool:
    """An elementwise ufunc (not a generalised one such as matmul): safe to run in place."""
    return _is_ufunc_kernel(step) and step.kernel.signature is None


def _plan_inplace(steps: list[Step], graph: Graph, slot: dict[int, int], out_slots: list[int]) -> dict[int, int]:
    """Which steps may write their result into one of their inputs' buffers (node id -> input position).

    A buffer may be overwritten at step k only if
      * it was allocated by this run: the value came from a ufunc kernel, which always returns
        a fresh array (fed arrays and constants belong to the user or the graph: never written);
      * the value is not an output, and step k is its last use;
      * no other value still needed shares that memory: any kernel that is not a ufunc
        (``reshape``, ``transpose``, ``broadcast_to``...) may return a view of its inputs, so
        its value counts as sharing the memory of all of them, and must be dead by step k too;
      * the result has the buffer's shape (no broadcasting into it) and is not a 0-d scalar.
    """
    outputs = set(out_slots)
    roots: dict[int, frozenset[int]] = {}   # value slot -> buffers (root slots) it may live in
    buffers: set[int] = set()               # values that ARE a buffer this run allocated (not a view)
    last_use: dict[int, int] = {}
    shape = {slot[n.id]: n.shape for n in (graph.nodes[i] for i in slot)}
    for k, step in enumerate(steps):
        for a in step.args:
            last_use[a] = k
    holders: dict[int, list[int]] = {}      # root slot -> values that may live in it
    plan: dict[int, int] = {}
    for k, step in enumerate(steps):
        target = None
        if _is_elementwise_kernel(step) and shape[step.out] != ():
            for pos, a in enumerate(step.args):
                if a not in buffers or shape[a] != shape[step.out]:
                    continue
                (root,) = roots[a]
                if all(v not in outputs and last_use.get(v, -1) <= k for v in holders[root]):
                    target = pos
                    break
        if target is not None:  # the ufunc returns its out= array: the very same buffer
            plan[step.node.id] = target
            roots[step.out] = roots[step.args[target]]
            buffers.add(step.out)
        elif _is_ufunc_kernel(step) and shape[step.out] != ():
            roots[step.out] = frozenset((step.out,))
            buffers.add(step.out)
        else:  # may be a view of any of its inputs (or of a leaf: then never written)
            roots[step.out] = frozenset().union(*(roots.get(a, frozenset((a,))) for a in step.args))
        for r in roots[step.out]:
            holders.setdefault(r, []).append(step.out)
    return plan


def _generate(steps: list[Step], inplace: dict[int, int], preloaded: list[int],
              out_slots: list[int]) -> tuple[str, Callable[[list[Any]], list[Any]]]:
    """Write the plan out as one straight-line Python function, and compile it.

    Walking a list of steps costs a few hundred nanoseconds of interpreter work per step;
    a function with one line per kernel costs only the call. The source reads like the
    graph itself (``v9 = k1(v8, v3)`` is node 9 = node 8 + node 3), and ``del`` lines free
    each value at its last use, exactly as the liveness plan says.
    """
    lines = ["def program(env):", "    k = -1", "    try:"]
    for s in preloaded:  # fed leaves, constants and folded values
        lines.append(f"        v{s} = env[{s}]")
    names: dict[str, Any] = {"_StepFailed": _StepFailed}
    for k, step in enumerate(steps):
        kernel, args = step.kernel, ", ".join(f"v{a}" for a in step.args)
        if isinstance(kernel, partial) and not kernel.args and all(key.isidentifier() for key in kernel.keywords):
            # pass the node's attributes as keywords directly: cheaper than calling a partial
            for key, value in kernel.keywords.items():
                names[f"k{k}_{key}"] = value
                args += f", {key}=k{k}_{key}"
            kernel = kernel.func
        names[f"k{k}"] = kernel
        if step.node.id in inplace:
            args += f", out=v{step.args[inplace[step.node.id]]}"
        lines.append(f"        k = {k}; v{step.out} = k{k}({args})  # #{step.node.id} {step.node.op}")
        if step.free:
            lines.append("        del " + ", ".join(f"v{f}" for f in step.free))
    lines.append(f"        return [{', '.join(f'v{s}' for s in out_slots)}]")
    lines += ["    except Exception as e:", "        raise _StepFailed(k) from e"]
    source = "\n".join(lines) + "\n"
    exec(builtins.compile(source, "<asgteach numpy plan>", "exec"), names)  # noqa: S102 - our own generated code
    return source, names["program"]


def compile(graph: Graph, outputs: list[int]) -> Plan:  # noqa: A001 - the verb every backend uses
    """Compile the outputs (node ids) of ``graph`` into a :class:`Plan`."""
    return Plan(graph, outputs)
