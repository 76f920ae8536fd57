"""Layers, losses and training — all as graphs.

    net = at.nn.MLP([2, 8, 1], activation="tanh", name="mlp")
    loss = at.nn.mse_loss(at.sigmoid(net(x)), t)
    tr = at.Trainer(loss, optimizer=at.optim.Adam(lr=0.05))
    h = at.nn.GRUCell(4, 16, name="gru")(x_t, h)         # one step of a recurrent net
"""

from __future__ import annotations

from . import init, optim  # noqa: F401
from .attention import (  # noqa: F401
    LearnedPositionalEmbedding, MultiHeadAttention, RotaryEmbedding, SinusoidalPositionalEncoding, TransformerBlock,
    causal_mask,
)
from .conv import AvgPool2d, Conv2d, MaxPool2d  # noqa: F401
from .data import DataLoader, Dataset  # noqa: F401
from .layers import MLP, Dropout, Embedding, FeedForward, LayerNorm, Linear, get_activation  # noqa: F401
from .losses import (  # noqa: F401
    binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, huber_loss, kl_div, l1_loss, mse_loss,
    nll_loss, one_hot,
)
from .module import Module, Sequential  # noqa: F401
from .normalization import BatchNorm1d, BatchNorm2d  # noqa: F401
from .recurrent import GRUCell, LSTMCell  # noqa: F401
from .trainer import CheckpointWarning, Trainer, WeightsFileError  # noqa: F401
