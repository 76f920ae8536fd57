"""Trainer: turn a loss into a compiled training step and run it.

``Trainer(loss, optimizer=at.optim.Adam(lr=0.05))`` does, once:

1. finds the parameters the loss depends on and draws their first values (seeded);
2. appends the backward graph (``at.grad(loss, params)``);
3. appends the optimizer's update rule (new parameter values as graph ops);
4. compiles ONE plan whose outputs are the loss, the new parameters and the new
   optimizer state.

Then every step of ``fit`` is a single ``plan.run``: feed the batch, the current
parameters and state, the learning rate and step number; keep what comes out.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..autograd import grad
from ..backends import compile as _compile
from ..backends.common import resolve_feeds
from ..ops.leaves import input as _input
from ..plots import LossChart  # a leaf (matplotlib only): the Trainer needs none of the notebook widgets
from ..tensor import Tensor
from .init import initial_values
from .optim import ConstantLR, Optimizer

__all__ = ["Trainer", "WeightsFileError"]


class WeightsFileError(ValueError):
    """A weights file is unreadable, or does not match the model (names the tensor and shapes)."""


class Trainer:
    """Train the parameters of ``loss`` with ``optimizer`` on a backend ("numpy", "wgpu" or "auto")."""

    def __init__(
        self,
        loss: Tensor,
        optimizer: Optimizer,
        backend: str = "numpy",
        seed: int = 0,
        scheduler: Callable[[float, int], float] | None = None,
        dtype: Any = np.float32,
        initial: Mapping[str, Any] | None = None,
    ) -> None:
        if loss.shape != ():
            raise ValueError(f"Trainer: the loss must be a scalar, got shape {loss.shape} (use at.mean or at.sum)")
        self.loss, self.optimizer, self.backend = loss, optimizer, backend
        self.graph = g = loss.graph
        self.dtype = np.dtype(dtype)
        self.scheduler = scheduler or ConstantLR()
        self.rng = np.random.default_rng(seed + 1)  # dropout masks; seed itself draws the initial weights
        ancestors = [g.nodes[i] for i in g.ancestors([loss.node_id])]
        self.param_tensors = [Tensor(g, n.id) for n in ancestors if n.op == "parameter"]
        if not self.param_tensors:
            raise ValueError("Trainer: the loss depends on no parameters; nothing to train")
        _check_unique_names(self.param_tensors)
        self.random_inputs = [n for n in ancestors if n.op == "input" and "random" in n.meta]
        # The first values are numpy work (random draws, a cast to float32) that lets go of the GIL: they
        # are drawn on a second thread while this one builds the backward and optimizer graphs and the plan.
        params, dtype_ = self.param_tensors, self.dtype

        def draw() -> dict[int, np.ndarray]:
            values = initial_values(params, seed=seed, overrides=initial)
            return {t.node_id: values[t.name].astype(dtype_) for t in params}

        first = _Background(draw)
        try:
            self.grads = grad(loss, self.param_tensors)
            with g.phase("backward", update=optimizer.name):
                self.lr_input = _input(f"{optimizer.name}.lr", (), graph=g)
                self.step_input = _input(f"{optimizer.name}.step", (), graph=g)
                self.update = optimizer.build(self.param_tensors, self.grads, self.lr_input, self.step_input)
            self._outputs = [loss, *self.update.new_params, *self.update.state_out]
            self._plan = _compile(self._outputs, backend)
            self._targets = [t.node_id for t in (*self.param_tensors, *self.update.state_in)]
            # A GPU plan can keep parameters and optimizer state on the device: after each run
            # it copies the new values over the old ones there, so a step uploads only the batch.
            self._device_held = hasattr(self._plan, "bind_updates")
            if self._device_held:
                self._plan.bind_updates(dict(zip(self._targets, (t.node_id for t in self._outputs[1:]))))
        except BaseException:
            first.result()   # a bad initial value was the first error before it moved to a thread: still is
            raise
        self._values: dict[int, np.ndarray] = first.result()
        for s, init in zip(self.update.state_in, self.update.state_init):   # (the Update is ours alone: no copy)
            self._values[s.node_id] = np.asarray(init, dtype=self.dtype)
        self._upload_values = True   # the device copy must be (re)written from self._values
        self._stale = False          # self._values is behind the device copy
        self.step = 0
        self.history: list[float] = []

    # -- the values -------------------------------------------------------------------------
    @property
    def plan(self) -> Any:
        """The compiled training step: outputs are [loss, new parameters..., new optimizer state...]."""
        return self._plan

    @property
    def params(self) -> dict[str, np.ndarray]:
        """Current parameter values by name (copies)."""
        self._sync()
        return {t.name: self._values[t.node_id].copy() for t in self.param_tensors}

    def held_values(self) -> dict[int, np.ndarray]:
        """{node id: value} for everything the Trainer feeds besides your data: parameters,
        optimizer state, and dropout masks in evaluation mode (all ones). Views and tools
        use it to run other outputs of the graph with the current weights."""
        self._sync()
        return {**self._values, **self._random_feeds(False)}

    def _sync(self) -> None:
        """Fetch parameters and optimizer state from the device when they changed there."""
        if self._device_held and self._stale:
            held = self._plan.read_params()
            for nid in self._targets:
                self._values[nid] = held[self.graph.nodes[nid].name].astype(self.dtype)
            self._stale = False

    def _cast(self, feeds: Mapping[Any, Any]) -> dict[int, Any]:
        out = {}
        for nid, v in resolve_feeds(self.graph, feeds).items():
            a = np.asarray(v)
            out[nid] = a.astype(self.dtype) if a.dtype.kind == "f" and a.dtype != self.dtype else a
        return out

    def _random_feeds(self, training: bool) -> dict[int, np.ndarray]:
        out = {}
        for n in self.random_inputs:
            if n.meta["random"] == "dropout":
                p = n.meta["p"]
                if training:
                    keep = self.rng.random(n.shape) >= p
                    out[n.id] = (keep / (1.0 - p)).astype(self.dtype)
                else:
                    out[n.id] = np.ones(n.shape, self.dtype)
        return out

    # -- training -----------------------------------------------------------------------------
    def train_step(self, feeds: Mapping[Any, Any]) -> float:
        """One step: forward, backward and update in a single plan run. Returns the loss."""
        lr = self.scheduler(self.optimizer.lr, self.step)
        held = self._values if (self._upload_values or not self._device_held) else {}
        all_feeds = {**self._cast(feeds), **self._random_feeds(True), **held,
                     self.lr_input.node_id: np.asarray(lr, self.dtype),
                     self.step_input.node_id: np.asarray(self.step + 1, self.dtype)}
        outs = self._plan.run(all_feeds)
        if self._device_held:
            self._upload_values, self._stale = False, True
        else:
            for nid, value in zip(self._targets, outs[1:]):
                self._values[nid] = value
        self.step += 1
        loss = float(outs[0])
        self.history.append(loss)
        return loss

    def fit(
        self,
        data: Mapping[Any, Any] | Iterable[Mapping[Any, Any]],
        steps: int | None = None,
        epochs: int | None = None,
        progress: bool = True,
        callback: Callable[[int, float], Any] | None = None,
        chart: bool = False,
    ) -> list[float]:
        """Train on ``data``: one feeds dict (full batch, ``steps`` times) or an iterable of
        batches such as a DataLoader (``epochs`` passes, or ``steps`` batches).

        Returns the losses of the steps run in this call. ``progress`` shows a tqdm bar
        (notebook or terminal); ``callback(step, loss)`` is called after every step;
        ``chart=True`` draws a live loss chart in a notebook.
        """
        from tqdm.auto import tqdm

        if isinstance(data, Mapping):
            n = steps if steps is not None else 100
            batches: Iterable[Mapping[Any, Any]] = (data for _ in range(n))
        else:
            if steps is None:
                epochs = epochs or 1
                length = len(data) if hasattr(data, "__len__") else None  # type: ignore[arg-type]
                n = None if length is None else epochs * length
                batches = (b for _ in range(epochs) for b in data)
            else:
                n = steps
                batches = _cycle(data, steps)
        live = LossChart() if chart else None
        losses: list[float] = []
        bar = tqdm(total=n, disable=not progress or os.environ.get("ASGTEACH_NO_PROGRESS") == "1",
                   desc="training", unit="step", leave=True)
        try:
            for batch in batches:
                loss = self.train_step(batch)
                losses.append(loss)
                bar.update(1)
                if len(losses) % 10 == 0 or len(losses) == n:
                    bar.set_postfix(loss=f"{loss:.4g}")
                if callback is not None:
                    callback(self.step, loss)
                if live is not None:
                    live.update(self.history)
        finally:
            bar.close()
            if live is not None:
                live.update(self.history, final=True)
        return losses

    # -- using the trained model ------------------------------------------------------------------
    def run(self, tensors: Sequence[Tensor], feeds: Mapping[Any, Any] | None = None) -> list[np.ndarray]:
        """Values of ``tensors`` with the current parameters (evaluation mode: no dropout)."""
        tensors = list(tensors)
        self._sync()
        plan = _compile(tensors, self.backend)
        return plan.run({**self._cast(feeds or {}), **self._random_feeds(False), **self._values})

    # -- weights files ------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write the parameters to a safetensors file (names -> arrays; no pickle)."""
        from safetensors.numpy import save_file

        self._sync()
        save_file({t.name: np.ascontiguousarray(self._values[t.node_id]) for t in self.param_tensors},
                  str(path), metadata={"format": "asgteach", "step": str(self.step)})

    def load(self, path: str | os.PathLike) -> None:
        """Read parameters saved by :meth:`save`; a corrupt or mismatched file is a clear error."""
        from safetensors.numpy import load_file

        try:
            tensors = load_file(str(path))
        except FileNotFoundError:
            raise
        except Exception as e:  # noqa: BLE001 - safetensors raises several types for a bad file
            raise WeightsFileError(f"{path} is not a readable safetensors weights file ({e})") from None
        expected = {t.name: t for t in self.param_tensors}
        missing = [k for k in expected if k not in tensors]
        if missing:
            raise WeightsFileError(f"{path} has no tensor {missing[0]!r} (missing: {', '.join(missing)}; "
                                   f"the file holds: {', '.join(sorted(tensors)) or 'nothing'})")
        extra = sorted(set(tensors) - set(expected))
        if extra:
            raise WeightsFileError(f"{path} holds tensors this model does not have: {', '.join(extra)}")
        for name, t in expected.items():
            arr = tensors[name]
            if arr.shape != t.shape:
                raise WeightsFileError(f"tensor {name!r} in {path} has shape {arr.shape}, but the model's "
                                       f"parameter has shape {t.shape}")
            if arr.dtype.kind != "f" or not np.all(np.isfinite(arr)):
                raise WeightsFileError(f"tensor {name!r} in {path} is not a finite float array")
        self._sync()  # keep the optimizer state current before replacing the parameters
        for name, t in expected.items():
            self._values[t.node_id] = tensors[name].astype(self.dtype)
        self._upload_values = True


