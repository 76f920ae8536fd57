"""Explanations for the Node Inspector: what every op does, its formula and backward rule.

The texts are data, not code: ``en.toml``, ``ru.toml``, ... in this folder, one record per
op of :data:`asgteach.ops.REGISTRY`, per parameter role, per initialiser and per node
category. Adding a language is adding one file.

An op may also carry its texts itself — ``OpSpec(explain={"en": {...}, "ru": {...}})``, how an op
defined in a notebook cell explains itself — and :func:`op_record` looks there first, then in the
language file. Either way every op needs a record in every language (tests/test_explain.py).

>>> from asgteach import explain
>>> explain.explain("relu").headline
'ReLU: max(x, 0)'
>>> explain.category("reduction", lang="ru").label
'редукция'

For a parameter node the record also carries its role in the model, read from the
parameter's metadata (layer, role, initialiser) — see :mod:`asgteach.explain.roles`.
"""

from __future__ import annotations

import warnings
from typing import Any

from .loader import FALLBACK, language_name, languages, resolve_language, table
from .records import OP_FIELDS, CategoryText, InitText, OpText, RoleText
from .roles import ROLE_KEYS, fill, resolve_role

__all__ = [
    "explain", "op_record", "category", "role", "init", "labels", "languages", "language_name", "OpText", "RoleText",
    "InitText", "CategoryText", "ROLE_KEYS",
]


def _record(section: str, key: str, lang: str) -> dict[str, str]:
    """Record ``key`` of ``section`` in ``lang``, or the English one (with a warning) if it is missing."""
    rec = table(lang).get(section, {}).get(key)
    if rec is not None:
        return rec
    rec = table(FALLBACK).get(section, {}).get(key)
    if rec is None:
        raise KeyError(f"no explanation for {section[:-1]} {key!r} (not even in English): add [{section}.{key}] "
                       f"to asgteach/explain/{FALLBACK}.toml")
    if lang != FALLBACK:
        warnings.warn(f"{lang}.toml has no [{section}.{key}]; showing the English text", stacklevel=3)
    return rec


def op_record(op: str, lang: str) -> dict[str, str] | None:
    """The texts of op ``op`` in language code ``lang``: the op's own (``OpSpec.explain``), else the
    language file's ``[ops.<op>]``; None when neither has one (no fallback to English here)."""
    from ..ops import spec  # late: the ops import nothing from here, keep it that way

    own = (spec(op).explain or {}).get(lang)
    if own is not None:
        return own
    return table(lang).get("ops", {}).get(op) if lang in languages() else None


def _op_texts(op: str, lang: str) -> dict[str, str]:
    """Op ``op``'s record in ``lang``, or the English one (with a warning) if ``lang`` has none."""
    rec = op_record(op, lang)
    if rec is not None:
        return rec
    rec = op_record(op, FALLBACK)
    if rec is None:
        raise KeyError(f"no explanation for op {op!r} (not even in English): register it with "
                       f"explain={{'en': {{...}}}} or add [ops.{op}] to asgteach/explain/{FALLBACK}.toml")
    if lang != FALLBACK:
        from ..ops import spec

        where = f"{lang}.toml has no [ops.{op}]" if spec(op).explain is None else \
            f"op {op!r} was registered with no explain[{lang!r}]"
        warnings.warn(f"{where}; showing the English text", stacklevel=3)
    return rec


def labels(lang: str = "en") -> dict[str, str]:
    """The inspector's section titles and the notation note in ``lang``."""
    code = resolve_language(lang)
    return {**table(FALLBACK).get("labels", {}), **table(code).get("labels", {})}


def category(name: str, lang: str = "en") -> CategoryText:
    """The legend entry of category ``name`` (see ``asgteach.ops.CATEGORIES``)."""
    code = resolve_language(lang)
    rec = _record("categories", name, code)
    return CategoryText(name, code, rec["label"], rec["what"])


def init(name: str, lang: str = "en", args: dict[str, Any] | None = None) -> InitText:
    """How initialiser ``name`` (see ``asgteach.ops.leaves.KNOWN_INITS``) draws its numbers."""
    code = resolve_language(lang)
    rec = table(code).get("inits", {}).get(name) or table(FALLBACK).get("inits", {}).get(name)
    if rec is None:  # an initialiser nobody has written about yet: say its name, no more
        return InitText(name, code, name, "", "", dict(args or {}))
    return InitText(name, code, rec["headline"], rec["what"], rec["formula"], dict(args or {}))


def role(node: Any, lang: str = "en") -> RoleText:
    """The role of parameter ``node`` (a Node or Tensor) in its layer, with its metadata filled in."""
    node = getattr(node, "node", node)
    code = resolve_language(lang)
    meta = dict(getattr(node, "meta", {}) or {})
    key = resolve_role(meta)
    rec = _record("roles", key, code)
    init_name = meta.get("init")
    init_text = init(init_name, code, meta.get("init_args")) if init_name else None
    values = {
        "name": str(node.name),
        "shape": str(tuple(node.shape)),
        "layer": str(meta.get("layer") or node.name),
        "init": init_text.summary if init_text else "?",
    }
    return RoleText(key, code, *(fill(rec[f], values) for f in ("headline", "what", "formula", "why", "pitfalls")),
                    init=init_text)


def explain(op_or_node: Any, lang: str = "en") -> OpText:
    """What the inspector shows for an op name, a graph Node or a Tensor, in ``lang``.

    An unknown language warns (naming the known ones) and falls back to English. For a
    parameter node the result's ``role`` says what the parameter does in its layer and
    how it was initialised.
    """
    code = resolve_language(lang)
    node = getattr(op_or_node, "node", op_or_node)  # a Tensor -> its Node
    op = node if isinstance(node, str) else node.op
    from ..ops import spec  # late: the ops import nothing from here, keep it that way

    op_spec = spec(op)  # unknown op names get the registry's "did you mean" error
    rec = _op_texts(op, code)
    missing = [f for f in OP_FIELDS if not isinstance(rec.get(f), str)]
    if missing:
        raise KeyError(f"the {code!r} explanation of op {op!r} has no {', '.join(missing)}")
    the_role = role(node, code) if op == "parameter" and not isinstance(node, str) else None
    return OpText(
        op, code, category(op_spec.category, code), rec["headline"], rec["what"], rec["formula"], rec["vjp"],
        rec["why"], rec["pitfalls"], role=the_role,
    )
