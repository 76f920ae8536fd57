"""The GPU benchmarks cannot report the impossible (issue 37, item 5): the pure parts of ``bench/_gpu_timing.py``.

On an H200, ``bench/gemm_shapes.py`` once printed 237 TFLOP/s (735 % of cuBLAS) for ``16x512x256x256:TN``, four
times the chip's float32 peak: a ~30 us kernel timed as the difference of batches of 3 and 23 calls, each batch
wrapped in a submit-and-wait that moves by as much as the difference. Checked here without a GPU (and without
torch): the refusal of a rate above the device's peak, where the peak comes from, and the timing arithmetic
(``autorange``, ``measure`` and the one-batch agreement) against a simulated device with a fixed cost and jitter.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import statistics
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _load():
    """bench/_gpu_timing.py by its path (bench/ is no package); it imports only the standard library at load."""
    spec = importlib.util.spec_from_file_location("bench_gpu_timing", BENCH / "_gpu_timing.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # dataclasses look the module up while the class is made
    spec.loader.exec_module(module)
    return module


gt = _load()

# the shape the issue names: 16 x (512 x 256) @ (256 x 256), 1.07 GFLOP
FLOPS = 2.0 * 16 * 512 * 256 * 256


class FakeDevice:
    """Seconds for a batch of n calls: a fixed cost (submit + wait) that jitters from batch to batch, plus n
    times the kernel's time. The jitter is a fixed sequence, so every run of the test sees the same numbers."""

    def __init__(self, per_call: float, fixed: float, jitter: float, record_per_call: float = 0.0):
        self.per_call, self.fixed, self.record_per_call = per_call, fixed, record_per_call
        self.jitter = itertools.cycle([jitter, -jitter, 0.5 * jitter, 0.0, -0.8 * jitter, 0.9 * jitter, -0.3 * jitter])
        self.calls: list[int] = []

    def __call__(self, n: int) -> float:
        self.calls.append(n)
        return self.fixed + next(self.jitter) + n * (self.per_call + self.record_per_call)

    def gpu_of_last(self) -> float:
        return self.calls[-1] * self.per_call


# --- the peak -----------------------------------------------------------------------------------------------------

def test_the_issues_figure_is_refused():
    """237 TFLOP/s on an H200 (peak 67) is not printed: the marker instead, and the caller is told."""
    peak = gt.table_peak_tflops("NVIDIA H200")
    shown, refused = gt.shown_rate(FLOPS, FLOPS / 237e12, peak)
    assert refused and shown.strip() == ">peak" and "237" not in shown
    assert len(shown) == 6   # the column keeps its width


def test_a_rate_at_or_below_the_peak_is_printed():
    shown, refused = gt.shown_rate(FLOPS, FLOPS / 31.25e12, 67.0)
    assert not refused and shown == " 31.25"
    shown, refused = gt.shown_rate(FLOPS, FLOPS / 67e12, 67.0)   # exactly the peak: possible, printed
    assert not refused and float(shown) == pytest.approx(67.0)
    shown, refused = gt.shown_rate(FLOPS, FLOPS / 67.1e12, 67.0)
    assert refused


def test_no_time_and_no_peak():
    assert gt.shown_rate(FLOPS, float("nan"), 67.0) == ("     -", False)
    shown, refused = gt.shown_rate(FLOPS, 0.0, 67.0)   # a zero or negative difference is no time at all
    assert refused and shown.strip() == "-"
    shown, refused = gt.shown_rate(FLOPS, FLOPS / 237e12, None)   # nothing to check against: printed, not refused
    assert not refused and float(shown) == pytest.approx(237.0)


@pytest.mark.parametrize("name, peak", [
    ("NVIDIA H200", 67.0), ("NVIDIA H200 NVL", 60.0), ("NVIDIA H100 80GB HBM3", 67.0), ("NVIDIA H100 PCIe", 51.0),
    ("NVIDIA H100 NVL", 60.0), ("NVIDIA A100-SXM4-80GB", 19.5), ("NVIDIA L40S", 91.6), ("NVIDIA L40", 90.5),
    ("NVIDIA L4", 30.3), ("nvidia h200", 67.0),
])
def test_listed_peaks_by_name(name, peak):
    """The longest key in the name wins: an H200 NVL is not an H200, an L40S not an L4."""
    assert gt.table_peak_tflops(name) == peak


def test_unknown_device_has_no_listed_peak():
    assert gt.table_peak_tflops("llvmpipe (LLVM 15.0.6, 256 bits)") is None
    assert gt.table_peak_tflops("Tesla T4", {"H200": 67.0}) is None