class _Background:
    """``fn()`` run on a thread of its own; ``result()`` waits for it (and raises what it raised).

    Worth it for numpy work that releases the GIL while the caller does Python work. Where
    no thread can be started (a browser's Python), ``fn`` simply runs here and now.
    """

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._out: tuple[bool, Any] | None = None
        self._thread: threading.Thread | None = threading.Thread(target=self._run, args=(fn,), daemon=True)
        try:
            self._thread.start()
        except RuntimeError:
            self._thread = None
            self._run(fn)

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._out = (True, fn())
        except BaseException as e:  # noqa: BLE001 - handed to result(), raised on the caller's thread
            self._out = (False, e)

    def result(self) -> Any:
        if self._thread is not None:
            self._thread.join()
        assert self._out is not None
        ok, value = self._out
        if not ok:
            raise value
        return value


def _check_unique_names(params: Sequence[Tensor]) -> None:
    """Two parameters of one name would share initial values and one slot in a weights file."""
    seen: dict[str, Tensor] = {}
    for t in params:
        first = seen.setdefault(t.name, t)
        if first is not t:
            raise ValueError(
                f"Trainer: the loss depends on two parameters named {t.name!r}: #{first.node_id} made at "
                f"{first.node.source} and #{t.node_id} made at {t.node.source}.\n"
                f"  (In a notebook: a layer was re-built in one cell while a loss built from the old one "
                f"is still in use.) Re-run the cell that builds the loss, or give the layers different names."
            )


def _cycle(data: Iterable[Mapping[Any, Any]], steps: int) -> Iterable[Mapping[Any, Any]]:
    done = 0
    while done < steps:
        empty = True
        for b in data:
            empty = False
            yield b
            done += 1
            if done == steps:
                return
        if empty:
            raise ValueError("Trainer.fit: the data iterable yielded no batches")
