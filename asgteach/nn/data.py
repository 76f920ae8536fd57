"""A small Dataset / DataLoader: batches of feeds, shuffled with a seed.

A batch is a feeds dict ``{x: X_batch, t: T_batch}``, ready for ``Trainer.fit`` or
``at.run``. Keys are whatever you gave (Tensors or names).
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

import numpy as np

__all__ = ["Dataset", "DataLoader"]


class Dataset:
    """Named arrays of equal length: ``Dataset({x: X, t: T})``; ``ds[i]`` is one example."""

    def __init__(self, arrays: Mapping[Any, Any]) -> None:
        self.arrays = {k: np.asarray(v) for k, v in arrays.items()}
        lengths = {k if isinstance(k, str) else getattr(k, "name", str(k)): len(v) for k, v in self.arrays.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"Dataset arrays must have the same length, got {lengths}")
        self.n = next(iter(lengths.values()))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> dict[Any, np.ndarray]:
        return {k: v[index] for k, v in self.arrays.items()}


class DataLoader:
    """Iterate a Dataset in batches; ``shuffle=True`` reshuffles every epoch from ``seed``.

    With ``drop_last=True`` (the default here, since a graph has fixed shapes) a final
    batch smaller than ``batch_size`` is skipped.
    """

    def __init__(self, dataset: Dataset, batch_size: int, shuffle: bool = False, seed: int = 0,
                 drop_last: bool = True) -> None:
        if batch_size < 1 or (drop_last and batch_size > len(dataset)):
            raise ValueError(f"batch_size must be between 1 and the dataset size ({len(dataset)}), got {batch_size}")
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[dict[Any, np.ndarray]]:
        n = len(self.dataset)
        order = self.rng.permutation(n) if self.shuffle else np.arange(n)
        for k in range(len(self)):
            yield self.dataset[order[k * self.batch_size:(k + 1) * self.batch_size]]
