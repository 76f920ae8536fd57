"""The wgpu backend: the same graph, run as WGSL compute shaders on a GPU (or on lavapipe).

``compile(graph, outputs)`` does everything that does not depend on the numbers:

1. **rewrite and lower** every node to dispatches: ``wgpu_fuse`` lets reshapes share
   their input's buffer, matmuls read transposed operands in place, batched weight
   gradients run as one GEMM and chains of elementwise ops run as one generated kernel
   (``wgpu_chain``); ``wgpu_kernels`` gives each remaining node its kernel, uniform
   block and bindings;
2. **pipelines**, cached per process by (op, dtype, variant) (``wgpu_device``); a kernel
   not compiled yet starts compiling on a worker thread as soon as step 1 knows it;
3. **memory plan**: one persistent device buffer per live value. Inputs, parameters,
   constants and requested outputs own their buffers; every other value borrows one
   from a pool and gives it back after its last reader — the same liveness analysis as
   the numpy backend's, but here it decides how much GPU memory a step needs;
4. **bind groups** and ONE uniform buffer holding every dispatch's parameters, written once.

Steps 1 and 3 (and the uniform words) depend only on the graph's structure, so they are
kept (``wgpu_plan_cache``): compiling a fresh graph of the same shape again — a re-run
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
  traffic, but a compare of the whole array); a read-only array
  (``arr.setflags(write=False)``) is trusted without the compare — freeze a batch or a
  parameter you reuse to make the check free.
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

import dataclasses
import warnings
from typing import Any, Mapping

import numpy as np

from ..graph import Graph, Node
from ..ops.registry import generation as ops_generation
from ..ops.registry import spec
from . import wgpu_plan_cache as plan_cache
from .common import FeedError, KernelError, NumericsError, feed_array, missing_feed_error, resolve_feeds
from .wgpu_chain import chain_dispatch, chain_leaves, in_place_leaves
from .wgpu_device import Gpu, check_available, describe, gpu, shaders_stamp  # noqa: F401 - check_available/describe: API
from .wgpu_fuse import plan_fusion
from .wgpu_kernels import Dispatch, gemm_sum, lower
from .wgpu_matmul import tile_from_env
from .wgpu_plan_cache import signature

__all__ = ["NAME", "compile", "Plan", "check_available", "describe", "BindingLimitError"]

NAME = "wgpu"
_warned_f64 = False


class BindingLimitError(ValueError):
    """A value is larger than the adapter lets one shader bind. Names the node."""


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


def _nbytes(node: Node) -> int:
    return max(16, (node.size * 4 + 15) // 16 * 16)


class Plan:
    """A compiled run of some outputs of a graph on the GPU. See the module docstring."""

    backend = NAME

    def __init__(self, graph: Graph, outputs: list[int], max_binding: int | None = None) -> None:
        self.gpu: Gpu = gpu()
        wgpu = self.gpu.wgpu
        dev = self.gpu.device
        self.graph = graph
        self.outputs = list(outputs)
        self.node_ids = graph.ancestors(self.outputs)
        limit = int(max_binding or self.gpu.max_binding)
        for i in self.node_ids:
            n = graph.nodes[i]
            if n.size * 4 > limit:
                raise BindingLimitError(
                    f"{n.op} (node #{n.id} '{n.name}', shape {n.shape}) needs {_size(n.size * 4)}, but this "
                    f"GPU adapter binds at most {_size(limit)} per buffer (created at {n.source}).\n"
                    f"  what to do: use smaller batches or layers, or run this graph with backend='numpy'"
                )

        # 1-3 (rewrites, lowering, memory plan, uniform words): pure work, reused for a graph of the same
        # structure (wgpu_plan_cache: a second Trainer on a fresh model of the same sizes only rebinds)
        tile = tile_from_env()
        structure, specs = signature(graph, self.node_ids, self.outputs)
        key = (ops_generation(), shaders_stamp(), tile, self.gpu.max_storage_buffers, self.gpu.uniform_align,
               structure)
        self._lowered = low = plan_cache.lookup(
            key, lambda: _lower(graph, self.outputs, self.node_ids, tile, self.gpu.max_storage_buffers,
                                self.gpu.uniform_align, self.gpu.prefetch), keep=specs)
        nodes = graph.nodes
        self.leaves = [nodes[i] for i in low.leaves]
        self.constants = [nodes[i] for i in low.constants]
        self.fusion = low.fusion
        self._fixed, self._failing = low.fixed, low.failing
        self.dispatches: list[Dispatch] = [_rebound(d, graph) for d in low.dispatches]
        self._chain_at = low.chain_at        # chain root -> the index of its dispatch
        self._node_sources = dict(low.node_sources)
        self._indexing = [nodes[i] for i in low.indexing]
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
        self._recorded: Any = None   # the next run's command buffer, recorded while the GPU ran the last one
        self.stats: dict[str, int] = {}
        self.totals = {"runs": 0, "submits": 0, "host_syncs": 0, "uploads": 0, "upload_bytes": 0}

    def _bind_group(self, pipe: Any, k: int, entries: list[tuple[int, int, int]]) -> Any:
        """Dispatch ``k``'s bind group: its uniform block, then each (binding, buffer owner, bytes)."""
        buffers = self.buffers
        return self.gpu.device.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
            {"binding": 0, "resource": {"buffer": self.uniforms, "offset": k * self.gpu.uniform_align, "size": 256}},
            *({"binding": b, "resource": {"buffer": buffers[nid], "offset": 0, "size": size}}
              for b, nid, size in entries)])

    # -- introspection ------------------------------------------------------------------
    def shader_for(self, node: Any) -> str:
        """The WGSL source that computes ``node`` (a Tensor, Node or node id)."""
        nid = getattr(node, "node_id", getattr(node, "id", node))
        if nid not in self._node_sources:
            n = self.graph.nodes[nid]
            raise KeyError(f"node #{nid} ({n.op}) runs no kernel in this plan (leaves and empty tensors have none)")
        return "".join(self._node_sources[nid])

    def __repr__(self) -> str:
        return (f"<wgpu Plan: {len(self.dispatches)} dispatches, {len(self.leaves)} fed leaves, "
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
        resolved = resolve_feeds(self.graph, {k: v for k, v in updates.items()})
        pairs = []
        for pid, new in resolved.items():
            nid = getattr(new, "node_id", new)
            if nid not in self.outputs:
                raise ValueError(f"bind_updates: node #{nid} is not an output of this plan (outputs: {self.outputs})")
            p, q = self.graph.nodes[pid], self.graph.nodes[nid]
            if p.shape != q.shape or p.op not in ("input", "parameter"):
                raise ValueError(f"bind_updates: {q.describe()} cannot update {p.describe()}")
            pairs.append((nid, pid))
        self._updates = pairs
        self._device_only = {nid for nid, _ in pairs}
        self._in_place = self._update_in_place(pairs)
        self._recorded = None   # recorded with the old copies

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
            rewrite = low.updates[tuple(pairs)] = _in_place_rewrite(self.graph, low, self.outputs, pairs)
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
        cpass = enc.begin_compute_pass()
        last = None
        for pipe, bg, (x, y, z) in self._encoded:
            if pipe is not last:
                cpass.set_pipeline(pipe)
                last = pipe
            cpass.set_bind_group(0, bg)
            cpass.dispatch_workgroups(x, y, z)
        cpass.end()
        for nid, off in zip(self.outputs, self._out_offsets):
            if nid not in self._device_only:
                enc.copy_buffer_to_buffer(self.buffers[nid], 0, self.staging, off, _nbytes(self.graph.nodes[nid]))
        for src, dst in self._updates:
            if (src, dst) in self._in_place:   # the kernel wrote it there already
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

        The ops that read ids say how many rows there are (``OpSpec.index_bound``); the
        ids checked are their integer inputs whose values are known here (fed or constant).
        """
        for n in self._indexing:
            v = spec(n.op).index_bound(tuple(self.graph.nodes[i].shape for i in n.inputs), **n.attrs)
            for i in n.inputs:
                if self.graph.nodes[i].dtype != "int":
                    continue
                val = given.get(i, self.graph.constants.get(i))
                if val is not None and np.size(val) and (np.min(val) < 0 or np.max(val) >= v):
                    raise KernelError(
                        f"{n.op} (node #{n.id} '{n.name}'): ids must lie in 0..{v - 1} (the table has {v} rows); "
                        f"got {np.asarray(val)[(np.asarray(val) < 0) | (np.asarray(val) >= v)][:5].tolist()}\n"
                        f"  created at {n.source}"
                    )

    def _upload(self, given: dict[int, Any], stats: dict[str, int]) -> None:
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
        for node in self.leaves:
            if node.id not in given:
                if node.id in self._on_device:
                    continue
                raise missing_feed_error(self.graph, node, self.outputs)
            value = given[node.id]
            prev = self._uploaded.get(node.id)
            if prev is not None and prev[0] is value and node.id in self._on_device:
                host = prev[1]
                if host is None or np.array_equal(host, value):
                    continue   # same object, unchanged: the device copy is current
            arr = self._host_array(node, value)
            if arr.nbytes:
                queue.write_buffer(self.buffers[node.id], 0, arr)
            readonly = isinstance(value, np.ndarray) and not value.flags.writeable
            self._uploaded[node.id] = (value, None if readonly else np.array(value, copy=True))
            self._on_device.add(node.id)
            stats["uploads"] += 1
            stats["upload_bytes"] += arr.nbytes
        # a parameter updated on the device no longer matches the host array it came from
        for _, pid in self._updates:
            self._uploaded.pop(pid, None)

    def run(
        self,
        feeds: Mapping[Any, Any] | None = None,
        params: Mapping[Any, Any] | None = None,
        dtype: Any = None,
        on_nan: str = "raise",
    ) -> list[np.ndarray]:
        """Compute the outputs (float32; ids as int64). See the module docstring for ``params``."""
        if dtype is not None and np.dtype(dtype) != np.float32:
            _float64_warning()
        all_feeds = {**(feeds or {}), **(params or {})}
        given = resolve_feeds(self.graph, all_feeds)
        self._check_ids(given)
        stats = {"submits": 0, "host_syncs": 0, "uploads": 0, "upload_bytes": 0, "dispatches": len(self._encoded)}
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
        end = max([off + _nbytes(self.graph.nodes[nid]) for nid, off in zip(self.outputs, self._out_offsets)
                   if nid not in self._device_only] or [16])
        self.staging.map_sync(self.gpu.wgpu.MapMode.READ, 0, end)   # waits for the GPU: the one host sync
        stats["host_syncs"] += 1
        # Each output is copied out of the mapped memory into an array of its own (the caller's:
        # writable, sharing memory with nothing else, not even with another output of this run),
        # before unmap() takes that memory back.
        raw = np.frombuffer(self.staging.read_mapped(0, end, copy=False), dtype=np.uint8)
        try:
            outs = self._copy_outputs(raw)
        finally:
            del raw   # no view of the mapped memory may outlive the mapping
            self.staging.unmap()
        self.stats = stats
        self.totals["runs"] += 1
        for k in ("submits", "host_syncs", "uploads", "upload_bytes"):
            self.totals[k] += stats[k]
        if on_nan != "ignore" and any(o is not None and o.dtype.kind == "f" and np.isnan(o).any() for o in outs):
            self._explain_nan(all_feeds, on_nan)
        return outs

    def _copy_outputs(self, raw: np.ndarray) -> list[np.ndarray | None]:
        """Each requested output, copied out of the staging bytes (``None`` for device-only ones)."""
        outs: list[np.ndarray | None] = []
        for nid, off in zip(self.outputs, self._out_offsets):
            n = self.graph.nodes[nid]
            if nid in self._device_only:
                outs.append(None)
                continue
            v = raw[off:off + n.size * 4]
            outs.append(v.view(np.int32).astype(np.int64).reshape(n.shape) if n.dtype == "int"
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


def _rebound(d: Dispatch, graph: Graph) -> Dispatch:
    """``d`` naming ``graph``'s own node (a lowered plan reused from an identically shaped graph names the other's)."""
    node = graph.nodes[d.node.id]
    return d if d.node is node else dataclasses.replace(d, node=node)


def _bind_entries(graph: Graph, d: Dispatch, scratch_bytes: dict[int, int]) -> list[tuple[int, int, int]]:
    """(binding, buffer owner, bytes bound) for each buffer binding of ``d``, in binding order."""
    return [(b, nid, scratch_bytes[nid] if nid < 0 else _nbytes(graph.nodes[nid]))
            for b, nid in sorted(d.binds.items())]


def _lower(graph: Graph, outputs: list[int], node_ids: list[int], tile: Any, max_storage_buffers: int,
           uniform_align: int, prefetch: Any = None) -> plan_cache.Lowered:
    """Everything a Plan decides before touching the device (see the module docstring, steps 1-3 and 5).

    ``prefetch(key, source, entry)`` is told each kernel as soon as it is known (``Gpu.prefetch``: the
    driver compiles it on another thread while this one lowers the rest).
    """
    nodes = [graph.nodes[i] for i in node_ids]
    leaves = [n for n in nodes if n.op in ("input", "parameter")]
    constants = [n for n in nodes if n.op == "constant"]
    compute = [n for n in nodes if not spec(n.op).leaf]

    # 1. rewrites (wgpu_fuse: reshape aliases, transposes read in place, weight-gradient GEMMs), then lower
    fusion = plan_fusion(graph, compute, outputs, max_storage_buffers)
    root = fusion.root
    fixed_values, failing = _empty_input_values(graph, [n for n in compute if n.id not in fusion.skip])
    dispatches: list[Dispatch] = []
    chain_at: dict[int, int] = {}   # chain root -> the index of its dispatch
    sources: dict[int, tuple[str, ...]] = {}   # node -> its WGSL, in shared parts
    reads: dict[int, list[int]] = {}   # node -> the buffers (owner nodes) its kernels read
    for n in compute:
        if n.id in fusion.skip or n.id in fixed_values:
            continue
        if n.id in fusion.gemm_sum:
            x, gy = fusion.gemm_sum[n.id]
            ds = gemm_sum(graph, n, x, gy, tile, (root(x), root(gy))) if n.size else []
            reads[n.id] = [root(x), root(gy)]
        elif n.id in fusion.shortcuts:   # a backward rule's mark: one kernel of another op computes this node
            op, inputs, attrs = fusion.shortcuts[n.id]
            stand_in = Node(n.id, op, tuple(root(i) for i in inputs), attrs, n.shape, n.dtype, n.name, n.phase,
                            n.source)
            ds = lower(graph, stand_in, spec(op).wgsl, tile, stores=fusion.provides.get(n.id))
            reads[n.id] = list(stand_in.inputs)
        elif n.id in fusion.chains:
            chain = fusion.chains[n.id]
            d, header = chain_dispatch(graph, chain, {i: root(i) for i in chain_leaves(graph, chain.members)})
            chain_at[n.id] = len(dispatches)
            reads[n.id] = [nid for b, nid in sorted(d.binds.items()) if b != 1 and b not in d.stores]
            text = (header, d.source)
            for m in chain.members:
                sources[m] = text
            dispatches.append(d)   # (prefetched below: the partial-sum pass may still rewrite it)
            continue
        else:
            ops = fusion.operands.get(n.id)
            prod = fusion.products.get(n.id)
            if prod is not None:
                prod = (root(prod[0]), root(prod[1]))
                reads[n.id] = list(prod)
            elif ops is not None:
                ops = tuple((root(i), *rest) for i, *rest in ops)
                reads[n.id] = [v[0] for v in ops]
            else:
                reads[n.id] = [root(i) for i in n.inputs]
            bias = root(fusion.bias[n.id]) if n.id in fusion.bias else None
            resid = root(fusion.resid[n.id]) if n.id in fusion.resid else None
            mat = root(fusion.mat[n.id]) if n.id in fusion.mat else None
            scale = float(np.asarray(graph.constants[fusion.scale[n.id]]).reshape(())) if n.id in fusion.scale else None
            reads[n.id] += [v for v in (bias, resid, mat) if v is not None]
            ds = lower(graph, n, spec(n.op).wgsl, tile, ops, fusion.out_views.get(n.id), prod, bias, resid=resid,
                       mat=mat, scale=scale)
        dispatches.extend(ds)
        for d in ds if prefetch is not None else ():
            if d.entry != "sum_t":   # (a split GEMM's last stage may be dropped below)
                prefetch(d.key, d.source, d.entry)
        if ds:   # the kernel that does the node's work (a split GEMM's sum comes after it)
            first = n.id in fusion.gemm_sum or n.id in fusion.products   # (the stage that reads the operands)
            sources[n.id] = (ds[0 if first else -1].source,)
            if n.id in fusion.shortcuts:
                sources[n.id] = (
                    f"// {n.op} (node #{n.id}) is computed by the kernel of {fusion.shortcuts[n.id][0]} below, entry "
                    f"{ds[0].entry}: the backward rule that built it marked it as that op of nodes "
                    f"{', '.join(f'#{i}' for i in fusion.shortcuts[n.id][1])}\n", *sources[n.id])
    for n in compute:
        if n.id in fusion.written_by:
            w = fusion.written_by[n.id]
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel of its own: the matmul of node #{w} below writes its "
                f"result straight in this transpose's layout (row stride LDC, batch strides in words 32..)\n",
                *sources.get(w, ()))
        elif n.id in fusion.provided_by:
            k = fusion.provided_by[n.id]
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel of its own: the kernel that computes node #{k} "
                f"writes this value too, as a by-product\n", *sources.get(k, ()))
        elif n.id in fusion.dead:
            k = fusion.dead[n.id]
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel: its only use was node #{k}, which one kernel "
                f"computes from other nodes (below)\n", *sources.get(k, ()))
        elif n.id in fusion.bias_add:
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel of its own: the matmul of node #{fusion.bias_add[n.id]} "
                f"below computes this value as it stores its result (epilogue: * the scale in word 40, + Bias: a row "
                f"vector, binding 4; + Resid: a value of the result's shape, binding 5; + Mat: a matrix, binding 7)\n",
                *sources.get(fusion.bias_add[n.id], ()))
        elif n.id in fusion.alias:
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel: a row-major buffer read with another shape is the "
                f"same bytes, so it shares node #{root(n.id)}'s buffer\n",)
        elif n.id in fusion.chain_of:
            if n.id != fusion.chain_of[n.id]:
                sources[n.id] = (
                    f"// {n.op} (node #{n.id}) runs no kernel of its own: the fused kernel of node "
                    f"#{fusion.chain_of[n.id]} below computes it in registers\n", *sources[n.id])
        elif n.id in fixed_values:
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel: its inputs are empty, so its value depends on no "
                f"data; it was computed once, as numpy computes it, and is uploaded like a constant\n",)
        elif n.id in fusion.skip:
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel of its own: the kernel below, which reads it, "
                f"reads its operands in place\n", *_absorbing_source(graph, fusion, sources, n))
    dispatches, chain_at, partials = _sum_last_stage_in_chains(graph, fusion, dispatches, chain_at, outputs,
                                                               reads, sources)
    for d in dispatches if prefetch is not None else ():
        if d.key[0] == "fused" or d.entry == "sum_t":
            prefetch(d.key, d.source, d.entry)
    unbound = {s for stages in partials.values() for s in stages}   # sums whose value no kernel writes now
    running = [n for n in compute if n.id not in fusion.skip and n.id not in fixed_values]
    indexing = [n.id for n in running if spec(n.op).index_bound is not None and n.size]

    # 2. memory plan: owned buffers (slots) for leaves/outputs, a liveness pool for the rest
    slot_sizes: list[int] = []
    slot_of: dict[int, int] = {}

    def new_slot(size: int) -> int:
        slot_sizes.append(size)
        return len(slot_sizes) - 1

    bytes_owned = bytes_pooled = 0
    fixed = [graph.nodes[i] for i in fixed_values]
    # a scalar constant that fused kernels read as a uniform word is bound by no kernel: it needs no buffer
    # (nor an upload); in a transformer's training step that is half of the plan's ~1100 buffers
    bound = {nid for d in dispatches for nid in d.binds.values()} | set(outputs)
    constants = [n for n in constants if n.id in bound]
    for n in leaves + constants + fixed + [graph.nodes[i] for i in outputs]:
        if n.id not in slot_of:
            slot_of[n.id] = new_slot(_nbytes(n))
            bytes_owned += _nbytes(n)
    last_use: dict[int, int] = {}
    for k, n in enumerate(running):
        for i in reads[n.id]:
            last_use[i] = k
    pool: list[tuple[int, int]] = []   # (bytes, slot) of buffers free for reuse
    outs = set(outputs)
    for k, n in enumerate(running):
        for nid in (n.id, *fusion.provides.get(n.id, {}).values()):   # (and the by-products its kernel writes)
            if nid in slot_of or nid in unbound:
                continue
            need = _nbytes(graph.nodes[nid])
            fits = [j for j, (size, _) in enumerate(pool) if need <= size <= 2 * need]
            if fits:
                j = min(fits, key=lambda j: pool[j][0])
                slot_of[nid] = pool.pop(j)[1]
            else:
                slot_of[nid] = new_slot(need)
                bytes_pooled += need
        for i in set(reads[n.id]):   # values read for the last time give their buffer back
            if last_use.get(i) != k or i in outs:
                continue
            if graph.nodes[i].op in ("input", "parameter", "constant") or i in fixed_values:
                continue
            s = slot_of[i]
            pool.append((slot_sizes[s], s))
    for n in compute:
        if n.id in fusion.alias and root(n.id) in slot_of:   # (a reshape of such a constant: no buffer either)
            slot_of[n.id] = slot_of[root(n.id)]
    scratch_bytes: dict[int, int] = {}
    for d in dispatches:
        for sid, size in (d.scratch or {}).items():
            scratch_bytes[sid] = max(16, (size + 15) // 16 * 16)
            slot_of[sid] = new_slot(scratch_bytes[sid])
            bytes_owned += scratch_bytes[sid]

    # 3. one uniform buffer for all dispatches, written once
    params = np.zeros((max(1, len(dispatches)), uniform_align // 4), dtype=np.uint32)
    for k, d in enumerate(dispatches):
        params[k, :64] = d.params

    # 5. staging: every requested output at its own offset in one mappable buffer
    out_offsets: list[int] = []
    off = 0
    for i in outputs:   # (outputs later bound by bind_updates are simply not copied or mapped)
        out_offsets.append(off)
        off += _nbytes(graph.nodes[i])
    return plan_cache.Lowered(
        node_ids=list(node_ids), leaves=[n.id for n in leaves], constants=[n.id for n in constants], fusion=fusion,
        fixed=fixed_values, failing=failing, dispatches=dispatches, chain_at=chain_at, node_sources=sources,
        indexing=indexing, slot_sizes=slot_sizes, slot_of=slot_of,
        binds=[_bind_entries(graph, d, scratch_bytes) for d in dispatches], params=params,
        out_offsets=out_offsets, staging_size=max(off, 16), bytes_owned=bytes_owned, bytes_pooled=bytes_pooled,
        scratch_bytes=scratch_bytes, partials=partials)


def _sum_last_stage_in_chains(graph: Graph, fusion: Any, dispatches: list[Dispatch], chain_at: dict[int, int],
                              outputs: list[int], reads: dict[int, list[int]], sources: dict[int, tuple[str, ...]]
                              ) -> tuple[list[Dispatch], dict[int, int], dict[int, dict]]:
    """A two-stage sum (partial sums into a scratch buffer, then a short kernel adding them up, one thread
    per output) whose only reader is a fused chain: the chain adds the partial sums itself as it reads (a
    split weight-gradient GEMM read by the optimizer's update), and the second stage does not run.

    Returns the dispatches left, the chains' new positions, and chain root -> {sum node: (scratch,
    n, a, b)} (``wgpu_chain.chain_dispatch``'s ``partials``; the in-place rewrite passes them again).
    """
    users: dict[int, set[int]] = {}   # buffer owner -> the dispatches that bind it
    made_by: dict[int, list[int]] = {}   # node -> the dispatches lowered for it
    for k, d in enumerate(dispatches):
        made_by.setdefault(d.node.id, []).append(k)
        for nid in d.binds.values():
            users.setdefault(nid, set()).add(k)
    outs = set(outputs)
    drop: set[int] = set()
    found: dict[int, dict] = {}
    for root, k in chain_at.items():
        chain, d = fusion.chains[root], dispatches[k]
        shape = graph.nodes[root].shape
        stages = {}
        for leaf in chain_leaves(graph, chain.members):
            s = fusion.root(leaf)
            ks = made_by.get(s, [])
            if s in outs or len(ks) != 2 or users.get(s) != {ks[1], k} or graph.nodes[leaf].shape != shape:
                continue
            last = dispatches[ks[1]]
            w = last.params
            # only a one-thread-per-output second stage (sum_t: a split GEMM's few K-chunks): the chain's thread
            # does the same loop. A long per-output sum (sum_wg over 256 partial column sums of a bias gradient)
            # needs its workgroup: one thread per output adding them all measured slower on an H100.
            if last.entry != "sum_t" or set(last.binds) != {1, 2} or last.binds[2] != s \
                    or last.binds[1] >= 0 or w[2] != 1 or w[3] != 1:
                continue
            stages[leaf] = (last.binds[1], int(w[1]), int(w[16]), int(w[32]))
        if not stages:
            continue
        made = chain_dispatch(graph, chain, {i: fusion.root(i) for i in chain_leaves(graph, chain.members)},
                              partials=stages)
        if made is None:
            continue
        new, header = made
        dispatches[k] = new
        text = (header, new.source)
        for m in chain.members:
            sources[m] = text if m == root else (
                f"// {graph.nodes[m].op} (node #{m}) runs no kernel of its own: the fused kernel of node #{root} "
                f"below computes it in registers\n", header, new.source)
        reads[root] = [nid for b, nid in sorted(new.binds.items())   # (scratch buffers, ids < 0, are never pooled)
                       if b != 1 and b not in new.stores and nid >= 0]
        found[root] = {fusion.root(leaf): v for leaf, v in stages.items()}
        for leaf in stages:
            s = fusion.root(leaf)
            drop.add(made_by[s][1])
            sources[s] = (f"// {graph.nodes[s].op} (node #{s}): the kernel below writes its partial sums; the fused "
                          f"kernel of node #{root} adds them up as it reads them (no second stage)\n",
                          dispatches[made_by[s][0]].source)
    if not drop:
        return dispatches, chain_at, {}
    keep = [k for k in range(len(dispatches)) if k not in drop]
    where = {old: new for new, old in enumerate(keep)}
    return [dispatches[k] for k in keep], {r: where[k] for r, k in chain_at.items()}, \
        {r: {s: v for s, v in st.items()} for r, st in found.items()}


def _absorbing_source(g: Graph, f: Any, sources: dict[int, tuple[str, ...]], n: Node) -> tuple[str, ...]:
    """The WGSL of the kernel that computes a skipped transpose's or matmul's work."""
    for s_id, (x, _) in f.gemm_sum.items():
        m = g.nodes[g.nodes[s_id].inputs[0]]
        if (m.id == n.id or m.inputs[0] == n.id) and s_id in sources:
            return sources[s_id]
    u = f.read_through.get(n.id)
    if u is not None and u in sources:
        return sources[u]
    for u, ops in f.operands.items():
        if n.id in g.nodes[u].inputs and u in sources:
            return sources[u]
    return ()


def _in_place_rewrite(g: Graph, low: plan_cache.Lowered, outputs: list[int], pairs: list[tuple[int, int]]
                      ) -> tuple[frozenset, list[tuple[int, Dispatch, list[tuple[int, int, int]], dict]]]:
    """Which (new, old) pairs a fused kernel can write in place (see ``Plan._update_in_place``), and for each
    changed kernel: (dispatch index, new Dispatch, its bind entries, the new WGSL of its chain's nodes)."""
    f = low.fusion
    users: dict[int, list[int]] = {}   # buffer owner -> the dispatches that bind it
    for k, d in enumerate(low.dispatches):
        for nid in d.binds.values():
            users.setdefault(nid, []).append(k)
    per_chain: dict[int, dict[int, int]] = {}
    eligible: dict[int, set[int]] = {}   # chain root -> the leaves it reads at each thread's own index
    for new, old in pairs:
        root = f.chain_of.get(new)
        if root is None or root not in low.chain_at or old in outputs:
            continue
        chain, k = f.chains[root], low.chain_at[root]
        if root not in eligible:
            eligible[root] = in_place_leaves(g, chain)
        if (new != root and new not in chain.stores) or old not in eligible[root]:
            continue
        if any(j > k for j in users.get(old, [])) or any(j != k for j in users.get(new, [])):
            continue   # read after the update, or the new value is read elsewhere: keep the copy
        per_chain.setdefault(root, {})[new] = old
    done: set[tuple[int, int]] = set()
    changed = []
    for root, inplace in per_chain.items():
        chain, k = f.chains[root], low.chain_at[root]
        stages = {leaf: v for leaf in chain_leaves(g, chain.members)
                  if (v := low.partials.get(root, {}).get(f.root(leaf))) is not None}
        made = chain_dispatch(g, chain, {i: f.root(i) for i in chain_leaves(g, chain.members)}, inplace,
                              partials=stages)
        if made is None:   # (no room for both in the uniform block: this chain keeps its copies)
            continue
        d, header = made
        sources = {root: (header, d.source)}
        for m in chain.members:
            if m != root:
                sources[m] = (f"// {g.nodes[m].op} (node #{m}) runs no kernel of its own: the fused kernel of node "
                              f"#{root} below computes it in registers\n", header, d.source)
        changed.append((k, d, _bind_entries(g, d, low.scratch_bytes), sources))
        done.update(inplace.items())
    return frozenset(done), changed


def _empty_input_values(graph: Graph, nodes: list[Node]) -> tuple[dict[int, np.ndarray], dict[int, str]]:
    """Values (and errors) of the nodes whose every input is empty, computed once by numpy.

    A reduction over an empty axis reads no data, yet has a value: the sum of nothing is 0,
    the mean of nothing is NaN (0/0), and the max of nothing is an error. Those are
    numpy's conventions, and numpy is the reference, so such a node is not left to a GPU
    kernel looping zero times (which would give 0 for a variance, -inf for a max): its
    numpy kernel runs here on empty arrays. Returns (node id -> float32/int32 value, for
    non-empty results) and (node id -> the error numpy raised, raised again at run time).
    """
    fixed: dict[int, np.ndarray] = {}
    failing: dict[int, str] = {}
    for n in nodes:
        ins = [graph.nodes[i] for i in n.inputs]
        if not ins or any(i.size for i in ins):
            continue
        args = [np.zeros(i.shape, np.int32 if i.dtype == "int" else np.float32) for i in ins]
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")   # numpy's "Mean of empty slice": the NaN says it
                value = np.asarray(spec(n.op).numpy(*args, **n.attrs))
        except Exception as e:  # noqa: BLE001 - whatever numpy raises, the numpy backend would report
            failing[n.id] = str(e)
            continue
        if n.size:
            fixed[n.id] = np.ascontiguousarray(value, np.int32 if n.dtype == "int" else np.float32).reshape(n.shape)
    return fixed, failing


def compile(graph: Graph, outputs: list[int], max_binding: int | None = None) -> Plan:  # noqa: A001
    """Compile the outputs (node ids) of ``graph`` into a GPU :class:`Plan`.

    ``max_binding`` overrides the adapter's per-binding size limit (for tests).
    """
    return Plan(graph, outputs, max_binding)
