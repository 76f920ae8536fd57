"""Timing recorded GPU work without the backend's own run(): shared by the GPU benchmarks.

``time_dispatches`` records ``repeats`` passes over a list of (pipeline, bind group,
workgroups) into ONE compute pass, submits it, and waits by mapping a small buffer that
a final copy wrote (``queue.on_submitted_work_done_sync`` is broken in wgpu-py 0.32).
Differences of two repeat counts cancel the fixed submit/map cost.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence


def probe_buffer(g: Any) -> Any:
    """A 16-byte buffer the host can map: what a timed submission is waited on with."""
    return g.device.create_buffer(size=16, usage=g.wgpu.BufferUsage.MAP_READ | g.wgpu.BufferUsage.COPY_DST)


def time_dispatches(g: Any, dispatches: Sequence[tuple[Any, ...]], repeats: int,
                    src: Any, probe: Any) -> float:
    """Seconds from recording to completion of ``repeats`` passes over ``dispatches``."""
    t0 = time.perf_counter()
    enc = g.device.create_command_encoder()
    cp = enc.begin_compute_pass()
    last = None
    for _ in range(repeats):
        for pipe, bg, groups, *_ in dispatches:   # (a gated update's indirect offset, if any: dispatched at full size)
            if pipe is not last:
                cp.set_pipeline(pipe)
                last = pipe
            cp.set_bind_group(0, bg)
            cp.dispatch_workgroups(*groups)
    cp.end()
    enc.copy_buffer_to_buffer(src, 0, probe, 0, 16)
    g.device.queue.submit([enc.finish()])
    probe.map_sync(g.wgpu.MapMode.READ)
    probe.unmap()
    return time.perf_counter() - t0


def cuda_seconds(fn: Callable[[], Any], reps: int = 20, warmup: int = 3, samples: int = 3) -> float:
    """PyTorch's side of a comparison: seconds per call of ``fn`` on the GPU, timed with CUDA events
    over ``reps`` back-to-back calls (the median of ``samples`` such batches, after ``warmup`` calls)."""
    import statistics

    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1000 / reps)
    return statistics.median(times)

