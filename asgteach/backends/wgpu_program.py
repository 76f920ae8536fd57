"""The wgpu backend's compiled program: a graph's kernels, its buffers, and one recorded run.

``wgpu_backend.compile`` builds a :class:`Plan` here (its module docstring tells the story); this
module is the plan itself, in two halves:

* **compile** (``Plan.__init__``): lower the graph (``wgpu_plain`` or ``wgpu_passes``, kept by
  ``wgpu_plan_cache``), create one device buffer per memory-plan slot, the uniform buffer, the
  pipelines and bind groups, and a staging buffer for the outputs. Nothing of this changes after;
* **run** (``Plan.run``): check the ids, upload the feeds, submit the recorded commands, map the
  staging buffer once, copy the outputs out, and explain a NaN.

What one run records and reads back is a :class:`Recording`: the plan's own is every launch, then
the outputs copied to the staging buffer. That is also this module's one extension point: a layer
over a plan (``wgpu_resident``'s training layer, which keeps parameters and optimizer state on the
device) builds a Recording of its own from the plan's pieces (:meth:`Plan.plan_launches`,
:meth:`Plan.launch_commands`, :meth:`Plan.bind_group`, its buffers) and runs it with
:meth:`Plan.execute`, the same path ``run`` takes. The plan never learns what the layer is for.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from ..graph import Graph, Node
from ..ops.registry import generation as ops_generation
from . import ids
from . import wgpu_plan_cache as plan_cache
from .common import FeedError, KernelError, NumericsError, feed_array, missing_feed_error, resolve_feeds
from .wgpu_batch import Launch, plan_launches
from .wgpu_device import GPU_LOCK, Gpu, gpu, map_for_reading, shaders_stamp
from .wgpu_kernels import Dispatch, index_bound_of
from .wgpu_matmul import tile_from_env
from .wgpu_memory import bind_entries as _bind_entries
from .wgpu_memory import nbytes as _nbytes
from .wgpu_passes import PassList, PassRecord, lower_optimised, select
from .wgpu_plain import lower_plain
from .wgpu_plan_cache import signature

__all__ = ["Plan", "Recording", "Launched", "BindingLimitError", "frozen", "warn_float64_again", "rebound",
           "check_binding_limit"]

#: one recorded launch: (pipeline, bind group, workgroups, offset of its workgroup counts in an indirect
#: argument buffer, or None for a direct dispatch)
Launched = tuple[Any, Any, tuple[int, int, int], "int | None"]

_warned_f64 = False


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


@dataclass
class Recording:
    """What one kind of run records and reads back (a plan's own, or a layer's over it: the extension point).

    ``launched`` are the launches in order and ``record`` makes one run's command buffer from them (the
    commands never change between runs: new feeds go into the same buffers). After the GPU is done,
    ``staging`` is mapped up to ``read_end`` bytes once, and each of ``read_back`` (output index, node,
    offset) is copied out; ``flag_at`` (or None) is where a 4-byte flag of the layer's lies in it.
    ``held``: leaves whose device copy stays current without a feed; ``updated``: leaves the run itself
    rewrites on the device (their host copies are forgotten); ``read_held`` fetches the held leaves' values
    (for the NaN explanation, which re-runs the graph on numpy). ``extra_launches``: launches the layer
    added to the plan's (counted apart in ``plan.stats``).
    """

    launched: list[Launched]
    record: Callable[[], Any]
    staging: Any
    read_back: list[tuple[int, Node, int]]
    read_end: int
    flag_at: int | None = None
    held: frozenset[int] = frozenset()
    updated: frozenset[int] = frozenset()
    read_held: Callable[[], dict[str, np.ndarray]] | None = None
    extra_launches: int = 0
    launches: list[Launch] | None = None   # the batching ``launched`` came from (``plan.passes``' last line)
    recorded: Any = None   # the next run's command buffer, recorded while the GPU ran the last one


class Plan:
    """A compiled run of some outputs of a graph on the GPU (``wgpu_backend``'s docstring tells the story)."""

    backend = "wgpu"

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
        check_binding_limit(graph, self.node_ids, low, int(max_binding or self.gpu.max_binding))
        nodes = graph.nodes
        self.leaves = [nodes[i] for i in low.leaves]
        self.constants = [nodes[i] for i in low.constants]
        self.fusion = low.fusion
        self._fixed, self._failing = low.fixed, low.failing
        self.dispatches: list[Dispatch] = [rebound(d, graph) for d in low.dispatches]
        self._chain_at = low.chain_at        # chain root -> the index of its dispatch
        self.node_sources: dict[int, tuple[str, ...]] = dict(low.node_sources)
        self._indexing = [nodes[i] for i in low.indexing]
        self._id_bounds: list | None = None
        self._leaf_ids = frozenset(n.id for n in self.leaves)
        self._fixed_written = False   # constants and the values of empty inputs: written at the first run
        self.bytes_owned, self.bytes_pooled = low.bytes_owned, low.bytes_pooled
        self.scratch_bytes = low.scratch_bytes

        # the device side: this plan's own buffers (one per memory-plan slot), uniforms, pipelines, bind groups
        usage = wgpu.BufferUsage
        storage = usage.STORAGE | usage.COPY_DST | usage.COPY_SRC
        slots = [dev.create_buffer(size=size, usage=storage) for size in low.slot_sizes]
        self.buffers: dict[int, Any] = {nid: slots[s] for nid, s in low.slot_of.items()}
        self.uniforms = dev.create_buffer(size=low.params.nbytes, usage=usage.UNIFORM | usage.COPY_DST)
        dev.queue.write_buffer(self.uniforms, 0, low.params)
        #: (pipeline, bind group, workgroups) of each dispatch, in ``dispatches`` order
        self.encoded: list[tuple[Any, Any, tuple[int, int, int]]] = []
        for k, (d, entries) in enumerate(zip(self.dispatches, low.binds)):
            pipe = self.gpu.pipeline(d.key, d.source, d.entry)
            self.encoded.append((pipe, self.bind_group(pipe, k, entries), d.groups))
        self.out_offsets = low.out_offsets   # staging: every requested output at its own offset
        self.staging = dev.create_buffer(size=low.staging_size, usage=usage.MAP_READ | usage.COPY_DST)

        self._uploaded: dict[int, tuple[Any, np.ndarray | None]] = {}   # node id -> (object, host copy)
        self.on_device: set[int] = set()   # leaves whose values are in their buffers
        # what the plan's own run records: the dispatches, neighbouring chains of one kernel batched (wgpu_batch);
        # built at the first run (or on first use of ``launches``)
        self._launches: list[Launch] | None = None
        self._own: Recording | None = None
        self._ran: list[Launch] | None = None   # the launches of the recording that ran last (plan.passes)
        self._alive: list[Any] = []   # buffers a recording's bind groups use (batched launches' uniform blocks)
        self.stats: dict[str, int] = {}
        self.totals = {"runs": 0, "submits": 0, "host_syncs": 0, "uploads": 0, "upload_bytes": 0}

    # -- the pieces a Recording is made of (also a layer's: the extension point) ---------------------------------
    def bind_group(self, pipe: Any, k: int, entries: list[tuple[int, int, int]], blocks: int = 1,
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

    def plan_launches(self, dispatches: list[Dispatch], key: tuple = ()) -> list[Launch]:
        """Batch chains of one kernel and split sums' last stages of ``dispatches`` (wgpu_batch); their kernels
        start compiling now. Pure work on the lowered plan: kept with it, under ``key`` (a layer that rewrote
        dispatches names its rewrite there)."""
        low, g = self._lowered, self.gpu
        key = (key, g.batch_storage_buffers, g.uniform_align, g.max_uniform_binding)
        launches = low.launches.get(key)
        if launches is None and not self.optimize:   # the plain plan: one launch per dispatch
            launches = low.launches[key] = [Launch((k,), d) for k, d in enumerate(dispatches)]
        if launches is None:
            slot_of = low.slot_of
            launches = low.launches[key] = plan_launches(dispatches, lambda nid: slot_of.get(nid, nid), *key[1:])
        for la in launches:
            if la.count > 1:
                self.gpu.prefetch(la.dispatch.key, la.dispatch.source, la.dispatch.entry)
        return launches

    def launch_commands(self, dispatches: list[Dispatch], encoded: list[tuple[Any, Any, tuple[int, int, int]]],
                        launches: list[Launch]) -> list[Launched]:
        """(pipeline, bind group, workgroups, None) of every launch. A batch's uniform blocks are its members'
        blocks, copied one after the other into a buffer of their own (its members need not be neighbours)."""
        batches = [la for la in launches if la.count > 1]
        words = self.gpu.uniform_align // 4
        rows = np.zeros((max(1, sum(la.count for la in batches)), words), dtype=np.uint32)
        start, row = {}, 0
        for la in batches:
            start[la.members] = row
            for k in la.members:
                rows[row, :64] = dispatches[k].params
                row += 1
        batch_uniforms = self.gpu.device.create_buffer(
            size=rows.nbytes, usage=self.gpu.wgpu.BufferUsage.UNIFORM | self.gpu.wgpu.BufferUsage.COPY_DST)
        self.gpu.device.queue.write_buffer(batch_uniforms, 0, rows)
        self._alive.append(batch_uniforms)   # (held for as long as the plan: its bind groups read it)
        launched: list[Launched] = []
        for la in launches:
            if la.count == 1:
                launched.append((*encoded[la.members[0]], None))
                continue
            d = la.dispatch
            pipe = self.gpu.pipeline(d.key, d.source, d.entry)
            entries = _bind_entries(self.graph, d, self.scratch_bytes)
            launched.append((pipe, self.bind_group(pipe, start[la.members], entries, blocks=la.count,
                                                   uniforms=batch_uniforms), d.groups, None))
        return launched

    def record_pass(self, enc: Any, launched: list[Launched], indirect_args: Any = None) -> None:
        """One compute pass with every launch (an indirect one takes its workgroup counts from ``indirect_args``)."""
        cpass = enc.begin_compute_pass()
        last = None
        for pipe, bg, (x, y, z), indirect in launched:
            if pipe is not last:
                cpass.set_pipeline(pipe)
                last = pipe
            cpass.set_bind_group(0, bg)
            if indirect is None:
                cpass.dispatch_workgroups(x, y, z)
            else:
                cpass.dispatch_workgroups_indirect(indirect_args, indirect)
        cpass.end()

    def copy_outputs_to(self, enc: Any, staging: Any, skip: frozenset[int] = frozenset()) -> None:
        """Copy every output but those in ``skip`` into ``staging``, each at its own offset."""
        for nid, off in zip(self.outputs, self.out_offsets):
            if nid not in skip:
                enc.copy_buffer_to_buffer(self.buffers[nid], 0, staging, off, _nbytes(self.graph.nodes[nid]))

    def read_back(self, skip: frozenset[int] = frozenset()) -> tuple[list[tuple[int, Node, int]], int]:
        """(output index, node, staging offset) of the outputs not in ``skip``, and the bytes to map for them."""
        back = [(k, self.graph.nodes[nid], off) for k, (nid, off) in enumerate(zip(self.outputs, self.out_offsets))
                if nid not in skip]
        return back, max([off + _nbytes(n) for _, n, off in back] or [16])

    # -- the plan's own recording --------------------------------------------------------------------------------
    @property
    def own(self) -> Recording:
        """What ``run`` records and reads back: every launch, then every output copied to the staging buffer."""
        if self._own is None:
            launched = self.launch_commands(self.dispatches, self.encoded, self.launches)

            def record() -> Any:
                enc = self.gpu.device.create_command_encoder()
                self.record_pass(enc, launched)
                self.copy_outputs_to(enc, self.staging)
                return enc.finish()

            back, end = self.read_back()
            self._own = Recording(launched, record, self.staging, back, end, launches=self.launches)
        return self._own

    # -- introspection --------------------------------------------------------------------------------------------
    def shader_for(self, node: Any) -> str:
        """The WGSL source that computes ``node`` (a Tensor, Node or node id)."""
        nid = getattr(node, "node_id", getattr(node, "id", node))
        if nid not in self.node_sources:
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
                return note + "".join(self.node_sources[nid])
        return "".join(self.node_sources[nid])

    @property
    def launches(self) -> list[Launch]:
        """What a run records (``wgpu_batch``): the dispatches, chains of the same code batched into one launch
        (planned at the first run or on first use)."""
        if self._launches is None:
            self._launches = self.plan_launches(self.dispatches)
        return self._launches

    @property
    def pipelines(self) -> list[Any]:
        """The compiled pipeline of each dispatch, in ``self.dispatches`` order (from the process-wide cache)."""
        return [e[0] for e in self.encoded]

    @property
    def lowered(self) -> plan_cache.Lowered:
        """Everything this plan decided before touching the device (kernels, memory plan, uniform words, the
        passes' record): shared by plans of graphs with the same structure (``wgpu_plan_cache``)."""
        return self._lowered

    @property
    def passes(self) -> PassList:
        """What each optimisation pass did to this plan (``wgpu_passes``), printed as a table: the pass, the
        kernels (or dispatches) before and after it, what it rewrote. Empty for the plain plan. Once the plan
        has run, the last line is ``batch``: launches of the same code batched (wgpu_batch), as the last run
        recorded them (a training layer's run batches its rewritten update kernels: its own launches)."""
        records = PassList(self._lowered.passes)
        launches = self._ran if self._ran is not None else self._launches
        if self.optimize and launches is not None:
            batched = sum(la.count for la in launches if la.count > 1)
            records.append(PassRecord("batch", len(self.dispatches), len(launches),
                                      f"{batched} dispatches of the same code run as "
                                      f"{sum(1 for la in launches if la.count > 1)} batched launch(es)",
                                      "launches"))
        return records

    def __repr__(self) -> str:
        plain = "" if self.optimize else "plain, "
        return (f"<wgpu Plan: {plain}{len(self.dispatches)} dispatches, {len(self.leaves)} fed leaves, "
                f"{(self.bytes_owned + self.bytes_pooled) / 2**20:.2f} MiB of buffers, outputs {self.outputs}>")

    # -- feeds ---------------------------------------------------------------------------------------------------
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

    def _upload(self, given: dict[int, Any], stats: dict[str, int], rec: Recording) -> None:
        queue = self.gpu.device.queue
        if not self._fixed_written:
            self._upload_fixed(stats)
        # Every leaf is fed on every run, as on numpy; the one exception is a leaf a layer keeps on the
        # device (a parameter, an optimizer's moment): its value is the one the last run wrote there.
        missing = self._leaf_ids - given.keys() - (rec.held & self.on_device)
        if missing:
            raise missing_feed_error(self.graph, next(n for n in self.leaves if n.id in missing), self.outputs)
        for nid in given.keys() & self._leaf_ids:
            node, value = self.graph.nodes[nid], given[nid]
            prev = self._uploaded.get(nid)
            if prev is not None and prev[0] is value and nid in self.on_device:
                host = prev[1]
                if host is None or np.array_equal(host, value):
                    continue   # same object, unchanged: the device copy is current
            arr = self._host_array(node, value)
            if arr.nbytes:
                queue.write_buffer(self.buffers[nid], 0, arr)
            self._uploaded[nid] = (value, None if frozen(value) else np.array(value, copy=True))
            self.on_device.add(nid)
            stats["uploads"] += 1
            stats["upload_bytes"] += arr.nbytes
        for pid in rec.updated:   # a leaf the run rewrites on the device no longer matches its host array
            self._uploaded.pop(pid, None)

    def _upload_fixed(self, stats: dict[str, int]) -> None:
        """Constants and the values of empty inputs: written once, at the first run."""
        queue = self.gpu.device.queue
        for nid, arr in self._fixed.items():   # values of empty inputs: written once, like constants
            if nid not in self.on_device:
                queue.write_buffer(self.buffers[nid], 0, arr)
                self.on_device.add(nid)
                stats["uploads"] += 1
                stats["upload_bytes"] += arr.nbytes
        for node in self.constants:
            if node.id not in self.on_device:
                arr = self._host_array(node, self.graph.constants[node.id]) if node.dtype == "int" else \
                    np.ascontiguousarray(self.graph.constants[node.id], dtype=np.float32)
                if arr.nbytes:   # (an empty value has no bytes to write: wgpu refuses a 0-byte write)
                    queue.write_buffer(self.buffers[node.id], 0, arr)
                self.on_device.add(node.id)
                stats["uploads"] += 1
                stats["upload_bytes"] += arr.nbytes
        self._fixed_written = True

    # -- running -------------------------------------------------------------------------------------------------
    def run(
        self,
        feeds: Mapping[Any, Any] | None = None,
        params: Mapping[Any, Any] | None = None,
        dtype: Any = None,
        on_nan: str = "raise",
    ) -> list[np.ndarray]:
        """Compute the outputs (float32; ids as int64). See ``wgpu_backend``'s docstring for ``params``.

        Safe to call from several threads: runs on this process's GPU take turns (``GPU_LOCK``).
        """
        with GPU_LOCK:
            outs, _ = self.execute(self.own, feeds, params, dtype)
            if on_nan != "ignore":
                self.check_nan(outs, self.own, {**(feeds or {}), **(params or {})}, on_nan)
            return outs

    def execute(self, rec: Recording, feeds: Mapping[Any, Any] | None, params: Mapping[Any, Any] | None,
                dtype: Any) -> tuple[list[np.ndarray | None], bool]:
        """Run ``rec`` once: check ids, upload, submit its commands (recording the next run's while the GPU
        works), map its staging buffer once and copy the outputs out. Returns the outputs (None for those not
        read back) and the layer's flag (False without one). Call with ``GPU_LOCK`` held."""
        if dtype is not None and np.dtype(dtype) != np.float32:
            _float64_warning()
        given = resolve_feeds(self.graph, feeds, params)   # (apart: a leaf in both is an error)
        self._check_ids(given)
        stats = {"submits": 0, "host_syncs": 0, "uploads": 0, "upload_bytes": 0,
                 "dispatches": len(rec.launched), "gate_dispatches": rec.extra_launches}
        self._upload(given, stats, rec)
        for nid, error in self._failing.items():   # numpy raises here too: say so instead of inventing a value
            n = self.graph.nodes[nid]
            shapes = ", ".join(str(self.graph.nodes[i].shape) for i in n.inputs)
            raise KernelError(f"{n.op} (node #{n.id} '{n.name}', inputs {shapes}) failed while running: {error}\n"
                              f"  created at {n.source}")

        commands = rec.recorded if rec.recorded is not None else rec.record()
        self.gpu.device.queue.submit([commands])   # uploads written above reach the GPU before it: queue order
        stats["submits"] += 1
        # while the GPU works, record the NEXT run's commands (the same every run): Python's
        # encoding time then overlaps GPU time instead of adding to it
        rec.recorded = rec.record()
        map_for_reading(rec.staging, rec.read_end)   # waits for the GPU: the one host sync
        stats["host_syncs"] += 1
        # Each output is copied out of the mapped memory into an array of its own (the caller's:
        # writable, sharing memory with nothing else, not even with another output of this run),
        # before unmap() takes that memory back.
        raw = np.frombuffer(rec.staging.read_mapped(0, rec.read_end, copy=False), dtype=np.uint8)
        try:
            outs = self._copy_outputs(raw, rec.read_back)
            flag = rec.flag_at is not None and bool(raw[rec.flag_at:rec.flag_at + 4].view(np.uint32)[0])
        finally:
            del raw   # no view of the mapped memory may outlive the mapping
            rec.staging.unmap()
        stats["updates_skipped"] = int(flag)
        self._ran = rec.launches   # (a layer's updates refused on the device: wgpu_resident)
        self.stats = stats
        self.totals["runs"] += 1
        for k in ("submits", "host_syncs", "uploads", "upload_bytes"):
            self.totals[k] += stats[k]
        return outs, flag

    def _copy_outputs(self, raw: np.ndarray, read_back: list[tuple[int, Node, int]]) -> list[np.ndarray | None]:
        """Each output of ``read_back``, copied out of the staging bytes (``None`` for the others)."""
        outs: list[np.ndarray | None] = [None] * len(self.outputs)
        for k, n, off in read_back:
            v = raw[off:off + n.size * 4]
            outs[k] = (v.view(np.int32).astype(np.int64).reshape(n.shape) if n.dtype == "int"
                       else v.view(np.float32).reshape(n.shape).copy())
        return outs

    def check_nan(self, outs: list[np.ndarray | None], rec: Recording, feeds: Mapping[Any, Any],
                  on_nan: str) -> None:
        """A NaN in an output read back: explained (``on_nan="raise"``) or warned about."""
        if any(n.dtype == "float" and np.isnan(outs[k]).any() for k, n, _ in rec.read_back):
            self.explain_nan(feeds, on_nan, rec.read_held)

    def explain_nan(self, feeds: Mapping[Any, Any], on_nan: str,
                    read_held: Callable[[], dict[str, np.ndarray]] | None = None) -> None:
        """Find the first NaN-producing node by re-running on numpy in float32 (leaves a layer keeps on the
        device and nobody fed are fetched with ``read_held``)."""
        from . import numpy_backend

        ref = numpy_backend.Plan(self.graph, self.outputs)
        given = resolve_feeds(self.graph, feeds)
        if read_held is not None and any(n.id not in given for n in ref.leaves):
            held = read_held()
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


def check_binding_limit(graph: Graph, node_ids: list[int], low: plan_cache.Lowered, limit: int) -> None:
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


def rebound(d: Dispatch, graph: Graph) -> Dispatch:
    """``d`` naming ``graph``'s own node (a lowered plan reused from an identically shaped graph names the other's)."""
    node = graph.nodes[d.node.id]
    return d if d.node is node else dataclasses.replace(d, node=node)
