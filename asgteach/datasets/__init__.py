"""Small real datasets that ship with asgteach (no downloads: classrooms are often offline).

See ``README.md`` in this folder for sources and licences.
"""

from __future__ import annotations

import gzip
from importlib import resources

import numpy as np

__all__ = ["load_digits", "load_text", "train_test_split"]


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """The 8x8 handwritten digits: images (1797, 64) as float64 in [0, 1], labels (1797,) int64."""
    with resources.files(__package__).joinpath("digits.csv.gz").open("rb") as f:
        data = np.loadtxt(gzip.open(f), delimiter=",")
    return data[:, :-1] / 16.0, data[:, -1].astype(np.int64)


def load_text() -> str:
    """Public-domain English text (the Gettysburg Address and three Shakespeare sonnets)."""
    return resources.files(__package__).joinpath("gettysburg_and_sonnets.txt").read_text(encoding="utf-8")


def train_test_split(*arrays: np.ndarray, test_fraction: float = 0.25, seed: int = 0) -> list[np.ndarray]:
    """Shuffle with ``seed`` and split every array the same way: [a_train, a_test, b_train, b_test, ...]."""
    n = len(arrays[0])
    order = np.random.default_rng(seed).permutation(n)
    cut = n - int(round(n * test_fraction))
    out = []
    for a in arrays:
        out += [a[order[:cut]], a[order[cut:]]]
    return out
