"""Resident training: a layer over a compiled wgpu plan that keeps parameters and optimizer state on the GPU.

A training step must not ship its weights to the GPU every time, nor bring them back. A Trainer on
the GPU asks ``backends.resident_training(plan)`` for this layer (``common.ResidentTraining``; the
numpy plan says it has none) and then:

* ``bind_updates({w: w_new, ...})``: after every run, the value of output ``w_new`` is copied *on
  the GPU* into ``w``'s buffer, in the same submit. Feed ``w`` once; later runs may leave it out and
  use the device copy. Those outputs are no longer read back (``run`` returns None in their place);
* where a fused update kernel is the only reader of ``w`` (an optimizer's ``p - lr * ...``), it is
  rewritten to write ``w_new`` straight into ``w``'s buffer (``wgpu_passes/in_place.py``): no copy;
* **the gate** (``wgpu_gate``): before the first update kernel, the gradients and the loss are checked
  on the device, and the update kernels are dispatched from workgroup counts that are zero when a
  value was not finite. A NaN batch then leaves the parameters and the optimizer state as they were;
  ``updates_skipped`` says so after the run, and the error names the node that made the first NaN;
* ``read_params()`` fetches the device copies (one sync).

The plan underneath is not changed by any of this: the layer builds its own ``Recording`` (the plan's
extension point, ``wgpu_program``) from the plan's pieces, with its own copy of the dispatches that the
in-place rewrite replaced, and runs it with ``plan.execute``. ``plan.run`` still runs the plan as compiled.
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping

import numpy as np

from . import wgpu_plan_cache as plan_cache
from .common import NumericsError, resolve_feeds
from .wgpu_device import GPU_LOCK, collector_paused, family_source
from .wgpu_gate import PER_WG as GATE_PER_WG
from .wgpu_gate import SLOTS as GATE_SLOTS
from .wgpu_gate import Gate, check_source, plan_gate
from .wgpu_kernels import WG_LINEAR, Dispatch, groups_for
from .wgpu_memory import bind_entries as _bind_entries
from .wgpu_memory import nbytes as _nbytes
from .wgpu_passes.in_place import in_place_rewrite
from .wgpu_program import Launched, Plan, Recording, rebound

__all__ = ["ResidentTraining"]


class ResidentTraining:
    """Parameters and optimizer state kept on the GPU between the runs of ``plan`` (the module docstring)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self._updates: list[tuple[int, int]] = []   # (new output, old leaf)
        self._in_place: set[tuple[int, int]] = set()   # pairs a kernel writes straight into old
        #: the dispatches as this layer runs them: the plan's, with the in-place rewrite's replacements
        self.dispatches: list[Dispatch] = list(plan.dispatches)
        self._encoded = list(plan.encoded)
        self.node_sources = dict(plan.node_sources)
        self.gate: Gate | None = None
        self._recording: Recording | None = None
        self._launches: list | None = None

    # -- what common.ResidentTraining asks ------------------------------------------------------------------------
    def bind_updates(self, updates: Mapping[Any, Any]) -> None:
        """After each run, copy output ``new`` into parameter ``old``'s buffer on the GPU.

        ``updates`` maps a parameter (Tensor, name or id) to an output of the plan (Tensor or id) of the
        same shape: typically the optimizer's new value. Feed the parameter once; afterwards the device
        copy is used and updated without any upload. Those outputs are no longer read back: ``run``
        returns ``None`` in their place (``read_params()`` fetches the parameters when you want them).
        """
        with GPU_LOCK, collector_paused():
            self._bind_updates(updates)

    def run(self, feeds: Mapping[Any, Any] | None = None, params: Mapping[Any, Any] | None = None,
            dtype: Any = None, on_nan: str = "raise") -> list[np.ndarray | None]:
        """One run of the plan with the updates applied on the device (``None`` for the outputs bound to a
        parameter). With ``on_nan="raise"`` a refused update (the gate found a value that is not finite) or a
        NaN read back is an error naming the node where it started."""
        with GPU_LOCK:
            rec = self.recording
            outs, skipped = self.plan.execute(rec, feeds, params, dtype)
            all_feeds = {**(feeds or {}), **(params or {})}
            if skipped and on_nan != "ignore":
                self._explain_skip(all_feeds, on_nan)
            elif on_nan != "ignore":
                self.plan.check_nan(outs, rec, all_feeds, on_nan)
            return outs

    @property
    def updates_skipped(self) -> bool:
        """Whether the last run's updates were not applied (the gate found a value that was not finite)."""
        return bool(self.plan.stats.get("updates_skipped", 0))

    def read_params(self) -> dict[str, np.ndarray]:
        """The current device values of every input/parameter the plan holds (one sync)."""
        with GPU_LOCK:
            return self._read_params()

    # -- introspection -------------------------------------------------------------------------------------------
    @property
    def in_place(self) -> frozenset[tuple[int, int]]:
        """The (new, old) pairs of ``bind_updates`` that a fused kernel writes straight into old's buffer
        (no copy after the run; see ``wgpu_passes/in_place.py``)."""
        return frozenset(self._in_place)

    @property
    def launches(self) -> list:
        """What a run of this layer records: its dispatches batched (``wgpu_batch``), keyed by its updates."""
        if self._launches is None:
            self._launches = self.plan.plan_launches(self.dispatches, tuple(self._updates))
        return self._launches

    def shader_for(self, node: Any) -> str:
        """The WGSL source that computes ``node`` as this layer runs it (an update may write in place)."""
        nid = getattr(node, "node_id", getattr(node, "id", node))
        return "".join(self.node_sources[nid]) if nid in self.node_sources else self.plan.shader_for(nid)

    # -- building ------------------------------------------------------------------------------------------------
    def _bind_updates(self, updates: Mapping[Any, Any]) -> None:
        plan = self.plan
        resolved = resolve_feeds(plan.graph, {k: v for k, v in updates.items()})
        pairs = []
        outputs = set(plan.outputs)
        for pid, new in resolved.items():
            nid = getattr(new, "node_id", new)
            if nid not in outputs:
                raise ValueError(f"bind_updates: node #{nid} is not an output of this plan (outputs: {plan.outputs})")
            p, q = plan.graph.nodes[pid], plan.graph.nodes[nid]
            if p.shape != q.shape or p.op not in ("input", "parameter"):
                raise ValueError(f"bind_updates: {q.describe()} cannot update {p.describe()}")
            pairs.append((nid, pid))
        self._updates = pairs
        self._in_place = self._update_in_place(pairs)
        self._launches = None          # the chains changed: batch them again
        self._recording = None
        self.recording   # (its pipelines and bind groups now, not at the first run: a Trainer's compile is all of it)

    def _update_in_place(self, pairs: list[tuple[int, int]]) -> set[tuple[int, int]]:
        """Let fused kernels write new values straight into the parameters they update.

        An optimizer's update ``p_new = p - lr * ...`` is (with ``m`` and ``v``) one fused
        kernel that reads ``p`` at each thread's own index. When no later kernel reads ``p``
        and nothing else reads ``p_new``, that kernel may write ``p_new`` into ``p``'s buffer:
        no copy after the run, one buffer less in flight. Returns the pairs done so.
        (Which kernels change, and their new WGSL, is pure work: kept with the lowered plan.)
        """
        plan = self.plan
        self.dispatches, self._encoded = list(plan.dispatches), list(plan.encoded)   # from the plan as compiled
        self.node_sources = dict(plan.node_sources)
        low = plan.lowered
        rewrite = low.updates.get(tuple(pairs))
        if rewrite is None:
            plan_cache.stats["update_misses"] += 1
            rewrite = low.updates[tuple(pairs)] = (in_place_rewrite(plan.graph, low, plan.outputs, pairs)
                                                   if plan.optimize else (frozenset(), []))
        else:
            plan_cache.stats["update_hits"] += 1
        done, changed = rewrite
        for _, d, _, _ in changed:   # (their kernels compile on worker threads meanwhile)
            plan.gpu.prefetch(d.key, d.source, d.entry)
        for k, d, entries, sources in changed:
            d = rebound(d, plan.graph)
            pipe = plan.gpu.pipeline(d.key, d.source, d.entry)
            self.dispatches[k] = d
            self._encoded[k] = (pipe, plan.bind_group(pipe, k, entries), d.groups)
            self.node_sources.update(sources)
        return set(done)

    @property
    def recording(self) -> Recording:
        """What a run of this layer records and reads back: the launches with the gate around the updates, the
        outputs not bound to a parameter, the gate's flag, and the copies of updates not written in place."""
        if self._recording is None:
            plan = self.plan
            device_only = frozenset(nid for nid, _ in self._updates)
            launched = plan.launch_commands(self.dispatches, self._encoded, self.launches)
            launched, extra, flag, gate_buffers, staging = self._add_gate(launched, device_only)
            back, end = plan.read_back(skip=device_only)
            if flag is not None:
                end = max(end, flag + 8)
            updates, in_place, gate = list(self._updates), set(self._in_place), self.gate

            def record() -> Any:
                enc = plan.gpu.device.create_command_encoder()
                if gate is not None:
                    enc.clear_buffer(gate_buffers["flag"])
                plan.record_pass(enc, launched, gate_buffers.get("args"))
                plan.copy_outputs_to(enc, staging, skip=device_only)
                if gate is not None:
                    enc.copy_buffer_to_buffer(gate_buffers["flag"], 0, staging, flag, 4)
                for src, dst in updates:
                    if (src, dst) in in_place or gate is not None:   # a kernel wrote (or copied) it already
                        continue
                    enc.copy_buffer_to_buffer(plan.buffers[src], 0, plan.buffers[dst], 0,
                                              _nbytes(plan.graph.nodes[dst]))
                return enc.finish()

            self._recording = Recording(launched, record, staging, back, end, flag_at=flag,
                                        held=frozenset(pid for _, pid in self._updates),
                                        updated=frozenset(pid for _, pid in self._updates),
                                        read_held=self._read_params, extra_launches=extra, launches=self.launches)
        return self._recording

    def _add_gate(self, launched: list[Launched], device_only: frozenset[int]
                  ) -> tuple[list[Launched], int, int | None, dict[str, Any], Any]:
        """Check the gradients and the loss on the device before the first update kernel, and dispatch the
        updates from arguments that are zero when something was not finite (wgpu_gate). Returns the launches
        with the gate's, how many it added, where its flag lands in the staging buffer (None: no gate), its
        buffers, and the staging buffer (16 bytes longer with a gate)."""
        plan = self.plan
        graph, scratch = plan.graph, plan.scratch_bytes
        self.gate = gate = plan_gate(
            graph, self.dispatches, [la.members for la in self.launches], self._updates, self._in_place,
            plan.outputs, set(device_only),
            lambda d, nid: next(b for _, n, b in _bind_entries(graph, d, scratch) if n == nid))
        if gate is None:
            return launched, 0, None, {}, plan.staging
        dev, wgpu = plan.gpu.device, plan.gpu.wgpu
        usage = wgpu.BufferUsage
        align = plan.gpu.uniform_align
        checks = [gate.checked[i:i + GATE_SLOTS] for i in range(0, len(gate.checked), GATE_SLOTS)]
        blocks = np.zeros((len(checks) + 1 + len(gate.copies), align // 4), dtype=np.uint32)
        flag = dev.create_buffer(size=16, usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)
        uniforms = dev.create_buffer(size=blocks.nbytes, usage=usage.UNIFORM | usage.COPY_DST)
        gated_groups = [launched[i][2] for i in gate.gated]
        copy_groups = [groups_for(-(-_nbytes(graph.nodes[old]) // (4 * WG_LINEAR))) for _, old in gate.copies]
        words = np.array([g for groups in gated_groups + copy_groups for g in groups], dtype=np.uint32)
        groups = dev.create_buffer(size=max(16, words.nbytes), usage=usage.STORAGE | usage.COPY_DST)
        dev.queue.write_buffer(groups, 0, words)
        args = dev.create_buffer(size=max(16, words.nbytes), usage=usage.STORAGE | usage.INDIRECT)

        def group(pipe: Any, row: int, buffers: list[tuple[Any, int]]) -> Any:
            return dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
                {"binding": 0, "resource": {"buffer": uniforms, "offset": row * align, "size": 256}},
                *({"binding": b, "resource": {"buffer": buf, "offset": 0, "size": size}}
                  for b, (buf, size) in enumerate(buffers, start=1))])

        before: list[Launched] = []
        for row, slots in enumerate(checks):   # 1. look at every gradient and the loss
            pipe = plan.gpu.pipeline(("finite_check", len(slots)), check_source(len(slots)), "finite_check")
            for s, (nid, nbytes) in enumerate(slots):
                blocks[row, 4 * s] = nbytes // 4
            before.append((pipe, group(pipe, row, [(flag, 16), *((plan.buffers[n], b) for n, b in slots)]),
                           groups_for(sum(-(-(b // 4) // GATE_PER_WG) for _, b in slots)),
                           None))
        row = len(checks)   # 2. the updates' workgroups, or none
        blocks[row, 0] = words.size
        pipe = plan.gpu.pipeline(("gate_args",), family_source("gate"), "gate_args")
        before.append((pipe, group(pipe, row, [(flag, 16), (groups, max(16, words.nbytes)),
                                                (args, max(16, words.nbytes))]),
                       (-(-max(1, words.size) // 64), 1, 1), None))
        launched = list(launched)
        for k, i in enumerate(gate.gated):
            pipe_i, bg_i, groups_i, _ = launched[i]
            launched[i] = (pipe_i, bg_i, groups_i, 12 * k)
        copy_pipe = plan.gpu.pipeline(("copy_words",), family_source("gate_copy"), "copy_words") if gate.copies \
            else None
        after = []
        for k, (new, old) in enumerate(gate.copies):   # 3. updates not written in place: copied, or not
            nbytes = _nbytes(graph.nodes[old])
            blocks[row + 1 + k, 0] = nbytes // 4
            after.append((copy_pipe, group(copy_pipe, row + 1 + k, [(plan.buffers[old], nbytes),
                                                                      (plan.buffers[new], nbytes)]),
                          copy_groups[k], 12 * (len(gate.gated) + k)))
        dev.queue.write_buffer(uniforms, 0, blocks)
        launched = launched[:gate.at] + before + launched[gate.at:] + after
        # the flag is read back with the outputs: a staging buffer 16 bytes longer
        flag_at = -(-plan.lowered.staging_size // 16) * 16
        staging = dev.create_buffer(size=flag_at + 16, usage=usage.MAP_READ | usage.COPY_DST)
        buffers = {"flag": flag, "args": args, "groups": groups, "uniforms": uniforms}
        return launched, len(before) + len(after), flag_at, buffers, staging

    # -- reading back and explaining ------------------------------------------------------------------------------
    def _read_params(self) -> dict[str, np.ndarray]:
        plan = self.plan
        dev = plan.gpu.device
        held = [n for n in plan.leaves if n.id in plan.on_device]
        size = sum(_nbytes(n) for n in held)
        staging = dev.create_buffer(size=max(size, 16), usage=plan.gpu.wgpu.BufferUsage.MAP_READ
                                    | plan.gpu.wgpu.BufferUsage.COPY_DST)
        enc = dev.create_command_encoder()
        off = 0
        for n in held:
            enc.copy_buffer_to_buffer(plan.buffers[n.id], 0, staging, off, _nbytes(n))
            off += _nbytes(n)
        dev.queue.submit([enc.finish()])
        staging.map_sync(plan.gpu.wgpu.MapMode.READ)
        raw = np.frombuffer(staging.read_mapped(), dtype=np.uint8).copy()
        staging.unmap()
        out, off = {}, 0
        for n in held:
            out[n.name] = raw[off:off + n.size * 4].view(np.int32 if n.dtype == "int" else np.float32).reshape(n.shape)
            off += _nbytes(n)
        return out

    def _explain_skip(self, feeds: Mapping[Any, Any], on_nan: str) -> None:
        """The gate kept the updates from running: say which node made the first NaN or infinity."""
        plan = self.plan
        note = ("\n  this run's updates were not applied: the parameters and optimizer state on the GPU are as "
                "they were before it (the check before the update kernels found a value that is not finite)")
        try:
            plan.explain_nan(feeds, on_nan, self._read_params)   # a NaN in what is read back: numpy names its node
        except NumericsError as e:
            raise NumericsError(f"{e}{note}") from None
        from . import numpy_backend
        from .nonfinite import first_nonfinite

        ref = numpy_backend.Plan(plan.graph, plan.outputs)
        given = resolve_feeds(plan.graph, feeds)
        if any(n.id not in given for n in ref.leaves):
            held = self._read_params()
            feeds = {**{n.id: held[n.name] for n in ref.leaves if n.id not in given}, **given}
        found = first_nonfinite(plan.graph, [n for n, _ in self.gate.checked], feeds, np.float32)
        msg = (found or "a value the updates read was not finite on the GPU, but numpy (float32) computes only "
               "finite values from the same feeds: a GPU kernel differs from numpy here; please report it") + note
        if on_nan == "raise":
            raise NumericsError(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)
