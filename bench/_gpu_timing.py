"""Timing recorded GPU work without the backend's own run(): shared by the GPU benchmarks.

``time_dispatches`` records ``repeats`` passes over a list of (pipeline, bind group,
workgroups) into ONE compute pass, submits it, and waits by mapping a small buffer that
a final copy wrote (``queue.on_submitted_work_done_sync`` is broken in wgpu-py 0.32).
Differences of two repeat counts cancel the fixed submit/map cost.

``KernelClock`` + ``measure`` time ONE kernel so that the figure is real (bench/gemm_shapes.py, matmul_gpu.py):
the batch recorded before the clock starts, long enough to last ``target_s``, its plain time reported next to
the difference, the GPU's own timestamps where the device has them; ``shown_rate`` refuses a rate above the
device's float32 peak (``FP32_PEAK_TFLOPS``).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
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


# ---------------------------------------------------------------------------------------------------------------
# Timing one kernel so that the figure is real (issue 37, item 5).
#
# ``time_dispatches`` above records the passes inside the timed interval and is differenced over 3 and 23 repeats:
# for a kernel of ~30 us the two batches differ by well under a millisecond while the submit-and-wait around each
# moves by about as much, so a difference can come out several times too small (bench/gemm_shapes.py once printed
# 237 TFLOP/s for a 1-GFLOP product on an H200, whose float32 peak is 67). Below, the batch is recorded BEFORE the
# clock starts (only submit -> completion is timed), it is made long enough to last ``target_s`` (``autorange``),
# and every result carries the plain time of one long batch next to the difference: where the two agree, the
# fixed cost is small against what was measured. The arithmetic is pure (tests/test_bench_timing.py).
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Timing:
    """One kernel's time per call, three ways.

    ``seconds``: the difference of a long and a short batch over their difference in calls (median of the
    pairs): fixed costs cancel. ``one_batch``: the long batch's plain time over its calls (median): fixed costs
    included, so never much below ``seconds``. ``gpu``: the GPU's own timestamps at the start and end of the
    long batch's pass, over its calls (median), where the device offers them. ``reps``/``short``: calls in the
    long and the short batch; ``batch_s``: the long batch's median wall time (for PyTorch: the CUDA events'
    span of the long batch).
    """

    seconds: float
    one_batch: float
    reps: int
    short: int
    batch_s: float
    gpu: float | None = None

    @property
    def agreement(self) -> float:
        """``one_batch / seconds``: 1.0 when the fixed cost is nothing against the long batch; the issue's bar
        for a figure to stand is within 10 % of 1."""
        return self.one_batch / self.seconds


def autorange(batch: Callable[[int], float], target_s: float, start: int = 1, most: int = 1 << 16) -> tuple[int, float]:
    """(calls, seconds) of the first batch that lasts at least ``target_s`` (or has ``most`` calls).

    ``batch(n)`` times n calls. The count grows by at least 2x and at most 64x a step, aiming 20 % past the
    target from the last batch's time per call (which overestimates the kernel while fixed costs dominate,
    so the aim falls short and the loop goes round again rather than overshooting)."""
    reps = max(1, start)
    while True:
        t = batch(reps)
        if t >= target_s or reps >= most:
            return reps, t
        aim = math.ceil(reps * 1.2 * target_s / t) if t > 0 else reps * 64
        reps = min(most, max(2 * reps, min(64 * reps, aim)))


def measure(batch: Callable[[int], float], target_s: float = 0.02, pairs: int = 5,
            gpu_of_last: Callable[[], float | None] | None = None) -> Timing:
    """Time one kernel by ``batch(n)`` (seconds for n calls): ``autorange`` to ``target_s``, then ``pairs``
    pairs of a short batch (a quarter of the calls) and the long one. ``gpu_of_last()``, if given, returns the
    GPU-timestamped seconds of the batch just run (or None)."""
    reps, _ = autorange(batch, target_s)
    reps = max(reps, 4)
    short = max(1, reps // 4)
    diffs, plain, gpu = [], [], []
    for _ in range(max(1, pairs)):
        lo = batch(short)
        hi = batch(reps)
        g = gpu_of_last() if gpu_of_last else None
        diffs.append((hi - lo) / (reps - short))
        plain.append(hi)
        if g is not None:
            gpu.append(g / reps)
    return Timing(statistics.median(diffs), statistics.median(plain) / reps, reps, short,
                  statistics.median(plain), statistics.median(gpu) if gpu else None)


# --- the device's float32 peak: no timing may claim more -------------------------------------------------------

#: Dense float32 peak WITHOUT tensor cores (FMA = 2 FLOP, boost clock), TFLOP/s, by the device's name (matched
#: case-insensitively as a substring, longest key first). Sources: NVIDIA H200 datasheet (nvidia.com/h200,
#: "FP32 67 TFLOPS" SXM, "60 TFLOPS" NVL); NVIDIA H100 datasheet (nvidia.com/h100, FP32 67 SXM, 51 PCIe, 60 NVL;
#: nvidia-smi names the SXM part "NVIDIA H100 80GB HBM3"); NVIDIA A100 datasheet (FP32 19.5); NVIDIA L40S, L40 and
#: L4 datasheets (91.6, 90.5, 30.3). Each agrees with SMs x FP32 lanes x 2 x boost clock, e.g. H100/H200 SXM:
#: 132 x 128 x 2 x 1.98 GHz = 66.9 (``computed_peak_tflops``). Not TF32: the benches turn TF32 off.
FP32_PEAK_TFLOPS = {
    "H200 NVL": 60.0, "H200": 67.0,
    "H100 NVL": 60.0, "H100 PCIe": 51.0, "H100": 67.0,
    "A100": 19.5, "L40S": 91.6, "L40": 90.5, "L4": 30.3,
}

#: float32 FMA lanes per multiprocessor by compute capability: CUDA C++ Programming Guide, "Arithmetic
#: Instructions", throughput of 32-bit floating-point add, multiply, multiply-add (results per clock per SM)
FP32_LANES_PER_SM = {(6, 0): 64, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64,
                     (6, 1): 128, (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128}


def table_peak_tflops(name: str, table: dict[str, float] | None = None) -> float | None:
    """The listed float32 peak of the device called ``name``, or None when no key is in the name."""
    table = FP32_PEAK_TFLOPS if table is None else table
    low = name.lower()
    for key in sorted(table, key=len, reverse=True):
        if key.lower() in low:
            return table[key]
    return None


def computed_peak_tflops(sms: int, capability: tuple[int, int], max_sm_mhz: float) -> float | None:
    """SMs x FP32 lanes per SM x 2 FLOP per FMA x the highest SM clock, in TFLOP/s (None for an unknown
    compute capability)."""
    lanes = FP32_LANES_PER_SM.get(tuple(capability))
    return None if lanes is None else sms * lanes * 2 * max_sm_mhz * 1e6 / 1e12


def shown_rate(flops: float, seconds: float, peak_tflops: float | None, width: int = 6) -> tuple[str, bool]:
    """``flops / seconds`` in TFLOP/s as ``width`` characters, and whether it was refused.

    A rate above ``peak_tflops`` is impossible: it is not printed (the marker ``>peak``, right-aligned) and the
    caller says that the timing was below resolution. No time (NaN) prints ``-``. With no peak known, nothing
    can be refused."""
    if not seconds == seconds or seconds <= 0:
        return f"{'-':>{width}}", seconds == seconds and seconds <= 0
    rate = flops / seconds / 1e12
    if peak_tflops is not None and rate > peak_tflops:
        return f"{'>peak':>{width}}", True
    return f"{rate:{width}.2f}", False


def max_sm_clock_mhz(index: int = 0) -> float | None:
    """The GPU's highest SM clock from ``nvidia-smi`` (None without it)."""
    import subprocess

    try:
        cmd = ["nvidia-smi", f"--id={index}", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout
        return float(out.strip().splitlines()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


# --- on the device: a recorded batch, timed from submit to completion ------------------------------------------

def enable_timestamps() -> None:
    """Before the process's wgpu device exists: have it ask for ``timestamp-query`` where the adapter offers it
    (asgteach's device asks for no features; the bench then reads the GPU's own clock at each pass's start and end).
    Wraps wgpu-py's ``GPUAdapter.request_device_sync``; nothing else changes."""
    from wgpu.backends.wgpu_native import _api

    cls = _api.GPUAdapter
    if getattr(cls.request_device_sync, "_asg_timestamps", False):
        return
    original = cls.request_device_sync

    def request_device_sync(self, **kw):
        if "timestamp-query" in self.features:
            kw["required_features"] = sorted({*kw.get("required_features", ()), "timestamp-query"})
        return original(self, **kw)

    request_device_sync._asg_timestamps = True
    cls.request_device_sync = request_device_sync


class KernelClock:
    """Times ONE dispatch (pipeline, bind group, workgroups) repeated n times in one pass of one command buffer,
    recorded before the clock starts; waits on a 16-byte copy of ``src`` into a mappable buffer. With
    ``timestamp-query`` on the device, the pass also writes the GPU's clock at its start and end."""

    def __init__(self, g: Any, dispatch: tuple[Any, ...], src: Any):
        self.g, self.dispatch, self.src = g, dispatch, src
        self.probe = probe_buffer(g)
        self.query = None
        if "timestamp-query" in g.device.features:
            from wgpu.backends.wgpu_native import _api

            usage = g.wgpu.BufferUsage
            self.query = g.device.create_query_set(type="timestamp", count=2)
            self.resolved = g.device.create_buffer(size=16, usage=usage.QUERY_RESOLVE | usage.COPY_SRC)
            self.stamps = g.device.create_buffer(size=16, usage=usage.MAP_READ | usage.COPY_DST)
            self.period_ns = float(_api.libf.wgpuQueueGetTimestampPeriod(g.device.queue._internal))
        self.last_gpu: float | None = None

    def record(self, n: int) -> Any:
        pipe, bg, groups = self.dispatch[:3]
        enc = self.g.device.create_command_encoder()
        stamps = {"query_set": self.query, "beginning_of_pass_write_index": 0, "end_of_pass_write_index": 1}
        cp = enc.begin_compute_pass(timestamp_writes=stamps if self.query is not None else None)
        cp.set_pipeline(pipe)
        cp.set_bind_group(0, bg)
        for _ in range(n):
            cp.dispatch_workgroups(*groups)
        cp.end()
        enc.copy_buffer_to_buffer(self.src, 0, self.probe, 0, 16)
        if self.query is not None:
            enc.resolve_query_set(self.query, 0, 2, self.resolved, 0)
            enc.copy_buffer_to_buffer(self.resolved, 0, self.stamps, 0, 16)
        return enc.finish()

    def __call__(self, n: int) -> float:
        """Seconds from submitting n recorded calls to seeing them done (recording not included)."""
        commands = self.record(n)
        read = self.g.wgpu.MapMode.READ
        t0 = time.perf_counter()
        self.g.device.queue.submit([commands])
        self.probe.map_sync(read)
        t = time.perf_counter() - t0
        self.probe.unmap()
        if self.query is not None:
            self.stamps.map_sync(read)
            begin, end = memoryview(self.stamps.read_mapped()).cast("Q")[:2]
            self.stamps.unmap()
            self.last_gpu = (end - begin) * self.period_ns * 1e-9 if end > begin else None
        return t

    def gpu_of_last(self) -> float | None:
        return self.last_gpu


def cuda_measure(fn: Callable[[], Any], target_s: float = 0.02, pairs: int = 5, warmup: int = 3) -> Timing:
    """PyTorch's side, timed like ours: ``measure`` over batches of n back-to-back calls, each batch one CUDA graph
    (captured once per n, then replayed between two CUDA events), so that no call waits for Python to launch it.
    Launched one by one from Python, a ~30 us batched product takes 25-40 us of host time per call on the H200's
    machine: the events then measure the launch rate, not cuBLAS (issue 37, item 5)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):   # warm up (cuBLAS handles, workspaces) off the capturing stream, as torch asks
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graphs: dict[int, Any] = {}

    def batch(n: int) -> float:
        if n not in graphs:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(n):
                    fn()
            graphs[n] = graph
            graph.replay()   # the first replay uploads the graph
            torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graphs[n].replay()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1000

    try:
        return measure(batch, target_s, pairs)
    finally:
        graphs.clear()
        torch.cuda.empty_cache()
