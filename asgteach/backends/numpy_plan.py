"""The numpy backend's optimising Plan: the reference interpreter's loop, made fast.

``asgteach.backends.reference.interpret`` runs a graph in a dozen lines: every node the
outputs need, in graph order, ``env[node] = kernel(*inputs)``. A :class:`Plan` computes the
same values (tests/test_reference_interpreter.py checks it on random graphs) but does, once,
at compile time, all the work that does not depend on the numbers:

* **prune** — keep only the nodes the outputs depend on;
* **order** — node ids are already a topological order, so sorting them is enough;
* **bind** — look up each op's numpy kernel and freeze its attributes (a :class:`Step`);
* **plan memory** — find each value's last use, so the run can drop it right after
  (a value nobody reads any more should not sit in memory).

Float precision follows the feeds: float64 in, float64 out; float32 stays float32.

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
* the NaN check on the outputs is one dot product ``x . x`` per float output (NaN exactly
  when some element of x is), written out at compile time for the outputs' declared kinds
  and shapes (``numpy_codegen.write_nan_check`` says why every output element is read),
  and only a hit triggers the step-by-step search that names the node.

Keeping a compiled plan small (a long graph's plan used to take 4 KB per node, six times
its graph): it keeps the compiled program, ``node_ids``, the leaves and constants and the
planner's decisions (``folded``, ``inplace``); ``steps``, ``slot`` and ``source`` are
rebuilt from the graph when read. A long program is compiled as several functions of at
most ``numpy_codegen.PART_STEPS`` steps: CPython's compiler needs about 3 KB per line of
one function, all at once, and a process keeps what it once took.

Runs of one plan take turns (a re-entrant lock), so threads may share a plan, as
``at.run`` from two threads does (it caches one plan per outputs).

Where each part lives: the in-place and output plans in ``numpy_memory``, the generated
program in ``numpy_codegen``; feed checks and errors, shared with the wgpu backend, in
``common``.
"""

from __future__ import annotations

import gc
import threading
from bisect import bisect_left
from dataclasses import dataclass
from functools import partial, wraps
from typing import Any, Callable, Mapping

import numpy as np

from ..graph import Graph, Node
from ..ops.registry import spec
from ..ops.nn import IdsOutOfRange
from . import ids
from .common import FeedError, KernelError, NumericsError, created_at, feed_array, missing_feed_error, resolve_feeds
from .numpy_codegen import generate, nan_in, source
from .numpy_memory import plan_inplace, plan_outputs

__all__ = ["Plan", "Step"]


