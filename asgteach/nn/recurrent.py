"""Recurrent cells: GRUCell and LSTMCell, one time step each, with PyTorch's equations.

A recurrent network reads a sequence one step at a time and carries a *state* h from step
to step. A cell is one step: ``h_next = cell(x_t, h)``. Unrolling it over T steps is a plain
Python loop, and the graph it builds is T copies of the cell's nodes sharing ONE set of
parameters (weight sharing again: one parameter node, T consumers)::

    cell = at.nn.GRUCell(8, 16, name="gru")
    h = None                       # no state yet: the cell starts from zeros, as PyTorch's does
    for t in range(T):             # x: (B, T, 8)
        h = cell(x[:, t], h)

Backpropagation through time is nothing special: ``at.grad`` walks the unrolled graph back
from the loss, step T to step 1, adding up each step's contribution to the shared weights.

**Why gates?** In a plain RNN, ``h' = tanh(x W_x + h W_h + b)``, the gradient that reaches
step 1 from step T is a product of T Jacobians ``diag(1 - h'^2) W_h``. Multiply T matrices
whose "size" is below 1 and the product vanishes; above 1 and it explodes — the network
cannot learn anything that spans many steps. Gated cells add a path on which the state is
*copied* rather than squashed:

* LSTM: ``c' = f ⊙ c + i ⊙ g``. The cell state c is updated by an ADDITION, so
  ``∂c'/∂c = f`` — a diagonal matrix with no weight matrix and no tanh derivative in it.
  While the forget gate f stays near 1 the gradient flows back along c almost unchanged
  (the "constant error carousel" of Hochreiter & Schmidhuber, 1997).
* GRU: ``h' = (1 - z) ⊙ n + z ⊙ h``. Where the update gate z is near 1 the old state is
  carried over as it is, and ``∂h'/∂h`` contains the term ``diag(z)``: again a path of
  gates only, no squashing.

The gates themselves are learned, so the network decides, per unit and per step, what to
keep and what to overwrite. This is the same idea as a residual connection in a transformer
(``x + f(x)``): give the gradient an additive road around the nonlinearity.

**Layout.** Parameters follow PyTorch's names and gate order, stored transposed as in our
``Linear`` (so the graph reads ``x @ W`` with no transpose node): for G gates of size H,

* ``weight_ih`` (input_size, G*H), ``weight_hh`` (H, G*H), ``bias_ih`` and ``bias_hh`` (G*H,)
* gate order GRU: r, z, n (G = 3); LSTM: i, f, g, o (G = 4) — column block k of a weight
  is gate k. PyTorch's ``weight_ih`` is our ``weight_ih.T``.

Each weight is used by ONE matmul for all gates together (one big product is faster than
three or four small ones), and the result is sliced into gates along the last axis.
Default init, as PyTorch: every weight and bias ~ U(-1/sqrt(H), 1/sqrt(H)).
"""

from __future__ import annotations

import math

import numpy as np

from .. import ops
from ..graph import user_source
from ..shapes import ShapeError
from ..tensor import Tensor
from .module import Module

__all__ = ["GRUCell", "LSTMCell"]


