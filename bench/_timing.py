"""A tiny timing helper shared by the benchmarks.

Timing on a shared, noisy machine: run the contenders *interleaved* (A, B, C, A, B, C, ...)
so a burst of load from elsewhere hits all of them, time many steps per sample so the clock's
resolution does not matter, and report the median of the samples (robust to the odd slow one)
together with the spread, so a reader can see how much the numbers are worth.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable


def time_interleaved(
    contenders: dict[str, Callable[[], None]], steps: int, repeats: int, warmup: int
) -> dict[str, list[float]]:
    """Seconds per call of each contender: ``repeats`` samples, each the mean over ``steps`` calls."""
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            for _ in range(steps):
                fn()
            samples[name].append((time.perf_counter() - t0) / steps)
    return samples


def summary(samples: list[float]) -> tuple[float, float, float]:
    """(median, min, max) of the samples."""
    return statistics.median(samples), min(samples), max(samples)


def paired_ratio(num: list[float], den: list[float]) -> tuple[float, float, float]:
    """(median, min, max) of num[i] / den[i]: samples taken back to back share the load of
    the moment, so their ratio is steadier than the ratio of two medians."""
    ratios = [a / b for a, b in zip(num, den)]
    return statistics.median(ratios), min(ratios), max(ratios)