@dataclass(slots=True)
class Step:
    """One bound kernel: read ``args`` slots, write ``out`` slot, then drop ``free`` slots."""

    node: Node
    kernel: Callable[..., np.ndarray]
    args: tuple[int, ...]
    out: int
    free: tuple[int, ...]



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
    """A compiled, ready-to-run list of kernels for some outputs of a graph.

    What a plan keeps is what running needs: the compiled program, which node each slot
    holds (``node_ids``), the leaves and constants, and the decisions the planner made
    (``folded``, ``inplace``). Everything else is derived again when asked: ``steps`` (the
    bound kernels), ``slot`` (node id -> slot) and ``source`` (the program's text) are
    properties that rebuild it from the graph, so a compiled plan costs a fraction of its
    graph's memory (tests/test_numpy_plan_memory.py counts the bytes).
    """

    backend = "numpy"

    @_cycle_collector_paused
    def __init__(self, graph: Graph, outputs: list[int]) -> None:
        self.graph = graph
        self.outputs = list(outputs)
        self.node_ids = graph.ancestors(outputs)
        slot = {nid: k for k, nid in enumerate(self.node_ids)}
        self.leaves: list[Node] = []     # inputs and parameters, fed at run time
        self.constants: list[Node] = []
        # The op specs as registered now: the program calls their kernels, and ``steps`` binds the same ones
        # later even if a notebook re-registers an op of the same name meanwhile.
        self._ops: dict[str, Any] = {}
        for i in self.node_ids:
            node = graph.nodes[i]
            op = self._ops.get(node.op)
            if op is None:
                op = self._ops[node.op] = spec(node.op)
            if node.op == "constant":
                self.constants.append(node)
            elif node.op in ("input", "parameter"):
                self.leaves.append(node)
        self._out_slots = [slot[i] for i in self.outputs]
        self._leaf_slots = [slot[n.id] for n in self.leaves]
        steps = self._bind(slot)   # (every pass below visits each step or edge once: linear in the graph's size)
        self._n_steps = len(steps)
        # Constant folding: a step that reads only constants (or folded values) computes the same
        # thing on every run — e.g. the seed chain of a backward pass, neg(1) / 64 broadcast to
        # (64, 10). It runs once per precision, with the constants, and is then one of them.
        const_slots = {slot[n.id] for n in self.constants}
        live: list[Step] = []
        out_set = set(self._out_slots)
        #: node ids computed once per precision at the first run, not on every run
        self.folded: list[int] = []
        for step in steps:
            # (an output is left live, computed on every run: see numpy_memory.plan_outputs)
            if step.out not in out_set and all(a in const_slots for a in step.args):
                const_slots.add(step.out)
                self.folded.append(step.node.id)
            else:
                live.append(step)
        del steps   # (what is not kept is dropped as soon as it is used: less memory at the compile's peak)
        #: node id -> position of the input whose (dead, run-owned) buffer the step writes into
        self.inplace: dict[int, int]
        self.inplace, root, views = plan_inplace(live, graph, slot, self._out_slots)
        self._handover = plan_outputs(self._out_slots, root, views)
        del root, views
        preloaded = self._preloaded(live, slot)
        # Equal small constants (a backward pass makes a `1` for every tanh) are read once by the program.
        self._same: dict[int, int] = {}   # constant slot -> the slot of the first equal one
        first: dict[Any, int] = {}
        pre = set(preloaded)
        for node in self.constants:
            s, v = slot[node.id], graph.constants[node.id]
            if s in pre and v.size <= 64:
                self._same[s] = first.setdefault((v.dtype.str, v.shape, v.tobytes()), s)
        del first, pre
        self._program = generate(live, self.inplace, preloaded, self._out_slots, self._handover, self._same,
                                 self._output_kinds())
        self._run_program = self._program.run
        self._nan_check = self._program.nan_check
        del live, preloaded
        # For the short feed path: which slot each feed key fills, and what its leaf expects.
        #: id(key) -> (key, slot, declared shape, is a float leaf); slot -1 - node id: a node not needed here
        self._key_slots: dict[int, tuple[Any, int, tuple[int, ...], bool]] = {}
        self._leaf_spec = {slot[n.id]: (n.shape, n.dtype == "float") for n in self.leaves}
        self._env_template: dict[np.dtype, list[Any]] = {}
        self._const_cache: dict[Any, list[tuple[int, np.ndarray]]] = {}
        # One run at a time: runs share the caches above (filled at a first run) and the key memory
        # of the short feed path. Re-entrant, so a run may call run again on the same thread.
        self._lock = threading.RLock()

    # -- what is derived again when asked ------------------------------------------------------
    @property
    def slot(self) -> dict[int, int]:
        """node id -> its slot: its position in ``node_ids``, and in a run's list of values (``env``)."""
        return {nid: k for k, nid in enumerate(self.node_ids)}

    def _slot_of(self, node_id: int) -> int:
        """The slot of ``node_id``, or -1 when these outputs do not need that node (``node_ids`` is sorted)."""
        k = bisect_left(self.node_ids, node_id)
        return k if k < len(self.node_ids) and self.node_ids[k] == node_id else -1

    @property
    def steps(self) -> list[Step]:
        """Every bound kernel in run order, folded ones included (bound again from the graph at each read)."""
        return self._bind(self.slot)

    @property
    def source(self) -> str:
        """The Python source of the generated program (see ``numpy_codegen.write``): written again when read."""
        slot = self.slot
        live = self._live(self._bind(slot))
        return source(live, self.inplace, self._preloaded(live, slot), self._out_slots, self._handover, self._same,
                      self._output_kinds(), self._program.part_steps)

    def _output_kinds(self) -> list[tuple[bool, int]]:
        """For the NaN check: whether each output is a float, and how many axes it has (as declared)."""
        nodes = self.graph.nodes
        return [(nodes[i].dtype == "float", len(nodes[i].shape)) for i in self.outputs]

    def _bind(self, slot: dict[int, int]) -> list[Step]:
        """Bind: each computed node's kernel with its attributes frozen, the slots it reads and writes,
        and the slots whose last reader it is (freed right after it; never an output)."""
        graph, ops = self.graph, self._ops
        compute: list[tuple[Node, tuple[int, ...]]] = []   # (node, its input slots)
        last_use: dict[int, int] = {}    # slot -> index (in compute) of the last step reading it
        for i in self.node_ids:
            node = graph.nodes[i]
            if not ops[node.op].leaf:
                args = tuple(slot[j] for j in node.inputs)
                for a in args:
                    last_use[a] = len(compute)
                compute.append((node, args))
        keep = set(self._out_slots)
        steps = []
        for k, (node, args) in enumerate(compute):
            kernel = ops[node.op].numpy
            if node.attrs:
                kernel = partial(kernel, **node.attrs)
            free = tuple(sorted({a for a in args if last_use[a] == k and a not in keep}))
            steps.append(Step(node, kernel, args, slot[node.id], free))
        return steps

    def _live(self, steps: list[Step]) -> list[Step]:
        """The steps that run on every run (the program's): all but the folded ones."""
        folded = set(self.folded)
        return [st for st in steps if st.node.id not in folded] if folded else steps

    def _preloaded(self, live: list[Step], slot: dict[int, int]) -> list[int]:
        """The slots the program reads from ``env``: fed leaves, and the constants and folded values it uses."""
        const_slots = {slot[n.id] for n in self.constants} | {slot[i] for i in self.folded}
        return sorted({a for st in live for a in st.args if a in const_slots}
                      | set(self._leaf_slots)
                      | (set(self._out_slots) & const_slots))

    # -- memory planning, for the curious (and for lesson 13) ----------------------------
    def liveness(self, itemsize: int = 4) -> list[dict[str, Any]]:
        """Bytes alive after each step when values are dropped at their last use."""
        slot = self.slot
        live: dict[int, int] = {}
        for n in self.leaves + self.constants:
            live[slot[n.id]] = n.size * itemsize
        rows = []
        for s in self._bind(slot):
            live[s.out] = s.node.size * itemsize
            for f in s.free:
                live.pop(f, None)
            rows.append({"node": s.node.id, "op": s.node.op, "live_bytes": sum(live.values()),
                         "live_values": len(live)})
        return rows

    def fusion_chains(self) -> list[list[int]]:
        """Which steps a fusing backend could run as one kernel, by the plainest rule (lesson 13, section 6).

        An elementwise step (category arithmetic, activation or comparison) whose value is not an output, not
        folded, and read by exactly one elementwise step of the same shape joins that reader: the two become one
        loop that keeps the value in a register. Each chain of node ids, in order, ends with the step whose value
        is written. This numpy backend fuses nothing (it runs one numpy call per step); the GPU's pass ``chains``
        (``wgpu_passes/chains.py``) applies a wider rule (trees of single readers, broadcasts, costs).
        """
        elementwise = ("arithmetic", "activation", "comparison")
        steps = self.steps
        readers: dict[int, list[Node]] = {}
        for step in steps:
            for i in step.node.inputs:
                readers.setdefault(i, []).append(step.node)
        outputs, folded = set(self.outputs), set(self.folded)
        joins: dict[int, int] = {}
        for step in steps:
            node, users = step.node, readers.get(step.node.id, [])
            if (spec(node.op).category in elementwise and node.id not in outputs and node.id not in folded
                    and len(users) == 1 and spec(users[0].op).category in elementwise
                    and users[0].shape == node.shape):
                joins[node.id] = users[0].id
        groups: dict[int, list[int]] = {}
        for step in steps:
            end = step.node.id
            while end in joins:
                end = joins[end]
            groups.setdefault(end, []).append(step.node.id)
        return [ids for ids in groups.values() if len(ids) > 1]

    def __repr__(self) -> str:
        return (f"<numpy Plan: {self._n_steps} kernels, {len(self.leaves)} fed leaves, "
                f"{len(self.constants)} constants, outputs {self.outputs}>")

    # -- running ---------------------------------------------------------------------------
    def _prepare(self, feeds: Mapping[Any, Any] | None, dtype: Any,
                 params: Mapping[Any, Any] | None = None) -> tuple[list[Any], np.dtype]:
        given = resolve_feeds(self.graph, feeds, params)
        env: list[Any] = [None] * len(self.node_ids)
        arrays: list[tuple[Node, int, np.ndarray]] = []
        for node, s in zip(self.leaves, self._leaf_slots):
            if node.id not in given:
                raise missing_feed_error(self.graph, node, self.outputs)
            arrays.append((node, s, feed_array(node, given[node.id])))
        run_dtype = np.dtype(dtype) if dtype is not None else None
        if run_dtype is None:
            float_dtypes = [a.dtype for n, _, a in arrays if n.dtype == "float"]
            run_dtype = np.result_type(*float_dtypes) if float_dtypes else np.dtype(np.float64)
        if run_dtype not in (np.float32, np.float64):
            raise FeedError(f"asgteach runs in float32 or float64, not {run_dtype}")
        for node, s, arr in arrays:
            if node.dtype == "float" and arr.dtype != run_dtype:
                arr = arr.astype(run_dtype)
            env[s] = arr
        for s, value in self._constants_for(run_dtype):
            env[s] = value
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
                values[self._slot_of(node.id)] = v
            if self.folded:
                folded = set(self.folded)
                for step in self.steps:
                    if step.node.id not in folded:
                        continue
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

        Safe to call from several threads: runs of one plan take turns (a lock), as they share
        the caches a first run fills.
        """
        with self._lock:
            env = self._quick_env(feeds, params, dtype)
            if env is None:  # first run, or something unusual: the full check, with its messages
                env, _ = self._prepare(feeds, dtype, params)
                self._learn_keys(feeds, params)
            with np.errstate(all="ignore"):  # inf and NaN are values here; NaNs are explained below
                outs = self._execute(env)
                nan = on_nan != "ignore" and self._has_nan(outs)
            if nan:
                self._nan_found(feeds, dtype, on_nan, params)
            return outs

    def _has_nan(self, outs: list[Any]) -> bool:
        """Whether an output holds a NaN: the generated check (``numpy_codegen.write_nan_check``:
        one ``x . x`` per float output), then, on a hit, element by element."""
        try:
            maybe = self._nan_check(outs)
        except Exception:   # an output not of its declared shape (a kernel's bug): look at each as it is
            maybe = True
        return maybe and any(nan_in(o) for o in outs)

    # -- the short feed path -----------------------------------------------------------------
    def _learn_keys(self, *groups: Mapping[Any, Any] | None) -> None:
        """Remember which slot each key of feed dicts that passed the full check fills.

        Keyed by the key object's identity (and holding on to it, so the id cannot be reused):
        a Tensor's or a name's node never changes, because graphs only grow. A key for a node
        these outputs do not need is remembered as -1 - its node id, so that the short path
        still sees when two keys name it.
        """
        if len(self._key_slots) > 1024:  # keys made afresh on every call: do not hoard them
            self._key_slots.clear()
        for group in groups:
            for key in group or ():
                (nid,) = resolve_feeds(self.graph, {key: None})
                s = self._slot_of(nid)
                shape, is_float = self._leaf_spec.get(s, ((), False))
                self._key_slots[id(key)] = (key, s if s >= 0 else -1 - nid, shape, is_float)

    def _quick_env(self, feeds: Mapping[Any, Any] | None, params: Mapping[Any, Any] | None,
                   dtype: Any) -> list[Any] | None:
        """The environment for feeds like ones already fully checked, or None to take the long way.

        "Like" means: every key seen before (the very same object), every value an ndarray
        of its leaf's declared shape, all float feeds in one precision (float32 or float64,
        and that of ``dtype`` if given), integer feeds holding integers, each leaf fed once.
        Anything else goes through :meth:`_prepare`, which converts or explains (a leaf fed
        twice, e.g. by its Tensor and its name, is its error).
        """
        key_slots = self._key_slots
        filled: list[tuple[int, np.ndarray]] = []
        unneeded: list[int] = []
        run_dtype = None
        for group in (feeds, params):
            if not group:
                continue
            for key, value in group.items():
                hit = key_slots.get(id(key))   # one lookup: the key, its slot and what its leaf expects
                if hit is None or hit[0] is not key:
                    return None
                _, slot, shape, is_float = hit
                if slot < 0:   # a node of the graph that these outputs do not need
                    if slot in unneeded:
                        return None
                    unneeded.append(slot)
                    continue
                if type(value) is not np.ndarray or value.shape != shape:
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
        if run_dtype is None or len(filled) != len(self._leaf_spec) or \
                (dtype is not None and np.dtype(dtype) != run_dtype):
            return None
        template = self._env_template.get(run_dtype)
        if template is None:
            template = [None] * len(self.node_ids)
            for slot, value in self._constants_for(run_dtype):
                template[slot] = value
            self._env_template[run_dtype] = template
        env = template.copy()
        for slot, value in filled:
            if env[slot] is not None:  # the same leaf fed twice (e.g. in feeds and params): the full check says so
                return None
            env[slot] = value
        return env

    def _execute(self, env: list[Any], watch: Callable[[Step, list[Any]], None] | None = None) -> list[Any]:
        """Run every step; return the outputs. With ``watch``: one step at a time, nothing overwritten.

        Callers run this under ``np.errstate(all="ignore")``.
        """
        if watch is None:
            try:
                return self._run_program(env)
            except (NumericsError, KernelError):
                raise  # already explained by the kernel
            except Exception as e:
                k = self._program.step_at(e.__traceback__)   # which line of the generated program raised
                if k is None:
                    raise
                raise self._kernel_error(self._live(self.steps)[k], e) from e
        step = None
        try:
            for step in self.steps:
                env[step.out] = step.kernel(*[env[a] for a in step.args])
                watch(step, env)
            return [env[s] for s in self._out_slots]
        except (NumericsError, KernelError, _Stop):
            raise  # already explained by the kernel (or the watcher's own signal)
        except Exception as e:
            if step is None:
                raise
            raise self._kernel_error(step, e) from e

    def _kernel_error(self, step: Step, error: BaseException) -> KernelError:
        node = step.node
        if isinstance(error, IdsOutOfRange):   # the error every backend gives for an id without a row
            return ids.ids_error(self.graph, node, next(i for i in node.inputs if self.graph.nodes[i].dtype == "int"),
                                 error)
        shapes = ", ".join(str(self.graph.nodes[i].shape) for i in node.inputs)
        return KernelError(
            f"{node.op} (node #{node.id} '{node.name}', inputs {shapes}) failed while running: {error}\n"
            f"  created at {created_at(node)}"
        )

    def _nan_found(self, feeds: Mapping[Any, Any] | None, dtype: Any, on_nan: str,
                   params: Mapping[Any, Any] | None = None) -> None:
        """Re-run step by step to find the first NaN, and explain it."""
        import warnings

        env, _ = self._prepare(feeds, dtype, params)
        slot = self.slot
        for node, s in zip(self.leaves, self._leaf_slots):
            arr = env[s]
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
                v = env[slot[i]]
                src = self.graph.nodes[i]
                if v.dtype.kind == "f" and v.size:
                    lines.append(f"    input #{i} {src.op} '{src.name}' {v.shape}: min {np.nanmin(v):.4g}, "
                                 f"max {np.nanmax(v):.4g}, NaN {int(np.isnan(v).sum())}")
            first = tuple(int(i) for i in np.argwhere(np.isnan(out))[0])
            hint = spec(node.op).tools.nan_hint or "check this op's inputs for values outside its domain"
            msg = (f"NaN first appears in {node.op} (node #{node.id} '{node.name}', {node.phase} pass), "
                   f"created at {created_at(node)}\n  {int(np.isnan(out).sum())} of {out.size} values are NaN, "
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
