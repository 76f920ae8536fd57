"""Which role record describes a parameter, read from its metadata — never from its name.

``at.parameter(..., layer=..., role=...)`` stores ``node.meta["layer"]`` (the layer's name,
e.g. "block0.attn") and ``node.meta["role"]``. Role records are keyed
``"<layer kind>.<role>"``: ``linear.weight``, ``layer_norm.bias``,
``attention.query.weight``, ``feed_forward.in.bias``, ``conv2d.weight``, ... (see
:data:`ROLE_KEYS`). A parameter is matched, in this order, by

1. its role, when it already is such a key (``role="attention.query.weight"``);
2. ``meta["layer_kind"]`` (the layer's class, "Linear", "LayerNorm", ...: ``at.nn`` sets it) plus
   its role — a Linear whose layer path names a FeedForward or attention block takes that
   block's role (``layer="blk.ffn.fc_in"`` -> ``feed_forward.in.weight``);
3. the words in its layer and role metadata (``layer="blocks.0.attn", role="q_weight"``
   -> attention, query, weight), using the small vocabularies below;
4. the generic ``weight`` / ``bias`` / parameter records.

Layers that want an exact match should use (1) or (2); (3) keeps hand-made parameters
(``at.parameter("w", ..., layer="fc1", role="weight")``) explained too.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

__all__ = ["ROLE_KEYS", "resolve_role", "fill"]

#: Every role record each language file must have.
ROLE_KEYS = (
    "linear.weight", "linear.bias", "layer_norm.weight", "layer_norm.bias", "embedding.weight",
    "positional.weight",
    "attention.query.weight", "attention.query.bias", "attention.key.weight", "attention.key.bias",
    "attention.value.weight", "attention.value.bias", "attention.output.weight", "attention.output.bias",
    "feed_forward.in.weight", "feed_forward.in.bias", "feed_forward.out.weight", "feed_forward.out.bias",
    "conv2d.weight", "conv2d.bias",
    "generic.weight", "generic.bias", "generic",
)

# Layer kinds, most specific first ("pos_emb" is positional, not a plain embedding).
_KINDS: tuple[tuple[str, frozenset[str]], ...] = (
    ("positional", frozenset({"pos", "positional", "position", "positions", "wpe", "learnedpositional"})),
    ("attention", frozenset({"attention", "attn", "mha", "multiheadattention", "selfattention", "selfattn"})),
    ("feed_forward", frozenset({"feedforward", "ffn", "ff", "mlpblock"})),
    ("layer_norm", frozenset({"layernorm", "ln", "lnf", "norm"})),
    ("conv2d", frozenset({"conv2d", "conv", "convolution"})),
    ("embedding", frozenset({"embedding", "embeddings", "embed", "emb", "wte", "tok", "token"})),
    ("linear", frozenset({"linear", "dense", "fc", "lin", "head", "classifier", "mlp"})),
)
_PROJECTIONS = (
    ("query", frozenset({"q", "query", "wq", "qproj"})),
    ("key", frozenset({"k", "key", "wk", "kproj"})),
    ("value", frozenset({"v", "value", "wv", "vproj"})),
    ("output", frozenset({"o", "out", "output", "wo", "oproj", "outproj"})),
)
_FF_PARTS = (
    ("in", frozenset({"in", "up", "fc1", "w1", "lin1", "linear1", "expand", "inproj"})),
    ("out", frozenset({"out", "down", "fc2", "w2", "lin2", "linear2", "contract", "outproj"})),
)
_WEIGHT = frozenset({"weight", "weights", "w", "kernel", "gamma", "scale", "gain", "table", "g"})
_BIAS = frozenset({"bias", "b", "beta", "shift"})


def _words(*texts: Any) -> list[str]:
    """Lower-case words of the metadata strings, with and without trailing digits."""
    out: list[str] = []
    for text in texts:
        if not text:
            continue
        spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", str(text))  # MultiHeadAttention -> Multi Head Attention
        parts = [p for p in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if p]
        out += parts
        out += [p.rstrip("0123456789") for p in parts if p[-1:].isdigit() and p.rstrip("0123456789")]
        joined = re.sub(r"[^a-z0-9]", "", str(text).lower())  # "multi_head_attention" -> one word
        if joined:
            out += [joined, joined.rstrip("0123456789")]
    return out


def _pick(words: list[str], table: tuple[tuple[str, frozenset[str]], ...]) -> str | None:
    for name, vocab in table:
        if any(w in vocab for w in words):
            return name
    return None


def _weight_or_bias(words: list[str]) -> str | None:
    if any(w in _BIAS for w in words):
        return "bias"
    if any(w in _WEIGHT for w in words):
        return "weight"
    return None


def resolve_role(meta: Mapping[str, Any], known: Any = ROLE_KEYS) -> str:
    """The key of the role record that describes a parameter with metadata ``meta``."""
    role = str(meta.get("role") or "")
    if role.lower() in known:
        return role.lower()
    role_words, layer_words = _words(role), _words(meta.get("layer"))
    kind = _pick(_words(meta.get("layer_kind")), _KINDS)
    path_kind = _pick(layer_words, _KINDS)
    if kind in (None, "linear") and path_kind in ("attention", "feed_forward"):
        kind = path_kind  # a Linear inside a FeedForward ("blk.ffn.fc_in") is the feed-forward's W_1
    kind = kind or path_kind or _pick(role_words, _KINDS)
    wb = _weight_or_bias(role_words) or ("weight" if kind in ("embedding", "positional") else None)
    all_words = role_words + layer_words
    if kind == "attention":
        part = _pick(role_words, _PROJECTIONS) or _pick(layer_words, _PROJECTIONS)
        kind = f"attention.{part}" if part else None
    elif kind == "feed_forward":
        part = _pick(role_words, _FF_PARTS) or _pick(all_words, _FF_PARTS)
        kind = f"feed_forward.{part}" if part else None
    if kind and wb and f"{kind}.{wb}" in known:
        return f"{kind}.{wb}"
    return f"generic.{wb}" if wb else "generic"


_PLACEHOLDER = re.compile(r"\{(name|shape|layer|init)\}")


def fill(text: str, values: Mapping[str, str]) -> str:
    """Replace ``{name}``, ``{shape}``, ``{layer}`` and ``{init}`` in ``text``.

    Only these four are touched, so any other braces (LaTeX, examples) survive as they are.
    """
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)
