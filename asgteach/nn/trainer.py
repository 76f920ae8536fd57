"""Trainer: turn a loss into a compiled training step and run it.

``Trainer(loss, optimizer=at.optim.Adam(lr=0.05))`` does, once:

1. finds the parameters the loss depends on and draws their first values (seeded);
2. appends the backward graph (``at.grad(loss, params)``);
3. appends the optimizer's update rule (new parameter values as graph ops);
4. compiles ONE plan whose outputs are the loss, the new parameters, the new
   optimizer state and the next values of the layers' buffers (BatchNorm's running
   statistics).

Then every step of ``fit`` is a single ``plan.run``: feed the batch, the current
parameters, state and buffers, the learning rate and step number, and what the mode
decides (fresh dropout masks, BatchNorm's training flag = 1); keep what comes out.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import threading
import warnings
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..autograd import grad
from ..backends import compile as _compile
from ..backends import mode_feeds, mode_inputs, resident_training
from ..backends.common import FeedError, NumericsError, resolve_feeds
from ..backends.nonfinite import first_nonfinite
from ..ops.leaves import input as _input
from ..plots import LossChart  # a leaf (matplotlib only): the Trainer needs none of the notebook widgets
from ..progress import Progress
from ..graph import Node
from ..tensor import Tensor
from .init import initial_values
from .optim import ConstantLR, Optimizer

__all__ = ["Trainer", "WeightsFileError", "CheckpointWarning", "CHECKPOINT_VERSION"]

#: The checkpoint format ``Trainer.save`` writes (metadata "format_version"). 1: parameters only (files
#: without the key); 2: also the optimizer state, the step, the loss history, the dropout generator and
#: the buffers (BatchNorm's running statistics; a model without buffers writes none).
CHECKPOINT_VERSION = 2
_RESERVED = "@"                 # tensor names a checkpoint keeps for itself; parameters may not start with it
_STATE = "@optimizer/"          # + the optimizer state input's name: "@optimizer/adam.m[net.0.weight]"
_BUFFER = "@buffers/"           # + the buffer's name: "@buffers/bn.running_mean"
_HISTORY = "@trainer/history"   # the losses so far


class WeightsFileError(ValueError):
    """A weights file or checkpoint is unreadable, or does not match the model (names the tensor and shapes)."""


class CheckpointWarning(UserWarning):
    """A file's parameters were loaded but not its optimizer state: the optimizer starts fresh."""


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
        modal = mode_inputs(g, [loss.node_id])
        self.mode_inputs = [n for n in modal if n.supplied.kind != "running_stat"]   # fed by the mode
        self.random_inputs = [n for n in modal if n.supplied.kind == "dropout_mask"]  # (those that draw)
        # Buffers (BatchNorm's running statistics) are inputs whose next value the graph computes, as
        # optimizer state: the Trainer feeds them, and keeps the next values after each accepted step.
        self.buffer_inputs = [Tensor(g, n.id) for n in modal if n.supplied.kind == "running_stat"]
        _check_unique_names(self.buffer_inputs, "buffers")
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
            buffers_next = [Tensor(g, _next_of(t.node)) for t in self.buffer_inputs]
            self._outputs = [loss, *self.update.new_params, *self.update.state_out, *buffers_next]
            self._plan = _compile(self._outputs, backend)
            self._targets = [t.node_id for t in (*self.param_tensors, *self.update.state_in)]
            self._buffer_ids = [t.node_id for t in self.buffer_inputs]
            self._held_ids = frozenset((*self._targets, *self._buffer_ids))
            # A GPU plan can keep parameters and optimizer state on the device: after each run
            # it copies the new values over the old ones there, so a step uploads only the batch.
            # Buffers are not kept there: their next values are computed in the forward pass, before
            # the device's NaN check (wgpu_gate) that guards the updates, so they are read back with
            # the loss and fed again (a few numbers per channel), and a refused step keeps them too.
            self._resident = resident_training(self._plan)   # (common.ResidentTraining, or None: numpy)
            self._device_held = self._resident is not None
            if self._resident is not None:
                self._resident.bind_updates(dict(zip(self._targets, (t.node_id for t in self._outputs[1:]))))
        except BaseException:
            first.result()   # a bad initial value was the first error before it moved to a thread: still is
            raise
        self._values: dict[int, np.ndarray] = first.result()
        for s, init in zip(self.update.state_in, self.update.state_init):   # (the Update is ours alone: no copy)
            self._values[s.node_id] = np.asarray(init, dtype=self.dtype)
        self._values.update({b.node_id: np.full(b.shape, b.node.supplied.fill, self.dtype) for b in self.buffer_inputs})
        self._upload_values = True   # the device copy must be (re)written from self._values
        self._stale = False          # self._values is behind the device copy
        self.step = 0
        self.history: list[float] = []

    # -- the values -------------------------------------------------------------------------
    @property
    def plan(self) -> Any:
        """The compiled training step: outputs are [loss, new parameters..., new optimizer state..., next
        buffers...]."""
        return self._plan

    @property
    def resident(self) -> Any:
        """The layer that keeps the parameters and optimizer state on the plan's device between steps
        (``backends.resident_training``: wgpu's), or None (numpy: they live in host memory)."""
        return self._resident

    @property
    def params(self) -> dict[str, np.ndarray]:
        """Current parameter values by name (copies)."""
        self._sync()
        return {t.name: self._values[t.node_id].copy() for t in self.param_tensors}

    @property
    def buffers(self) -> dict[str, np.ndarray]:
        """Current buffers by name (copies): ``{"bn.running_mean": ..., "bn.running_var": ...}``.

        A buffer is a layer's state that training updates but no gradient moves: BatchNorm's
        running statistics. Each accepted training step replaces it by the value the graph
        computed (``node.supplied.next``); ``run`` (evaluation) reads it; checkpoints keep it."""
        return {t.name: self._values[t.node_id].copy() for t in self.buffer_inputs}

    def held_values(self) -> dict[int, np.ndarray]:
        """{node id: value} for everything the Trainer feeds besides your data: parameters,
        optimizer state, buffers, and what evaluation feeds (dropout masks of ones, BatchNorm's
        training flag 0). Views and tools use it to run other outputs of the graph with the
        current weights."""
        self._sync()
        return {**self._values, **self.random_feeds(False)}

    def _sync(self) -> None:
        """Fetch parameters and optimizer state from the device when they changed there."""
        if self._device_held and self._stale:
            held = self._resident.read_params()
            for nid in self._targets:
                self._values[nid] = held[self.graph.nodes[nid].name].astype(self.dtype)
            self._stale = False

    def _cast(self, feeds: Mapping[Any, Any]) -> dict[int, Any]:
        out = {}
        for nid, v in resolve_feeds(self.graph, feeds).items():
            if nid in self._held_ids:   # the Trainer's own value would silently win: say so instead
                node = self.graph.nodes[nid]
                how = ("tr.load(path)" if node.supplied is not None and node.supplied.kind == "running_stat" else
                       f"Trainer(..., initial={{'{node.name}': array}}) or tr.load(path)")
                raise FeedError(f"{node.op} '{node.name}' is held by this Trainer (its current value is used on every "
                                f"step), so a feed for it would be ignored; to set it use {how}")
            a = np.asarray(v)
            out[nid] = a.astype(self.dtype) if a.dtype.kind == "f" and a.dtype != self.dtype else a
        return out

    def random_feeds(self, training: bool) -> dict[int, np.ndarray]:
        """What the Trainer feeds the inputs the mode decides (node id -> array): a dropout layer's mask,
        a BatchNorm layer's training flag (``backends.mode_feeds``, which ``at.run`` uses too).

        In training (``training=True``, as each step does) a fresh mask from the Trainer's generator:
        each element kept with probability ``1 - p`` and scaled by ``1 / (1 - p)`` ("inverted dropout",
        so the expected value of every activation is what it is without dropout), and flag 1.0 (batch
        statistics); in evaluation (``run``) ones and 0.0 (running statistics). A draw advances the
        generator, as a step does.
        """
        return mode_feeds(self.mode_inputs, training, self.rng, self.dtype)

    # -- training -----------------------------------------------------------------------------
    def train_step(self, feeds: Mapping[Any, Any]) -> float:
        """One step: forward, backward and update in a single plan run. Returns the loss.

        A step whose loss or gradients are not finite (NaN or inf) changes nothing — parameters,
        optimizer state, the step count, the dropout generator — and raises NumericsError naming
        the node where the first such value started. Like PyTorch's GradScaler, which skips the
        optimizer's step when it finds an infinity in the gradients; on the GPU the update kernels
        are skipped on the device (``backends/wgpu_gate.py``), so a NaN batch cannot poison the
        parameters there either.
        """
        lr = self.scheduler(self.optimizer.lr, self.step)
        rng_state = self.rng.bit_generator.state if self.random_inputs else None   # (dropout draws from it)
        held = (self._values if (self._upload_values or not self._device_held) else
                {nid: self._values[nid] for nid in self._buffer_ids})   # (buffers are fed on every step)
        all_feeds = {**self._cast(feeds), **self.random_feeds(True), **held,
                     self.lr_input.node_id: np.asarray(lr, self.dtype),
                     self.step_input.node_id: np.asarray(self.step + 1, self.dtype)}
        outs = (self._resident or self._plan).run(all_feeds, on_nan="ignore")
        if self._resident is not None:   # the device checked the gradients; the loss comes back to the host
            refuse = self._resident.updates_skipped or not np.isfinite(outs[0])
        else:                   # every output here: the loss, the new parameters and the new state
            refuse = not _all_finite(outs)
        if refuse:
            try:
                self._refuse(all_feeds, outs)
            except NumericsError:
                if rng_state is not None:
                    self.rng.bit_generator.state = rng_state
                raise
        if self._device_held:
            self._upload_values, self._stale = False, True
        else:
            for nid, value in zip(self._targets, outs[1:]):
                self._values[nid] = value
        if self._buffer_ids:
            for nid, value in zip(self._buffer_ids, outs[len(outs) - len(self._buffer_ids):]):
                self._values[nid] = value
        self.step += 1
        loss = float(outs[0])
        self.history.append(loss)
        return loss

    def _refuse(self, feeds: dict[int, Any], outs: list[Any]) -> None:
        """Raise the NumericsError for a step that met a NaN or an infinity in its loss or gradients (the
        same message on every backend: the origin is searched on numpy, in the Trainer's precision).
        Returns when the loss and every gradient are finite after all (an optimizer's own arithmetic
        overflowed: that step is applied, as PyTorch applies it)."""
        self._sync()   # the parameters the step started from (the device kept them: the gate)
        feeds = {**feeds, **self._values}
        targets = [self.loss.node_id, *(g.node_id for g in self.grads)]
        found = first_nonfinite(self.graph, targets, feeds, self.dtype)
        if found is None:
            if not self._device_held:
                return
            found = ("the GPU found a gradient or the loss not finite, but numpy computes finite values from the "
                     "same feeds: a GPU kernel differs from numpy here; please report it")
        raise NumericsError(f"{found}\n  this training step was not applied: the parameters, the optimizer state"
                            f"{', the buffers' if self._buffer_ids else ''} and the step count ({self.step}) are as "
                            f"they were before it")

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

        Returns the losses of the steps run in this call. ``progress`` shows a tqdm bar in a
        notebook or a terminal, and plain lines every 10 % in a log (``asgteach.progress``);
        ``callback(step, loss)`` is called after every step; ``chart=True`` draws a live loss
        chart in a notebook.
        """
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
        bar = Progress(n, "training", "step", show=None if progress else False)  # None: ASGTEACH_NO_PROGRESS=1 wins
        try:
            for batch in batches:
                loss = self.train_step(batch)
                losses.append(loss)
                bar.update(1, loss=loss)
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
        return plan.run({**self._cast(feeds or {}), **self.random_feeds(False), **self._values})

    # -- checkpoints ------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write a checkpoint: the parameters AND all the optimizer needs to go on as if never stopped.

        One safetensors file (a JSON header, then the raw arrays: no pickle, so loading it cannot
        run code) holds

        - each parameter under its own name (``net.0.weight``);
        - each optimizer state tensor under ``@optimizer/`` + the name of its graph input
          (``@optimizer/adamw.m[net.0.weight]`` is AdamW's running mean of that weight's gradient;
          SGD keeps a ``momentum``, RMSprop a ``square_avg``). Names starting with ``@`` are the
          checkpoint's own: no parameter may use one;
        - each buffer (BatchNorm's running statistics) under ``@buffers/`` + its name
          (``@buffers/bn.running_var``);
        - ``@trainer/history``: the loss of every step so far;
        - metadata (strings): the format and its version, the optimizer's name, class and
          hyper-parameters, the step (Adam's bias correction and the learning-rate schedule both
          read it: the next step runs at ``scheduler(lr, step)``) and the state of the random
          generator that draws dropout masks.

        Why the state matters: AdamW divides by the running root mean square of each gradient. Restart
        it at zero and the next steps are different, larger ones: a "resumed" run leaves the path the
        uninterrupted one takes. The file is written beside ``path`` under a temporary name and then
        renamed over it (``os.replace``), so a crash or a full disk mid-write leaves the old file whole.
        """
        from safetensors.numpy import save as to_bytes

        for t in self.param_tensors:
            if t.name.startswith(_RESERVED):
                raise WeightsFileError(f"Trainer.save: parameter {t.name!r} (made at {t.node.source}) starts with "
                                       f"{_RESERVED!r}, which checkpoints keep for the optimizer's state; rename it")
        self._sync()
        tensors = {t.name: np.ascontiguousarray(self._values[t.node_id]) for t in self.param_tensors}
        for s in self.update.state_in:
            tensors[_STATE + s.name] = np.ascontiguousarray(self._values[s.node_id])
        for b in self.buffer_inputs:
            tensors[_BUFFER + b.name] = np.ascontiguousarray(self._values[b.node_id])
        tensors[_HISTORY] = np.asarray(self.history, np.float64)
        opt = self.optimizer
        metadata = {
            "format": "asgteach", "format_version": str(CHECKPOINT_VERSION), "step": str(self.step),
            "dtype": self.dtype.name, "optimizer": opt.name, "optimizer_class": type(opt).__name__,
            "hyperparameters": json.dumps(opt.hyperparameters()),
            # the schedule's position is what it is called with next: scheduler(base_lr, step)
            "schedule": json.dumps({"scheduler": type(self.scheduler).__name__, "base_lr": opt.lr,
                                    "step": self.step}),
            "rng": json.dumps(self.rng.bit_generator.state, default=_json_array),
        }
        _write_replacing(path, to_bytes(tensors, metadata=metadata))

    def load(self, path: str | os.PathLike) -> None:
        """Read a checkpoint written by :meth:`save` and go on from where it was saved.

        From a checkpoint of this same optimizer (same name, same state tensors) everything comes
        back: parameters, buffers, optimizer state, step (so the schedule and Adam's bias correction go on),
        the loss history and the dropout generator. Train 5 steps, save, load into a fresh Trainer
        built by the same model code, train 5 more: the 10 losses are those of 10 steps in one go
        (bit for bit on numpy). The hyper-parameters stay this Trainer's own (the file records its
        own for reference), so loading into an optimizer with a smaller ``lr`` fine-tunes.

        A file holding only parameters (a weights file, as asgteach wrote before checkpoints kept
        the optimizer state) or the state of another optimizer still loads: the parameters are
        read and the optimizer starts fresh, as in a new Trainer (zero state, step 0, so the
        schedule starts over; the history stays). A :class:`CheckpointWarning` says so.
        A model's buffers (BatchNorm's running statistics) are model state, as its parameters are:
        every file must hold them (``@buffers/<name>``).

        Every tensor is cast to the Trainer's dtype, THEN checked: names, shapes, finite values (a
        float64 1e39 is inf in float32, so it is refused, not loaded as inf). Anything wrong is a
        :class:`WeightsFileError` naming the tensor, raised before anything is assigned: a failed
        load leaves parameters, optimizer state and step as they were.
        """
        tensors, meta = _read_checkpoint(path)
        version = _meta_int(path, meta, "format_version", default=1)   # files without one held parameters only
        if version > CHECKPOINT_VERSION:
            raise WeightsFileError(f"{path} is a checkpoint of format {version}, written by a newer asgteach; this "
                                   f"one reads formats up to {CHECKPOINT_VERSION}: update asgteach")
        # 1. check everything, assign nothing
        expected = {t.name: t for t in self.param_tensors}
        buffers = {_BUFFER + t.name: t for t in self.buffer_inputs}   # (model state, like the parameters)
        expected.update(buffers)
        missing = [k for k in expected if k not in tensors]
        if missing:
            raise WeightsFileError(f"{path} has no tensor {missing[0]!r} (missing: {', '.join(missing)}; "
                                   f"the file holds: {', '.join(sorted(tensors)) or 'nothing'})")
        extra = sorted(k for k in tensors if k not in expected and not k.startswith(_STATE) and k != _HISTORY)
        if extra:
            raise WeightsFileError(f"{path} holds tensors this model does not have: {', '.join(extra)}")
        values = {t.node_id: self._checked(path, name, tensors[name], t.shape,
                                           "the model's buffer" if name in buffers else "the model's parameter")
                  for name, t in expected.items()}
        wanted = {_STATE + s.name: s for s in self.update.state_in}
        in_file = sorted(k for k in tensors if k.startswith(_STATE))
        resume = version >= 2 and meta.get("optimizer") == self.optimizer.name and set(in_file) == set(wanted)
        history: list[float] | None = None
        rng_state: dict[str, Any] | None = None
        if resume:
            values.update({s.node_id: self._checked(path, k, tensors[k], s.shape, "this Trainer's optimizer state")
                           for k, s in wanted.items()})
            step = _meta_int(path, meta, "step")
            if _HISTORY in tensors:
                h = tensors[_HISTORY]
                if h.ndim != 1 or h.dtype.kind != "f":
                    raise WeightsFileError(f"tensor {_HISTORY!r} in {path} should be a 1-d float array of losses, "
                                           f"got {h.dtype} of shape {h.shape}")
                history = [float(v) for v in h]
            if "rng" in meta:
                rng_state = self._checked_rng(path, meta["rng"])
            warning = None
        else:
            values.update({s.node_id: np.asarray(init, dtype=self.dtype)
                           for s, init in zip(self.update.state_in, self.update.state_init)})
            step = 0
            had = ("only parameters (a weights file)" if version < 2 else
                   f"a checkpoint of optimizer {meta.get('optimizer')!r} with {len(in_file)} state tensors"
                   + (f" ({in_file[0]}, ...)" if in_file else ""))
            warning = (f"{path} holds {had}, not the state of this Trainer's {self.optimizer.name!r} optimizer "
                       f"({len(wanted)} tensors). The parameters are loaded; the optimizer starts fresh (zero state, "
                       f"step 0, the schedule from its start). To resume training, load a file Trainer.save wrote for "
                       f"this optimizer.")
        # 2. every check passed: assign. Parameters and state are all replaced, so the host copy is the newest
        # (nothing to fetch from a GPU) and the device copy is rewritten from it on the next step.
        self._values.update(values)
        self.step = step
        if history is not None:
            self.history = history
        if rng_state is not None:
            self.rng.bit_generator.state = rng_state
        self._upload_values, self._stale = True, False
        if warning is not None:
            warnings.warn(warning, CheckpointWarning, stacklevel=2)

    def _checked(self, path: Any, name: str, arr: np.ndarray, shape: tuple[int, ...], what: str) -> np.ndarray:
        """``arr`` cast to the Trainer's dtype, after checking its shape and before checking it is finite:
        a float64 1e39 fits a float64 file but is inf in float32, and inf must not get into training."""
        if arr.shape != tuple(shape):
            raise WeightsFileError(f"tensor {name!r} in {path} has shape {arr.shape}, but {what} has shape "
                                   f"{tuple(shape)}")
        if arr.dtype.kind != "f":
            raise WeightsFileError(f"tensor {name!r} in {path} holds {arr.dtype}: not a finite float array")
        with np.errstate(over="ignore", invalid="ignore"):   # overflow to inf is what the check below catches
            cast = arr.astype(self.dtype)
        if not np.all(np.isfinite(cast)):
            raise WeightsFileError(f"tensor {name!r} in {path} is not a finite {self.dtype} array: it holds NaN or "
                                   f"inf, or values beyond {self.dtype}'s range (+-{np.finfo(self.dtype).max:.4g})")
        return cast

    def _checked_rng(self, path: Any, text: str) -> dict[str, Any]:
        """The dropout generator's saved state, tried on a scratch generator of the same kind first."""
        try:
            state = json.loads(text)
            type(self.rng.bit_generator)().state = state
        except Exception as e:  # noqa: BLE001 - bad JSON, another kind of generator, a malformed state
            raise WeightsFileError(f"{path}: the saved state of the dropout generator does not fit this "
                                   f"Trainer's {type(self.rng.bit_generator).__name__} ({e})") from None
        return state


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