def test_computed_peak_agrees_with_the_datasheet():
    """132 SMs x 128 lanes x 2 x 1980 MHz: the H100/H200 SXM figure, from first principles."""
    computed = gt.computed_peak_tflops(132, (9, 0), 1980)
    assert computed == pytest.approx(66.9, abs=0.05)
    assert computed == pytest.approx(gt.table_peak_tflops("NVIDIA H200"), rel=0.01)
    assert gt.computed_peak_tflops(108, (8, 0), 1410) == pytest.approx(gt.table_peak_tflops("A100"), rel=0.01)
    assert gt.computed_peak_tflops(10, (99, 9), 1000) is None


# --- the timing arithmetic ----------------------------------------------------------------------------------------

def test_autorange_reaches_the_target_without_overshooting():
    dev = FakeDevice(per_call=30e-6, fixed=200e-6, jitter=0.0)
    reps, t = gt.autorange(dev, 0.02)
    assert t >= 0.02
    assert reps * dev.per_call <= 2.5 * 0.02          # not wildly past the target
    assert dev.calls[0] == 1 and all(b >= 2 * a for a, b in zip(dev.calls, dev.calls[1:]))
    assert len(dev.calls) <= 6


def test_autorange_stops_at_most():
    reps, _ = gt.autorange(lambda n: 0.0, 1.0, most=256)
    assert reps == 256


def test_measure_recovers_a_small_kernel():
    """A 32 us kernel behind a 300 us submission that jitters by +-250 us: within 2 %, and its one-batch
    timing within the issue's 10 %."""
    dev = FakeDevice(per_call=32e-6, fixed=300e-6, jitter=250e-6)
    t = gt.measure(dev, target_s=0.02, pairs=5, gpu_of_last=dev.gpu_of_last)
    assert t.seconds == pytest.approx(32e-6, rel=0.02)
    assert abs(t.agreement - 1) < 0.10
    assert t.gpu == pytest.approx(32e-6)
    assert t.batch_s >= 0.02 and t.short == t.reps // 4
    assert FLOPS / t.seconds / 1e12 < 67.0


def test_the_old_way_could_report_the_impossible():
    """What went wrong: batches of 3 and 23 calls differenced, the recording inside the clock, on the same simulated
    device. The difference of 20 calls (0.64 ms) is the same size as the jitter, so a pair can give a time less than
    half the truth, i.e. a rate above the peak; ``measure`` on the same device does not."""
    dev = FakeDevice(per_call=32e-6, fixed=300e-6, jitter=250e-6, record_per_call=2e-6)
    old = [(dev(23) - dev(3)) / 20 for _ in range(7)]
    assert min(old) < 32e-6 / 2                       # one pair below half the truth ...
    assert gt.shown_rate(FLOPS, min(old), 67.0)[1]    # ... is a rate above the H200's peak
    new = gt.measure(dev, target_s=0.02, pairs=5)
    assert new.seconds == pytest.approx(34e-6, rel=0.03)   # (the fake's recording cost is per call, so it stays)
    assert not gt.shown_rate(FLOPS, new.seconds, 67.0)[1]


def test_agreement_flags_a_figure_that_is_mostly_fixed_cost():
    """A batch far too short for its fixed cost: the plain time per call is many times the difference, so the
    bench marks the row (and a reader sees why)."""
    dev = FakeDevice(per_call=1e-6, fixed=1e-3, jitter=0.0)
    t = gt.measure(dev, target_s=1e-9, pairs=3)       # a target the first batch already passes
    assert t.reps == 4 and t.short == 1
    assert t.seconds == pytest.approx(1e-6)
    assert t.agreement > 100


def test_timing_is_the_median_of_the_pairs():
    # autorange's one batch, then (short, long) x 3; the second long batch is hit by a spike
    values = iter([0.010, 0.010, 0.040, 0.010, 0.400, 0.010, 0.040])

    def batch(n):
        return next(values)

    t = gt.measure(batch, target_s=0.005, pairs=3)   # autorange takes the first value (0.010 >= 0.005) at n = 1
    assert t.reps == 4 and t.short == 1
    assert t.seconds == pytest.approx(statistics.median([0.03 / 3, 0.39 / 3, 0.03 / 3]))   # 0.01: the spike is out
    assert t.one_batch == pytest.approx(0.040 / 4)
    assert math.isclose(t.agreement, t.one_batch / t.seconds)
