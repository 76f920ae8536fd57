"""The wgpu backend: the same graph, run as WGSL compute shaders on a GPU (or on lavapipe).

``compile(graph, outputs)`` does everything that does not depend on the numbers:

1. **kernels**: the plain plan (``wgpu_plain``, ``optimize=False``) gives every compute
   node its own kernel, written from its op's record by ``wgpu_kernels`` (WGSL, uniform
   block, bindings). The optimised plan (the default) rewrites that kernel list with the
   ordered passes of ``wgpu_passes``: reshapes share their input's buffer, matmuls read
   transposed operands in place, batched weight gradients run as one GEMM, chains of
   elementwise ops run as one generated kernel (``wgpu_chain``)... ``plan.passes`` says
   what each pass did;
2. **pipelines**, cached per process by (op, dtype, variant) (``wgpu_device``); a kernel
   not compiled yet starts compiling on a worker thread as soon as step 1 knows it;
3. **memory plan**: one persistent device buffer per live value. Inputs, parameters,
   constants and requested outputs own their buffers; every other value borrows one
   from a pool and gives it back after its last reader — the same liveness analysis as
   the numpy backend's, but here it decides how much GPU memory a step needs;
4. **bind groups** and ONE uniform buffer holding every dispatch's parameters, written once.

Steps 1 and 3 (and the uniform words) depend only on the graph's structure: they end in
``wgpu_memory`` and are kept (``wgpu_plan_cache``): compiling a fresh graph of the same shape again — a re-run
notebook cell, a second Trainer — only creates this plan's buffers and bind groups.

``plan.run(feeds)`` is then short, and talks to the GPU as little as possible:

* feeds are uploaded with ``queue.write_buffer`` (float64 becomes float32, once warned;
  integer ids become int32);
* the whole run is recorded into ONE command encoder — one compute pass with every
  dispatch — and handed to the GPU with ONE ``submit``; the next run's commands are
  recorded while the GPU executes this one's, so Python's encoding time hides behind it;
* only the requested outputs are copied into one persistent staging buffer, which is
  mapped once: ONE host synchronisation per run. ``plan.stats`` counts all of this.

Parameters stay on the GPU between runs
---------------------------------------
A training step must not ship its weights to the GPU every time. Two ways:

* ``plan.run(feeds, params={w: W})``: an array that is the *same object* as last time and
  unchanged is not uploaded again. "Unchanged" is checked against a host copy (no GPU
  traffic, but a compare of the whole array); a frozen array — read-only and not a view of
  anything writable (``arr.setflags(write=False)`` on an array that owns its memory, see
  :func:`frozen`) — is trusted without the compare: freeze a batch or a parameter you reuse
  to make the check free. Either way a run computes with the numbers the array holds now,
  as numpy does.
* every other leaf must be fed on every run, as on numpy: a feed left out is a FeedError,
  never last run's value.
* ``plan.bind_updates({w: w_new})``: after every run, the value of output ``w_new`` is
  copied *on the GPU* into ``w``'s buffer (in the same submit). Feed ``w`` once; later
  runs may leave it out and use the device copy. ``plan.read_params()`` fetches them.

NaNs
----
With ``on_nan="raise"`` (the default) a NaN in an output is explained by re-running the
same feeds on the numpy backend in float32, which names the first node that produced a
NaN and why (the GPU run records no per-node values, on purpose: that would cost a sync
per node). If numpy finds none, the error says the NaN came from the GPU kernels alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import threading
import warnings
from typing import Any, Iterator, Mapping

import numpy as np

from ..graph import Graph, Node
from ..ops.registry import generation as ops_generation
from . import ids
from . import wgpu_plan_cache as plan_cache
from .common import FeedError, KernelError, NumericsError, feed_array, missing_feed_error, resolve_feeds
from .wgpu_batch import Launch, plan_launches
from .wgpu_gate import PER_WG as GATE_PER_WG
from .wgpu_gate import SLOTS as GATE_SLOTS
from .wgpu_gate import Gate, check_source, plan_gate
from .wgpu_device import Gpu, check_available, describe, family_source, gpu, map_for_reading, shaders_stamp  # noqa: F401
from .wgpu_kernels import WG_LINEAR, Dispatch, groups_for, index_bound_of
from .wgpu_matmul import tile_from_env
from .wgpu_memory import bind_entries as _bind_entries
from .wgpu_memory import nbytes as _nbytes
from .wgpu_passes import PassList, PassRecord, lower_optimised, select
from .wgpu_passes.in_place import in_place_rewrite
from .wgpu_plain import lower_plain
from .wgpu_plan_cache import signature

__all__ = ["NAME", "compile", "Plan", "check_available", "describe", "BindingLimitError", "GPU_LOCK", "frozen"]

NAME = "wgpu"
_warned_f64 = False

#: Held while a plan talks to the GPU (run, bind_updates, read_params). One plan's run writes its
#: feeds into its buffers, submits, and maps its staging buffer; a second thread doing the same on
#: the same plan at the same time would map a buffer that is still mapped (wgpu panics and takes the
#: process, and a Jupyter kernel, with it). The GPU runs one submit after the other anyway, so taking
#: turns costs nothing. Re-entrant: the NaN explanation of a run reads the parameters back.
GPU_LOCK = threading.RLock()


class BindingLimitError(ValueError):
    """A value is larger than the adapter lets one shader bind. Names the node."""


def warn_float64_again() -> None:
    """Let the next float64 feed warn again (the warning is shown once per process; a notebook or a test that
    wants to see it once more calls this)."""
    global _warned_f64
    _warned_f64 = False


def _float64_warning() -> None:
    global _warned_f64
    if not _warned_f64:
        _warned_f64 = True
        warnings.warn(
            "the wgpu backend computes in float32: float64 feeds are converted (results are float32). "
            "For float64 (e.g. gradient checks) use backend='numpy'. (This warning is shown once.)",
            UserWarning, stacklevel=4,
        )


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes} bytes"




class Plan:
    """A compiled run of some outputs of a graph on the GPU. See the module docstring."""

    backend = NAME

    def __init__(self, graph: Graph, outputs: list[int], max_binding: int | None = None,
                 optimize: bool = True, passes: Any = None) -> None:
        self.gpu: Gpu = gpu()
        wgpu = self.gpu.wgpu
        dev = self.gpu.device
        self.graph = graph
        self.outputs = list(outputs)
        self.optimize = bool(optimize)   # False: the plain plan, one kernel per compute node (wgpu_plain)
        names = select(passes) if self.optimize else ()   # the passes that run (wgpu_passes; default: all)
        self.node_ids = graph.ancestors(self.outputs)

        # 1-3 (rewrites, lowering, memory plan, uniform words): pure work, reused for a graph of the same
        # structure (wgpu_plan_cache: a second Trainer on a fresh model of the same sizes only rebinds)
        tile = tile_from_env()
        structure, specs = signature(graph, self.node_ids, self.outputs)
        key = (ops_generation(), shaders_stamp(), tile, self.gpu.max_storage_buffers, self.gpu.uniform_align,
               self.optimize, names, structure)
        if self.optimize:
            def build() -> plan_cache.Lowered:
                return lower_optimised(graph, self.outputs, self.node_ids, tile, self.gpu.max_storage_buffers,
                                       self.gpu.uniform_align, self.gpu.prefetch, names)
        else:
            def build() -> plan_cache.Lowered:
                return lower_plain(graph, self.outputs, self.node_ids, tile, self.gpu.uniform_align,
                                   self.gpu.prefetch)
        self._lowered = low = plan_cache.lookup(key, build, keep=specs)
        _check_binding_limit(graph, self.node_ids, low, int(max_binding or self.gpu.max_binding))
        nodes = graph.nodes
        self.leaves = [nodes[i] for i in low.leaves]
        self.constants = [nodes[i] for i in low.constants]
        self.fusion = low.fusion
        self._fixed, self._failing = low.fixed, low.failing
        self.dispatches: list[Dispatch] = [_rebound(d, graph) for d in low.dispatches]
        self._chain_at = low.chain_at        # chain root -> the index of its dispatch
        self._node_sources = dict(low.node_sources)
        self._indexing = [nodes[i] for i in low.indexing]
        self._id_bounds: list | None = None
        self._leaf_ids = frozenset(n.id for n in self.leaves)
        self._fixed_written = False   # constants and the values of empty inputs: written at the first run
        self._read_end: int | None = None   # bytes of the staging buffer a run maps (outputs read back)
        self._read_back: list | None = None   # (output index, node, staging offset) of those outputs
        self.bytes_owned, self.bytes_pooled = low.bytes_owned, low.bytes_pooled
        self._scratch_bytes = low.scratch_bytes

        # the device side: this plan's own buffers (one per memory-plan slot), uniforms, pipelines, bind groups
        usage = wgpu.BufferUsage
        storage = usage.STORAGE | usage.COPY_DST | usage.COPY_SRC
        slots = [dev.create_buffer(size=size, usage=storage) for size in low.slot_sizes]
        self.buffers: dict[int, Any] = {nid: slots[s] for nid, s in low.slot_of.items()}
        self.uniforms = dev.create_buffer(size=low.params.nbytes, usage=usage.UNIFORM | usage.COPY_DST)
        dev.queue.write_buffer(self.uniforms, 0, low.params)
        self._encoded: list[tuple[Any, Any, tuple[int, int, int]]] = []
        for k, (d, entries) in enumerate(zip(self.dispatches, low.binds)):
            pipe = self.gpu.pipeline(d.key, d.source, d.entry)
            self._encoded.append((pipe, self._bind_group(pipe, k, entries), d.groups))
        self._out_offsets = low.out_offsets   # staging: every requested output at its own offset
        self.staging = dev.create_buffer(size=low.staging_size, usage=usage.MAP_READ | usage.COPY_DST)

        self._uploaded: dict[int, tuple[Any, np.ndarray | None]] = {}   # node id -> (object, host copy)
        self._on_device: set[int] = set()
        self._updates: list[tuple[int, int]] = []
        self._in_place: set[tuple[int, int]] = set()   # (new, old) pairs a kernel writes straight into old
        self._replaced: dict[int, tuple[Dispatch, Any, dict[int, tuple[str, ...]]]] = {}   # what bind_updates rewrote
        self._device_only: set[int] = set()
        self._held: set[int] = set()   # leaves whose device copy bind_updates keeps current (need no feed)
        self._recorded: Any = None   # the next run's command buffer, recorded while the GPU ran the last one
        # what is recorded: the dispatches, neighbouring chains of one kernel batched (wgpu_batch); built at the
        # first run, and again after bind_updates rewrites chains
        self._launches: list[Launch] | None = None
        # (pipeline, bind group, workgroups, offset in the gate's argument buffer when dispatched from it)
        self._launched: list[tuple[Any, Any, tuple[int, int, int], int | None]] = []
        self.gate: Gate | None = None   # with bind_updates: the device-side check before the updates (wgpu_gate)
        self._gate_buffers: dict[str, Any] = {}
        self._flag_at: int | None = None   # where the gate's flag lands in the staging buffer
        self._gate_launches = 0            # the launches the gate adds (checks, its arguments, copies)
        self.stats: dict[str, int] = {}
        self.totals = {"runs": 0, "submits": 0, "host_syncs": 0, "uploads": 0, "upload_bytes": 0}

    def _bind_group(self, pipe: Any, k: int, entries: list[tuple[int, int, int]], blocks: int = 1,
                    uniforms: Any = None) -> Any:
        """Dispatch ``k``'s bind group: its uniform block (a batch: ``blocks`` blocks from row k of
        ``uniforms``), then each (binding, buffer owner, bytes)."""
        buffers = self.buffers
        block = 256 if blocks == 1 else blocks * self.gpu.uniform_align
        return self.gpu.device.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
            {"binding": 0, "resource": {"buffer": uniforms or self.uniforms, "offset": k * self.gpu.uniform_align,
                                        "size": block}},
            *({"binding": b, "resource": {"buffer": buffers[nid], "offset": 0, "size": size}}
              for b, nid, size in entries)])

    def _plan_launches(self) -> list[Launch]:
        """Batch chains of one kernel and split sums' last stages (wgpu_batch); their kernels start compiling
        now. Pure work on the lowered plan: kept with it, per set of bind_updates pairs."""
        low, g = self._lowered, self.gpu
        key = (tuple(self._updates), g.batch_storage_buffers, g.uniform_align, g.max_uniform_binding)
        launches = low.launches.get(key)
        if launches is None and not self.optimize:   # the plain plan: one launch per dispatch
            launches = low.launches[key] = [Launch((k,), d) for k, d in enumerate(self.dispatches)]
        if launches is None:
            slot_of = low.slot_of
            launches = low.launches[key] = plan_launches(self.dispatches, lambda nid: slot_of.get(nid, nid), *key[1:])
        for la in launches:
            if la.count > 1:
                self.gpu.prefetch(la.dispatch.key, la.dispatch.source, la.dispatch.entry)
        return launches

    def _launch_commands(self) -> list[tuple[Any, Any, tuple[int, int, int], int | None]]:
        """(pipeline, bind group, workgroups) of every launch, built once per set of launches.

        A batch's uniform blocks are its members' blocks, copied one after the other into
        ``self._batch_uniforms`` (its members need not be neighbours in ``self.dispatches``).
        """
        if self._launches is None:
            self._launches = self._plan_launches()
            self._launched = []
        if not self._launched:
            batches = [la for la in self.launches if la.count > 1]
            words = self.gpu.uniform_align // 4
            rows = np.zeros((max(1, sum(la.count for la in batches)), words), dtype=np.uint32)
            start, row = {}, 0
            for la in batches:
                start[la.members] = row
                for k in la.members:
                    rows[row, :64] = self.dispatches[k].params
                    row += 1
            self._batch_uniforms = self.gpu.device.create_buffer(
                size=rows.nbytes, usage=self.gpu.wgpu.BufferUsage.UNIFORM | self.gpu.wgpu.BufferUsage.COPY_DST)
            self.gpu.device.queue.write_buffer(self._batch_uniforms, 0, rows)
            for la in self.launches:
                if la.count == 1:
                    self._launched.append((*self._encoded[la.members[0]], None))
                    continue
                d = la.dispatch
                pipe = self.gpu.pipeline(d.key, d.source, d.entry)
                entries = _bind_entries(self.graph, d, self._scratch_bytes)
                self._launched.append((pipe, self._bind_group(pipe, start[la.members], entries, blocks=la.count,
                                                              uniforms=self._batch_uniforms), d.groups, None))
            self._add_gate()
        return self._launched

    def _add_gate(self) -> None:
        """With bind_updates: check the gradients and the loss on the device before the first update kernel,
        and dispatch the updates from arguments that are zero when something was not finite (wgpu_gate)."""
        self.gate = gate = plan_gate(
            self.graph, self.dispatches, [la.members for la in self.launches], self._updates, self._in_place,
            self.outputs, self._device_only,
            lambda d, nid: next(b for _, n, b in _bind_entries(self.graph, d, self._scratch_bytes) if n == nid))
        if gate is None:
            self._flag_at, self._gate_launches = None, 0
            return
        dev, wgpu = self.gpu.device, self.gpu.wgpu
        usage = wgpu.BufferUsage
        align = self.gpu.uniform_align
        checks = [gate.checked[i:i + GATE_SLOTS] for i in range(0, len(gate.checked), GATE_SLOTS)]
        blocks = np.zeros((len(checks) + 1 + len(gate.copies), align // 4), dtype=np.uint32)
        flag = dev.create_buffer(size=16, usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)
        uniforms = dev.create_buffer(size=blocks.nbytes, usage=usage.UNIFORM | usage.COPY_DST)
        gated_groups = [self._launched[i][2] for i in gate.gated]
        copy_groups = [groups_for(-(-_nbytes(self.graph.nodes[old]) // (4 * WG_LINEAR))) for _, old in gate.copies]
        words = np.array([g for groups in gated_groups + copy_groups for g in groups], dtype=np.uint32)
        groups = dev.create_buffer(size=max(16, words.nbytes), usage=usage.STORAGE | usage.COPY_DST)
        dev.queue.write_buffer(groups, 0, words)
        args = dev.create_buffer(size=max(16, words.nbytes), usage=usage.STORAGE | usage.INDIRECT)

        def group(pipe: Any, row: int, buffers: list[tuple[Any, int]]) -> Any:
            return dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
                {"binding": 0, "resource": {"buffer": uniforms, "offset": row * align, "size": 256}},
                *({"binding": b, "resource": {"buffer": buf, "offset": 0, "size": size}}
                  for b, (buf, size) in enumerate(buffers, start=1))])

        before: list[tuple[Any, Any, tuple[int, int, int], int | None]] = []
        for row, slots in enumerate(checks):   # 1. look at every gradient and the loss
            pipe = self.gpu.pipeline(("finite_check", len(slots)), check_source(len(slots)), "finite_check")
            for s, (nid, nbytes) in enumerate(slots):
                blocks[row, 4 * s] = nbytes // 4
            before.append((pipe, group(pipe, row, [(flag, 16), *((self.buffers[n], b) for n, b in slots)]),
                           groups_for(sum(-(-(b // 4) // GATE_PER_WG) for _, b in slots)),
                           None))
        row = len(checks)   # 2. the updates' workgroups, or none
        blocks[row, 0] = words.size
        pipe = self.gpu.pipeline(("gate_args",), family_source("gate"), "gate_args")
        before.append((pipe, group(pipe, row, [(flag, 16), (groups, max(16, words.nbytes)),
                                                (args, max(16, words.nbytes))]),
                       (-(-max(1, words.size) // 64), 1, 1), None))
        launched = list(self._launched)
        for k, i in enumerate(gate.gated):
            pipe_i, bg_i, groups_i, _ = launched[i]
            launched[i] = (pipe_i, bg_i, groups_i, 12 * k)
        copy_pipe = self.gpu.pipeline(("copy_words",), family_source("gate_copy"), "copy_words") if gate.copies \
            else None
        after = []
        for k, (new, old) in enumerate(gate.copies):   # 3. updates not written in place: copied, or not
            nbytes = _nbytes(self.graph.nodes[old])
            blocks[row + 1 + k, 0] = nbytes // 4
            after.append((copy_pipe, group(copy_pipe, row + 1 + k, [(self.buffers[old], nbytes),
                                                                      (self.buffers[new], nbytes)]),
                          copy_groups[k], 12 * (len(gate.gated) + k)))
        dev.queue.write_buffer(uniforms, 0, blocks)
        self._launched = launched[:gate.at] + before + launched[gate.at:] + after
        self._gate_launches = len(before) + len(after)
        self._gate_buffers = {"flag": flag, "args": args, "groups": groups, "uniforms": uniforms}
        # the flag is read back with the outputs: a staging buffer 16 bytes longer
        end = self._lowered.staging_size
        self._flag_at = -(-end // 16) * 16
        self.staging = dev.create_buffer(size=self._flag_at + 16, usage=usage.MAP_READ | usage.COPY_DST)
        self._read_end = None

    # -- introspection ------------------------------------------------------------------
    def shader_for(self, node: Any) -> str:
        """The WGSL source that computes ``node`` (a Tensor, Node or node id)."""
        nid = getattr(node, "node_id", getattr(node, "id", node))
        if nid not in self._node_sources:
            n = self.graph.nodes[nid]
            raise KeyError(f"node #{nid} ({n.op}) runs no kernel in this plan (leaves and empty tensors have none)")
        root = self.fusion.chain_of.get(nid, nid) if self.fusion is not None else nid
        for la in self.launches:
            roots = [self.dispatches[k].node.id for k in la.members]
            if la.count > 1 and root in roots:
                others = ", ".join(f"#{r}" for r in roots if r != root)
                if la.dispatch.entry == "sum_batch":
                    note = (f"// launched in a batch: the last stage of this sum (adding up its partial sums) runs in "
                            f"ONE dispatch with those of {la.count - 1} other sums (nodes {others}), where the "
                            f"last of them was (shaders/sum_batch.wgsl, asgteach/backends/wgpu_batch.py)\n")
                else:
                    note = (f"// launched in a batch: ONE dispatch runs this kernel's code for {la.count} chains of "
                            f"the same structure (this one and those of nodes {others}), each as a slot with its "
                            f"own buffers (shaders/fused_batch.wgsl, asgteach/backends/wgpu_batch.py)\n")
                return note + "".join(self._node_sources[nid])
        return "".join(self._node_sources[nid])

    @property
    def launches(self) -> list[Launch]:
        """What a run records (``wgpu_batch``): the dispatches, chains of the same code batched into one launch
        (planned at the first run or on first use, and again after ``bind_updates``)."""
        if self._launches is None:
            self._launches = self._plan_launches()
        return self._launches

    @property
    def in_place(self) -> frozenset[tuple[int, int]]:
        """The (new, old) pairs of ``bind_updates`` that a fused kernel writes straight into old's buffer
        (no copy after the run; see ``wgpu_passes/in_place.py``)."""
        return frozenset(self._in_place)

    @property
    def pipelines(self) -> list[Any]:
        """The compiled pipeline of each dispatch, in ``self.dispatches`` order (from the process-wide cache)."""
        return [e[0] for e in self._encoded]

    @property
    def lowered(self) -> plan_cache.Lowered:
        """Everything this plan decided before touching the device (kernels, memory plan, uniform words, the
        passes' record): shared by plans of graphs with the same structure (``wgpu_plan_cache``)."""
        return self._lowered

    @property
    def passes(self) -> PassList:
        """What each optimisation pass did to this plan (``wgpu_passes``), printed as a table: the pass, the
        kernels (or dispatches) before and after it, what it rewrote. Empty for the plain plan. Once the plan
        has run (or bind_updates has), the last line is ``batch``: launches of the same code batched (wgpu_batch)."""
        records = PassList(self._lowered.passes)
        if self.optimize and self._launches is not None:
            batched = sum(la.count for la in self.launches if la.count > 1)
            records.append(PassRecord("batch", len(self.dispatches), len(self.launches),
                                      f"{batched} dispatches of the same code run as "
                                      f"{sum(1 for la in self.launches if la.count > 1)} batched launch(es)",
                                      "launches"))
        return records

    def __repr__(self) -> str:
        plain = "" if self.optimize else "plain, "
        return (f"<wgpu Plan: {plain}{len(self.dispatches)} dispatches, {len(self.leaves)} fed leaves, "
                f"{(self.bytes_owned + self.bytes_pooled) / 2**20:.2f} MiB of buffers, outputs {self.outputs}>")

    # -- parameters on the device -----------------------------------------------------------
    def bind_updates(self, updates: Mapping[Any, Any]) -> None:
        """After each run, copy output ``new`` into parameter ``old``'s buffer on the GPU.

        ``updates`` maps a parameter (Tensor, name or id) to an output of this plan (Tensor
        or id) of the same shape — typically the optimizer's new value. Feed the parameter
        once; afterwards the device copy is used and updated without any upload.
        Those outputs are no longer read back: ``run`` returns ``None`` in their place
        (``read_params()`` fetches the parameters when you want them).
        """
        with GPU_LOCK, _collector_paused():
            self._bind_updates(updates)

    def _bind_updates(self, updates: Mapping[Any, Any]) -> None:
        resolved = resolve_feeds(self.graph, {k: v for k, v in updates.items()})
        pairs = []
        outputs = set(self.outputs)
        for pid, new in resolved.items():
            nid = getattr(new, "node_id", new)
            if nid not in outputs:
                raise ValueError(f"bind_updates: node #{nid} is not an output of this plan (outputs: {self.outputs})")
            p, q = self.graph.nodes[pid], self.graph.nodes[nid]
            if p.shape != q.shape or p.op not in ("input", "parameter"):
                raise ValueError(f"bind_updates: {q.describe()} cannot update {p.describe()}")
            pairs.append((nid, pid))
        self._updates = pairs
        self._device_only = {nid for nid, _ in pairs}
        self._held = {pid for _, pid in pairs}
        self._read_end = self._read_back = None
        self._in_place = self._update_in_place(pairs)
        self._recorded = None   # recorded with the old copies
        self._launches = self._plan_launches()   # the chains changed: batch them again
        self._launched = []
        self._launch_commands()   # (their pipelines and bind groups now, not in the first run: a Trainer's
        #                           compile is then all of it)

    def _update_in_place(self, pairs: list[tuple[int, int]]) -> set[tuple[int, int]]:
        """Let fused kernels write new values straight into the parameters they update.

        An optimizer's update ``p_new = p - lr * ...`` is (with ``m`` and ``v``) one fused
        kernel that reads ``p`` at each thread's own index. When no later kernel reads ``p``
        and nothing else reads ``p_new``, that kernel may write ``p_new`` into ``p``'s buffer:
        no copy after the run, one buffer less in flight. Returns the pairs done so.
        (Which kernels change, and their new WGSL, is pure work: kept with the lowered plan.)
        """
        for k, (d, enc, sources) in self._replaced.items():   # undo an earlier bind_updates
            self.dispatches[k], self._encoded[k] = d, enc
            self._node_sources.update(sources)
        self._replaced = {}
        low = self._lowered
        rewrite = low.updates.get(tuple(pairs))
        if rewrite is None:
            plan_cache.stats["update_misses"] += 1
            rewrite = low.updates[tuple(pairs)] = (in_place_rewrite(self.graph, low, self.outputs, pairs)
                                                   if self.optimize else (frozenset(), []))
        else:
            plan_cache.stats["update_hits"] += 1
        done, changed = rewrite
        for _, d, _, _ in changed:   # (their kernels compile on worker threads meanwhile)
            self.gpu.prefetch(d.key, d.source, d.entry)
        for k, d, entries, sources in changed:
            d = _rebound(d, self.graph)
            pipe = self.gpu.pipeline(d.key, d.source, d.entry)
            self._replaced[k] = (self.dispatches[k], self._encoded[k], {m: self._node_sources[m] for m in sources})
            self.dispatches[k] = d
            self._encoded[k] = (pipe, self._bind_group(pipe, k, entries), d.groups)
            self._node_sources.update(sources)
        return set(done)

    def read_params(self) -> dict[str, np.ndarray]:
        """The current device values of every input/parameter this plan holds (one sync)."""
        with GPU_LOCK:
            return self._read_params()

    def _read_params(self) -> dict[str, np.ndarray]:
        dev = self.gpu.device
        held = [n for n in self.leaves if n.id in self._on_device]
        size = sum(_nbytes(n) for n in held)
        staging = dev.create_buffer(size=max(size, 16), usage=self.gpu.wgpu.BufferUsage.MAP_READ
                                    | self.gpu.wgpu.BufferUsage.COPY_DST)
        enc = dev.create_command_encoder()
        off = 0
        for n in held:
            enc.copy_buffer_to_buffer(self.buffers[n.id], 0, staging, off, _nbytes(n))
            off += _nbytes(n)
        dev.queue.submit([enc.finish()])
        staging.map_sync(self.gpu.wgpu.MapMode.READ)
        raw = np.frombuffer(staging.read_mapped(), dtype=np.uint8).copy()
        staging.unmap()
        out, off = {}, 0
        for n in held:
            out[n.name] = raw[off:off + n.size * 4].view(np.int32 if n.dtype == "int" else np.float32).reshape(n.shape)
            off += _nbytes(n)
        return out

    # -- running -----------------------------------------------------------------------------
    def _record(self) -> Any:
        """One run's commands: every dispatch in one compute pass, then the output and update copies.

        They never change between runs (the buffers, bind groups and uniforms are fixed at
        compile time; new feeds are written into the same buffers), so ``run`` records the
        next run's command buffer right after submitting the current one, while the GPU is
        busy. ``bind_updates`` changes the copies, so it drops a recorded buffer.
        """
        enc = self.gpu.device.create_command_encoder()
        launched = self._launch_commands()
        if self.gate is not None:
            enc.clear_buffer(self._gate_buffers["flag"])
        args = self._gate_buffers.get("args")
        cpass = enc.begin_compute_pass()
        last = None
        for pipe, bg, (x, y, z), indirect in launched:
            if pipe is not last:
                cpass.set_pipeline(pipe)
                last = pipe
            cpass.set_bind_group(0, bg)
            if indirect is None:
                cpass.dispatch_workgroups(x, y, z)
            else:   # an update: as many workgroups as the gate wrote (none after a NaN)
                cpass.dispatch_workgroups_indirect(args, indirect)
        cpass.end()
        for nid, off in zip(self.outputs, self._out_offsets):
            if nid not in self._device_only:
                enc.copy_buffer_to_buffer(self.buffers[nid], 0, self.staging, off, _nbytes(self.graph.nodes[nid]))
        if self.gate is not None:
            enc.copy_buffer_to_buffer(self._gate_buffers["flag"], 0, self.staging, self._flag_at, 4)
        for src, dst in self._updates:
            if (src, dst) in self._in_place or self.gate is not None:   # a kernel wrote (or copied) it already
                continue
            enc.copy_buffer_to_buffer(self.buffers[src], 0, self.buffers[dst], 0, _nbytes(self.graph.nodes[dst]))
        return enc.finish()

    def _host_array(self, node: Node, value: Any) -> np.ndarray:
        """The bytes to upload for a feed: checked as the numpy backend checks it, then f32 / i32."""
        arr = feed_array(node, value)   # shape and element type, with the same messages as numpy's
        if node.dtype == "float":
            if arr.dtype != np.float32:
                _float64_warning()
            return np.ascontiguousarray(arr, dtype=np.float32)
        if arr.size and (arr.min() < -2**31 or arr.max() >= 2**31):
            raise FeedError(f"feed for {node.op} '{node.name}' holds ids outside int32, which the GPU uses")
        return np.ascontiguousarray(arr, dtype=np.int32)

    def _check_ids(self, given: dict[int, Any]) -> None:
        """Row ids out of range are an error, as on numpy; a GPU kernel cannot raise, so check before running.

        The ops that read ids say how many rows there are (``OpSpec.gpu.index_bound``). The ids they
        read are fed, constant, or computed from those by integer ops only (``targets.reshape(-1)``,
        a slice, a concat): the last are computed here too, on the host, by a small numpy plan of
        their own (ids are small). Ids computed from floats (``argmax``) cannot be known before the
        run; they index within their own axis, and a GPU kernel clamps an index into range.
        """
        if self._id_bounds is None:   # (the bounds, and the host plans, depend on the structure only)
            from . import numpy_backend

            nodes = self.graph.nodes
            self._id_bounds = []
            for n in self._indexing:
                bound = index_bound_of(n.op)(tuple(nodes[i].shape for i in n.inputs), **n.attrs)
                for i in n.inputs:
                    if nodes[i].dtype != "int" or not ids.host_ids(self.graph, i):
                        continue
                    leaf = nodes[i].op in ("input", "parameter", "constant")
                    self._id_bounds.append((n, bound, i, None if leaf else numpy_backend.compile(self.graph, [i])))
        for n, bound, i, host in self._id_bounds:
            if host is None:
                val = given.get(i, self.graph.constants.get(i))
            else:
                val = host.run({s.id: given[s.id] for s in host.leaves if s.id in given}, on_nan="ignore")[0]
            if val is not None and np.size(val):
                ids.check(self.graph, n, i, val, bound)

    def _upload(self, given: dict[int, Any], stats: dict[str, int]) -> None:
        queue = self.gpu.device.queue
        if not self._fixed_written:
            self._upload_fixed(stats)
        # Every leaf is fed on every run, as on numpy; the one exception is a leaf that bind_updates keeps
        # on the device (a parameter, an optimizer's moment): its value is the one the last run wrote there.
        missing = self._leaf_ids - given.keys() - (self._held & self._on_device)
        if missing:
            raise missing_feed_error(self.graph, next(n for n in self.leaves if n.id in missing), self.outputs)
        for nid in given.keys() & self._leaf_ids:
            node, value = self.graph.nodes[nid], given[nid]
            prev = self._uploaded.get(nid)
            if prev is not None and prev[0] is value and nid in self._on_device:
                host = prev[1]
                if host is None or np.array_equal(host, value):
                    continue   # same object, unchanged: the device copy is current
            arr = self._host_array(node, value)
            if arr.nbytes:
                queue.write_buffer(self.buffers[nid], 0, arr)
            self._uploaded[nid] = (value, None if frozen(value) else np.array(value, copy=True))
            self._on_device.add(nid)
            stats["uploads"] += 1
            stats["upload_bytes"] += arr.nbytes
        # a parameter updated on the device no longer matches the host array it came from
        for _, pid in self._updates:
            self._uploaded.pop(pid, None)

    def _upload_fixed(self, stats: dict[str, int]) -> None:
        """Constants and the values of empty inputs: written once, at the first run."""
        queue = self.gpu.device.queue
        for nid, arr in self._fixed.items():   # values of empty inputs: written once, like constants
            if nid not in self._on_device:
                queue.write_buffer(self.buffers[nid], 0, arr)
                self._on_device.add(nid)
                stats["uploads"] += 1
                stats["upload_bytes"] += arr.nbytes
        for node in self.constants:
            if node.id not in self._on_device:
                arr = self._host_array(node, self.graph.constants[node.id]) if node.dtype == "int" else \
                    np.ascontiguousarray(self.graph.constants[node.id], dtype=np.float32)
                if arr.nbytes:   # (an empty value has no bytes to write: wgpu refuses a 0-byte write)
                    queue.write_buffer(self.buffers[node.id], 0, arr)
                self._on_device.add(node.id)
                stats["uploads"] += 1
                stats["upload_bytes"] += arr.nbytes
        self._fixed_written = True

    def run(
        self,
        feeds: Mapping[Any, Any] | None = None,
        params: Mapping[Any, Any] | None = None,
        dtype: Any = None,
        on_nan: str = "raise",
    ) -> list[np.ndarray]:
        """Compute the outputs (float32; ids as int64). See the module docstring for ``params``.

        Safe to call from several threads: runs on this process's GPU take turns (:data:`GPU_LOCK`).
        """
        with GPU_LOCK:
            return self._run(feeds, params, dtype, on_nan)

    def _run(self, feeds: Mapping[Any, Any] | None, params: Mapping[Any, Any] | None, dtype: Any,
             on_nan: str) -> list[np.ndarray]:
        if dtype is not None and np.dtype(dtype) != np.float32:
            _float64_warning()
        all_feeds = {**(feeds or {}), **(params or {})}
        given = resolve_feeds(self.graph, feeds, params)   # (apart: a leaf in both is an error)
        self._check_ids(given)
        stats = {"submits": 0, "host_syncs": 0, "uploads": 0, "upload_bytes": 0,
                 "dispatches": len(self._launch_commands()), "gate_dispatches": self._gate_launches}
        self._upload(given, stats)
        for nid, error in self._failing.items():   # numpy raises here too: say so instead of inventing a value
            n = self.graph.nodes[nid]
            shapes = ", ".join(str(self.graph.nodes[i].shape) for i in n.inputs)
            raise KernelError(f"{n.op} (node #{n.id} '{n.name}', inputs {shapes}) failed while running: {error}\n"
                              f"  created at {n.source}")

        dev = self.gpu.device
        commands = self._recorded if self._recorded is not None else self._record()
        dev.queue.submit([commands])   # uploads written above reach the GPU before it: queue order
        stats["submits"] += 1
        # while the GPU works, record the NEXT run's commands (the same every run): Python's
        # encoding time then overlaps GPU time instead of adding to it
        self._recorded = self._record()
        # map only the part of the staging buffer that holds outputs we read back
        if self._read_end is None:
            self._read_end = max([off + _nbytes(self.graph.nodes[nid]) for nid, off in zip(self.outputs,
                                  self._out_offsets) if nid not in self._device_only] or [16])
            if self._flag_at is not None:
                self._read_end = max(self._read_end, self._flag_at + 8)
        end = self._read_end
        map_for_reading(self.staging, end)   # waits for the GPU: the one host sync
        stats["host_syncs"] += 1
        # Each output is copied out of the mapped memory into an array of its own (the caller's:
        # writable, sharing memory with nothing else, not even with another output of this run),
        # before unmap() takes that memory back.
        raw = np.frombuffer(self.staging.read_mapped(0, end, copy=False), dtype=np.uint8)
        try:
            outs = self._copy_outputs(raw)
            skipped = self._flag_at is not None and bool(raw[self._flag_at:self._flag_at + 4].view(np.uint32)[0])
        finally:
            del raw   # no view of the mapped memory may outlive the mapping
            self.staging.unmap()
        self.stats = stats
        self.totals["runs"] += 1
        for k in ("submits", "host_syncs", "uploads", "upload_bytes"):
            self.totals[k] += stats[k]
        stats["updates_skipped"] = int(skipped)
        if skipped and on_nan != "ignore":
            self._explain_skip(all_feeds, on_nan)
        elif on_nan != "ignore" and any(n.dtype == "float" and np.isnan(outs[k]).any() for k, n, _ in self._read_back):
            self._explain_nan(all_feeds, on_nan)
        return outs

    def _explain_skip(self, feeds: Mapping[Any, Any], on_nan: str) -> None:
        """The gate kept the updates from running: say which node made the first NaN or infinity."""
        note = ("\n  this run's updates were not applied: the parameters and optimizer state on the GPU are as "
                "they were before it (the check before the update kernels found a value that is not finite)")
        try:
            self._explain_nan(feeds, on_nan)   # a NaN in what is read back: numpy's search names its node
        except NumericsError as e:
            raise NumericsError(f"{e}{note}") from None
        from . import numpy_backend
        from .nonfinite import first_nonfinite

        ref = numpy_backend.Plan(self.graph, self.outputs)
        given = resolve_feeds(self.graph, feeds)
        if any(n.id not in given for n in ref.leaves):
            held = self.read_params()
            feeds = {**{n.id: held[n.name] for n in ref.leaves if n.id not in given}, **given}
        found = first_nonfinite(self.graph, [n for n, _ in self.gate.checked], feeds, np.float32)
        msg = (found or "a value the updates read was not finite on the GPU, but numpy (float32) computes only "
               "finite values from the same feeds: a GPU kernel differs from numpy here; please report it") + note
        if on_nan == "raise":
            raise NumericsError(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)

    def _copy_outputs(self, raw: np.ndarray) -> list[np.ndarray | None]:
        """Each requested output, copied out of the staging bytes (``None`` for device-only ones)."""
        if self._read_back is None:   # (k, node, staging offset) of the outputs a run reads back
            self._read_back = [(k, self.graph.nodes[nid], off) for k, (nid, off)
                               in enumerate(zip(self.outputs, self._out_offsets)) if nid not in self._device_only]
        outs: list[np.ndarray | None] = [None] * len(self.outputs)
        for k, n, off in self._read_back:
            v = raw[off:off + n.size * 4]
            outs[k] = (v.view(np.int32).astype(np.int64).reshape(n.shape) if n.dtype == "int"
                       else v.view(np.float32).reshape(n.shape).copy())
        return outs

    def _explain_nan(self, feeds: Mapping[Any, Any], on_nan: str) -> None:
        """Find the first NaN-producing node by re-running on numpy in float32."""
        from . import numpy_backend

        ref = numpy_backend.Plan(self.graph, self.outputs)
        given = resolve_feeds(self.graph, feeds)
        if any(n.id not in given for n in ref.leaves):   # device-held params: fetch their values
            held = self.read_params()
            feeds = {**{n.id: held[n.name] for n in ref.leaves if n.id not in given}, **given}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                ref._nan_found(feeds, np.float32, on_nan)
            except NumericsError as e:
                raise NumericsError(f"{e}\n  (found by re-running this graph on the numpy backend in float32: "
                                    "the GPU run keeps no per-node values)") from None
        if caught:
            for w in caught:
                warnings.warn(str(w.message), RuntimeWarning, stacklevel=3)
            return
        msg = ("a NaN appeared in the wgpu backend's outputs, but the numpy backend (float32) computes none "
               "from the same feeds: a GPU kernel differs from numpy here. Please report it with the graph.")
        if on_nan == "raise":
            raise NumericsError(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=3)


def frozen(value: Any) -> bool:
    """Whether the memory of ``value`` can never change, so a device copy of it stays current.

    ``arr.setflags(write=False)`` alone does not say so: a read-only *view* of a writable array
    changes whenever that array does (``v = a[:]; v.flags.writeable = False; a += 1``), and
    numpy, which reads the array at every run, would then compute with the new numbers. So an
    array counts as frozen only when it and every array it is a view of are read-only, down to
    one that owns its memory (or to an immutable ``bytes`` object). Anything else is compared
    with a host copy of what was uploaded, before each run.
    """
    while isinstance(value, np.ndarray):
        if value.flags.writeable:
            return False
        if value.base is None:
            return True
        value = value.base
    return isinstance(value, bytes)


def _check_binding_limit(graph: Graph, node_ids: list[int], low: plan_cache.Lowered, limit: int) -> None:
    """A BindingLimitError naming the first value, in graph order, whose buffer the plan would create larger
    than ``limit`` bytes (what one shader may bind).

    Checked on the buffers of the memory plan, after the passes: a value that no kernel writes (the
    (T, T) scores of an attention whose fused kernels never store them) takes no buffer, so a graph
    whose nodes hold more than the limit may still run. A fused kernel's scratch buffer (the rows'
    statistics of attention) is named by the node that runs it."""
    for i in node_ids:
        n = graph.nodes[i]
        if i in low.slot_of and n.size * 4 > limit:
            raise BindingLimitError(
                f"{n.op} (node #{n.id} '{n.name}', shape {n.shape}) needs {_size(n.size * 4)}, but this "
                f"GPU adapter binds at most {_size(limit)} per buffer (created at {n.source}).\n"
                f"  what to do: use smaller batches or layers, or run this graph with backend='numpy'"
            )
    for d in low.dispatches:
        for size in (d.scratch or {}).values():
            if size > limit:
                n = d.node
                raise BindingLimitError(
                    f"{n.op} (node #{n.id} '{n.name}', shape {n.shape}) runs a kernel ({d.entry}) whose scratch "
                    f"buffer needs {_size(size)}, but this GPU adapter binds at most {_size(limit)} per buffer "
                    f"(created at {n.source}).\n"
                    f"  what to do: use smaller batches or layers, or run this graph with backend='numpy'"
                )


def _rebound(d: Dispatch, graph: Graph) -> Dispatch:
    """``d`` naming ``graph``'s own node (a lowered plan reused from an identically shaped graph names the other's)."""
    node = graph.nodes[d.node.id]
    return d if d.node is node else dataclasses.replace(d, node=node)


def compile(graph: Graph, outputs: list[int], max_binding: int | None = None,  # noqa: A001
            optimize: bool = True, passes: Any = None) -> Plan:
    """Compile the outputs (node ids) of ``graph`` into a GPU :class:`Plan`.

    ``optimize=False`` gives the plain plan: one kernel per compute node (``wgpu_plain``); the default
    runs the passes of ``wgpu_passes`` over it, or only those named in ``passes`` (``"chains"``, or
    several: each pass can be tried alone against the plain plan). ``max_binding`` overrides the
    adapter's per-binding size limit (for tests).
    """
    with GPU_LOCK, _collector_paused():   # (the pipeline and lowering caches are shared by every thread's plans)
        return Plan(graph, outputs, max_binding, optimize, passes)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while a plan is built (as the numpy plan does): lowering a large graph
    makes tens of thousands of small objects, none in a cycle, and the collector would rescan them again and
    again (about a fifth of a 10,000-parameter Trainer's build)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