def _all_finite(values: Sequence[Any]) -> bool:
    """Whether a step's outputs hold only finite numbers (None: kept on the device).

    One pass over each output, no temporary for the usual case: ``x . x`` is finite exactly
    when every element of x is, unless a huge finite x overflows it (then each element is
    looked at). All outputs are checked under one ``errstate`` (entering one costs about as
    much as the dot product of a small output), and the dot's scalar is tested by
    ``math.isfinite``, not by a ufunc call.
    """
    with np.errstate(all="ignore"):
        for value in values:
            if value is None or value.dtype.kind != "f" or not value.size:
                continue
            flat = value.reshape(-1)
            if not math.isfinite(flat.dot(flat)) and not np.isfinite(flat).all():
                return False
    return True


def _check_unique_names(params: Sequence[Tensor], what: str = "parameters") -> None:
    """Two parameters (or buffers) of one name would share initial values and one slot in a weights file."""
    seen: dict[str, Tensor] = {}
    for t in params:
        first = seen.setdefault(t.name, t)
        if first is not t:
            raise ValueError(
                f"Trainer: the loss depends on two {what} named {t.name!r}: #{first.node_id} made at "
                f"{first.node.source} and #{t.node_id} made at {t.node.source}.\n"
                f"  (In a notebook: a layer was re-built in one cell while a loss built from the old one "
                f"is still in use.) Re-run the cell that builds the loss, or give the layers different names."
            )