class _RecurrentCell(Module):
    """What GRUCell and LSTMCell share: the four parameters, the shape checks, the gate slices."""

    gates = 1  # G: how many gates are packed side by side in each weight's columns

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, name: str | None = None) -> None:
        super().__init__(name)
        for what, size in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size < 1:
                raise ValueError(f"{self.kind}: {what} must be a positive int, got {size!r}")
        self.input_size, self.hidden_size, self.bias = int(input_size), int(hidden_size), bias
        gh = self.gates * self.hidden_size
        # PyTorch's reset_parameters(): U(-k, k), k = 1/sqrt(hidden_size), for weights AND biases
        k = 1.0 / math.sqrt(self.hidden_size)
        self.weight_ih = self.param("weight_ih", (self.input_size, gh), "uniform", low=-k, high=k)
        self.weight_hh = self.param("weight_hh", (self.hidden_size, gh), "uniform", low=-k, high=k)
        self.bias_ih = self.param("bias_ih", (gh,), "uniform", low=-k, high=k) if bias else None
        self.bias_hh = self.param("bias_hh", (gh,), "uniform", low=-k, high=k) if bias else None

    # -- pieces of forward() -------------------------------------------------------------------
    def _check_input(self, x: Tensor) -> tuple[int, ...]:
        """The batch shape of ``x``: () for one example (input_size,), (B,) for (B, input_size)."""
        if not isinstance(x, Tensor):
            raise TypeError(f"{self.kind} '{self.name}': x must be a Tensor (at.input(...)), got {type(x).__name__}")
        n = self.input_size
        if x.ndim not in (1, 2) or x.shape[-1] != n:
            hint = f"feed x as (batch, {n}), or ({n},) for a single example"
            if x.ndim == 3 and x.shape[-1] == n:  # (B, T, input): a whole sequence handed to one step
                hint = (f"a cell is ONE time step: loop over the sequence and pass one step at a time, "
                        f"e.g. h = {self.name}(x[:, t], h) for t in range({x.shape[1]})")
            raise ShapeError(self.kind, f"layer '{self.name}' (input_size={n}) expects x of shape (batch, {n}) "
                                        f"or ({n},), got {x.shape}", [x.shape], user_source(), hint=hint)
        return x.shape[:-1]

    def _check_state(self, what: str, s: Tensor | None, batch: tuple[int, ...], x: Tensor) -> Tensor:
        """The state ``s`` (h or c) after checking its shape; zeros, as PyTorch, when it is None."""
        want = batch + (self.hidden_size,)
        if s is None:
            return ops.constant(np.zeros(want), name=f"{self.name}.{what}0", graph=self.graph)
        if not isinstance(s, Tensor):
            raise TypeError(f"{self.kind} '{self.name}': {what} must be a Tensor, got {type(s).__name__}")
        if s.shape != want:
            raise ShapeError(self.kind, f"layer '{self.name}' (hidden_size={self.hidden_size}) expects {what} of "
                                        f"shape {want} to go with x of shape {x.shape}, got {s.shape}",
                             [x.shape, s.shape], user_source(),
                             hint=f"{what} holds one row of {self.hidden_size} numbers per example of x")
        return s

    def _project(self, v: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        """``v @ weight + bias``: every gate's pre-activation at once, (..., G*H)."""
        y = v @ weight
        return y + bias if bias is not None else y

    def _gate(self, packed: Tensor, k: int) -> Tensor:
        """Column block ``k`` of a (..., G*H) tensor: gate k's part (PyTorch's ``chunk``)."""
        h = self.hidden_size
        return packed[..., k * h:(k + 1) * h]


class GRUCell(_RecurrentCell):
    """One step of a gated recurrent unit (Cho et al., 2014): ``h_next = GRUCell(x, h)``.

    With gates r (reset), z (update) and n (new), exactly as ``torch.nn.GRUCell``::

        r  = σ(x W_ir + b_ir + h W_hr + b_hr)
        z  = σ(x W_iz + b_iz + h W_hz + b_hz)
        n  = tanh(x W_in + b_in + r ⊙ (h W_hn + b_hn))
        h' = (1 - z) ⊙ n + z ⊙ h

    z chooses, per unit, between keeping the old state (z ≈ 1: h' ≈ h, and the gradient
    passes back through ``z ⊙ h`` untouched) and writing the candidate n. r decides how much
    of the old state the candidate may look at. Note r multiplies ``h W_hn + b_hn`` — the
    hidden part only, bias included — so the input and hidden products stay separate:
    ``gi = x @ weight_ih + bias_ih`` and ``gh = h @ weight_hh + bias_hh``, each (..., 3H),
    sliced into [r | z | n].

    x is (batch, input_size) or (input_size,); h has x's batch shape with hidden_size last,
    and defaults to zeros. Parameters: ``weight_ih`` (input_size, 3H), ``weight_hh`` (H, 3H),
    ``bias_ih``, ``bias_hh`` (3H,) — PyTorch's, transposed. Init U(-1/√H, 1/√H).
    """

    kind = "GRUCell"
    gates = 3

    def forward(self, x: Tensor, h: Tensor | None = None) -> Tensor:
        h = self._check_state("h", h, self._check_input(x), x)
        gi = self._project(x, self.weight_ih, self.bias_ih)   # [x W_ir + b_ir | x W_iz + b_iz | x W_in + b_in]
        gh = self._project(h, self.weight_hh, self.bias_hh)   # the same three from h
        r = ops.sigmoid(self._gate(gi, 0) + self._gate(gh, 0))
        z = ops.sigmoid(self._gate(gi, 1) + self._gate(gh, 1))
        n = ops.tanh(self._gate(gi, 2) + r * self._gate(gh, 2))
        return (1.0 - z) * n + z * h


class LSTMCell(_RecurrentCell):
    """One step of a long short-term memory cell: ``h_next, c_next = LSTMCell(x, (h, c))``.

    Gates i (input), f (forget), g (candidate) and o (output), exactly as ``torch.nn.LSTMCell``::

        [i | f | g | o] = x W_ih + b_ih + h W_hh + b_hh      (each block H wide)
        i, f, o = σ(i), σ(f), σ(o);   g = tanh(g)
        c' = f ⊙ c + i ⊙ g
        h' = o ⊙ tanh(c')

    The cell state c is the memory: f decides what to keep of it, i how much of the candidate
    g to add. Because c' is a SUM, ``∂c'/∂c = diag(f)``: along c the gradient is only scaled
    by the forget gate, never squashed by a tanh or multiplied by a weight matrix, so it
    survives many steps. (A common trick, not PyTorch's default: start ``bias_hh``'s f block
    at 1 so the cell remembers from the start.) h = o ⊙ tanh(c) is what the rest of the
    network — and the next step's gates — see.

    x is (batch, input_size) or (input_size,); h and c have x's batch shape with hidden_size
    last; the state defaults to zeros. Parameters: ``weight_ih`` (input_size, 4H),
    ``weight_hh`` (H, 4H), ``bias_ih``, ``bias_hh`` (4H,) — PyTorch's, transposed.
    Init U(-1/√H, 1/√H).
    """

    kind = "LSTMCell"
    gates = 4

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        batch = self._check_input(x)
        if state is None:
            state = (None, None)
        elif not isinstance(state, (tuple, list)) or len(state) != 2:
            raise TypeError(f"LSTMCell '{self.name}': the state must be a pair (h, c), got {type(state).__name__}; "
                            f"call it as {self.name}(x, (h, c))")
        h = self._check_state("h", state[0], batch, x)
        c = self._check_state("c", state[1], batch, x)
        gates = self._project(x, self.weight_ih, self.bias_ih) + self._project(h, self.weight_hh, self.bias_hh)
        i = ops.sigmoid(self._gate(gates, 0))
        f = ops.sigmoid(self._gate(gates, 1))
        g = ops.tanh(self._gate(gates, 2))
        o = ops.sigmoid(self._gate(gates, 3))
        c_next = f * c + i * g        # the additive path: ∂c'/∂c = f
        h_next = o * ops.tanh(c_next)
        return h_next, c_next