def _read_checkpoint(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """All tensors of a safetensors file and its metadata; an unreadable file is a WeightsFileError."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})
    except FileNotFoundError:
        raise
    except Exception as e:  # noqa: BLE001 - safetensors raises several types for a bad file
        raise WeightsFileError(f"{path} is not a readable safetensors weights file ({e})") from None


def _meta_int(path: Any, meta: Mapping[str, str], key: str, default: int | None = None) -> int:
    """A whole number >= 0 from a checkpoint's metadata."""
    text = meta.get(key)
    if text is None and default is not None:
        return default
    try:
        value = int(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = -1
    if value < 0:
        raise WeightsFileError(f"{path}: metadata {key!r} should be a whole number >= 0, got {text!r}")
    return value


def _json_array(a: Any) -> Any:
    """Some numpy generators keep arrays in their state: JSON holds them as lists."""
    if isinstance(a, np.ndarray):
        return a.tolist()
    raise TypeError(f"{type(a).__name__} is not JSON serializable")


def _write_replacing(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` so that no moment leaves a half-written file there.

    The bytes go to a temporary file in the same folder (so the rename below stays on one file
    system), are flushed to the disk, and ``os.replace`` then swaps the name over in one step:
    a reader, or the next run after a crash, finds the old file or the new one, never a mix.
    """
    path = os.fspath(path)
    folder, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(folder, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # (0o666 and the umask: the permissions a plain open() would give the file)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


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


def _next_of(node: Node) -> int:
    """The node computing a running statistic's value after a step (``Supplied.next``)."""
    if node.supplied is None or node.supplied.next is None:
        raise ValueError(f"input '{node.name}' is a running statistic whose next value is not in this graph (a copy "
                         f"that kept only its ancestors?): a Trainer cannot update it")
    return node.supplied.next
