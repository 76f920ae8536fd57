"""A graph as a JSON document, and the checks that make loading one safe (``Graph.to_json``, ``Graph.from_json``).

The format: ``{"format": "asgteach-graph", "version": 1, "name", "nodes": [...], "passes": [...]}``, one
record per node (id, op, inputs, attrs, shape, dtype, name, phase, source, meta, and a constant's value as
nested lists with its dtype). Parameter *values* are not part of it: they travel in safetensors files.

Loading trusts nothing (see :func:`load`): a graph file may have been edited by hand, written by an older
asgteach or made to do harm. This module is part of the graph unit; graph.py keeps the Graph and calls here.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

import numpy as np

from .graph import DTYPES, PHASES, Graph, GraphLoadError, Node, Supplied

__all__ = ["dump", "load", "MAX_RANK", "MAX_ELEMENTS", "CONSTANT_DTYPES"]


def dump(graph: Graph, include_constants: bool = True) -> str:
    """``graph`` as a JSON document (constants inlined as nested lists unless ``include_constants`` is False)."""
    doc: dict[str, Any] = {"format": "asgteach-graph", "version": 1, "name": graph.name, "nodes": []}
    for n in graph.nodes:
        rec = {
            "id": n.id, "op": n.op, "inputs": list(n.inputs), "attrs": n.attrs,
            "shape": list(n.shape), "dtype": n.dtype, "name": n.name, "phase": n.phase,
            "source": n.source, "meta": n.meta,
        }
        if n.supplied is not None:
            rec["supplied"] = {"kind": n.supplied.kind, "p": n.supplied.p, "fill": n.supplied.fill,
                               "next": n.supplied.next}
            if n.supplied.refuse:
                rec["supplied"]["refuse"] = n.supplied.refuse
        if include_constants and n.id in graph.constants:
            value = graph.constants[n.id]
            rec["value"] = {"dtype": str(value.dtype), "data": value.tolist()}
        doc["nodes"].append(rec)
    doc["passes"] = graph.passes
    return json.dumps(doc, default=_json_default)


def load(graph_class: type[Graph], text: str | bytes, ops: Any) -> Graph:
    """The graph of a JSON document, every node checked as :func:`asgteach.ops.apply` would have made it
    (``Graph.from_json``'s docstring says what is checked and why); ``ops`` maps op names to their OpSpec."""
    if not hasattr(ops, "get"):
        raise TypeError("known_ops maps op names to their OpSpec (the registry, asgteach.ops.REGISTRY)")
    try:
        doc = json.loads(text)
    except (ValueError, TypeError, RecursionError) as e:
        raise GraphLoadError(f"not a JSON document: {e}") from None
    _check_document(doc)
    g = graph_class(doc.get("name", "graph"), rebind=True)  # a saved default graph may hold rebound names
    try:
        for position, rec in enumerate(doc["nodes"]):
            _load_node(g, position, rec, ops)
    except RecursionError:   # an attribute nested a thousand lists deep
        raise GraphLoadError(f"node #{len(g.nodes)}: nested too deeply") from None
    for n in g.nodes:
        if n.supplied is not None and n.supplied.next is not None and n.supplied.next >= len(g.nodes):
            raise GraphLoadError(f"node #{n.id} ({n.name}): its next value, node #{n.supplied.next}, is not in the "
                                 f"graph ({len(g.nodes)} nodes)")
    g.passes = _checked_passes(doc.get("passes", []), len(g.nodes))
    g.session.rebind = False
    return g


#: the keys of a graph document and of one node record, as ``to_json`` writes them
_DOC_KEYS = frozenset({"format", "version", "name", "nodes", "passes"})
_NODE_KEYS = frozenset({"id", "op", "inputs", "attrs", "shape", "dtype", "name", "phase", "source", "meta", "value",
                        "supplied"})
_NODE_REQUIRED = _NODE_KEYS - {"meta", "value", "supplied"}
#: the most axes a loaded node may have (numpy 1 allows 32; no op here needs more than a handful)
MAX_RANK = 32
#: the most elements a loaded node may hold: 2**40 float32s are 4 TiB, more than any machine this runs on
MAX_ELEMENTS = 2**40
#: what a constant's values may be stored as, by the node's element kind: numbers and bools only
CONSTANT_DTYPES = {
    "float": ("float64", "float32", "float16", "bool"),
    "int": ("int64", "int32", "int16", "int8", "uint32", "uint16", "uint8"),
}


def _brief(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters: a hostile name must not flood the message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_count(value: Any) -> bool:
    """A JSON integer (``true`` is a bool in Python, and 2.0 a float: neither counts)."""
    return type(value) is int


def _check_document(doc: Any) -> None:
    """The envelope: a JSON object of asgteach's format, version 1, with only the keys ``to_json`` writes."""
    if not isinstance(doc, dict) or doc.get("format") != "asgteach-graph":
        raise GraphLoadError("not an asgteach graph document (missing format 'asgteach-graph')")
    unknown = sorted(set(doc) - _DOC_KEYS)
    if unknown:
        raise GraphLoadError(f"unknown key {_brief(unknown[0])} in the graph document (known: {sorted(_DOC_KEYS)})")
    if doc.get("version", 1) != 1 or type(doc.get("version", 1)) is not int:
        raise GraphLoadError(f"graph document version {_brief(doc.get('version'))}: this asgteach reads version 1")
    if not isinstance(doc.get("name", "graph"), str):
        raise GraphLoadError(f"the graph's name must be text, got {_brief(doc['name'])}")
    if not isinstance(doc.get("nodes"), list):
        raise GraphLoadError("the graph document has no list of nodes")


def _load_node(g: Graph, position: int, rec: Any, ops: Any) -> None:
    """Check one node record against everything the graph knows so far, then append it to ``g``."""
    if not isinstance(rec, dict):
        raise GraphLoadError(f"node #{position}: a node is a JSON object, got {_brief(rec)}")
    op, name, source = rec.get("op"), rec.get("name"), rec.get("source")
    where = f"node #{position} (op {_brief(op)}, name {_brief(name)}, made at {_brief(source)})"

    def bad(problem: str) -> GraphLoadError:
        return GraphLoadError(f"{where}: {problem}")

    unknown, missing = sorted(set(rec) - _NODE_KEYS), sorted(_NODE_REQUIRED - set(rec))
    if unknown:
        raise bad(f"unknown key {_brief(unknown[0])} (a node has {', '.join(sorted(_NODE_KEYS))})")
    if missing:
        raise bad(f"missing key {missing[0]!r}")
    if not _is_count(rec["id"]) or rec["id"] != position:
        raise bad(f"id {_brief(rec['id'])} at position {position}: node ids must be consecutive, from 0")
    if not isinstance(op, str) or op not in ops:
        raise bad(f"uses op {_brief(op)}, which is not registered here; register it (asgteach.ops.register) "
                  f"before loading this graph")
    for key, allowed in (("dtype", DTYPES), ("phase", PHASES)):
        if not isinstance(rec[key], str) or rec[key] not in allowed:
            raise bad(f"{key} {_brief(rec[key])} is not one of {allowed}")
    for key in ("name", "source"):
        if not isinstance(rec[key], str):
            raise bad(f"{key} must be text, got {_brief(rec[key])}")
    meta = rec.get("meta", {})
    if not isinstance(meta, dict):
        raise bad(f"meta must be a JSON object, got {_brief(meta)}")
    # An old file may hold a backward rule's shortcut mark ("this node equals layer_norm_dx(g, x, w)"), which
    # GPU plans once ran instead of the rule's nodes. A file cannot prove such a promise (an edited mark made the
    # GPU compute another gradient than numpy), and rules write none now (the GPU pass layer_norm_dx recognises
    # the rule's nodes themselves), so it is not loaded.
    meta = {k: v for k, v in meta.items() if k != "shortcut"}
    shape = _checked_shape(rec["shape"], bad)
    inputs = rec["inputs"]
    if not isinstance(inputs, list) or not all(_is_count(i) for i in inputs):
        raise bad(f"inputs must be a list of node ids, got {_brief(inputs)}")
    later = [i for i in inputs if not 0 <= i < position]
    if later:
        before = f"ids 0 to {position - 1}" if position else "there are none before the first node"
        raise bad(f"input id {later[0]} is not an earlier node: a node reads only nodes before it ({before})")
    if not isinstance(rec["attrs"], dict):
        raise bad(f"attrs must be a JSON object, got {_brief(rec['attrs'])}")
    attrs = {k: _from_json_attr(v) for k, v in rec["attrs"].items()}
    spec = ops[op]
    if spec.leaf:
        if inputs or attrs:
            raise bad(f"a {op} is a leaf: it has no inputs and no attributes")
    else:
        _check_rule(g, spec, [g.nodes[i] for i in inputs], attrs, shape, rec["dtype"], bad)
    value = None
    if "value" in rec:
        if op != "constant":
            raise bad("only a constant stores a value")
        value = _checked_value(rec["value"], shape, rec["dtype"], bad)
    supplied = _checked_supplied(rec["supplied"], op, position, bad) if "supplied" in rec else None
    node = g.add_node(op, inputs, attrs, shape, rec["dtype"], name=name, source=source, meta=meta, value=value,
                      supplied=supplied)
    node.phase = rec["phase"]


def _checked_supplied(rec: Any, op: Any, position: int, bad: Callable[[str], GraphLoadError]) -> Supplied:
    """An input the runner supplies: a known kind, a dropout probability in [0, 1), a finite first value, and a
    next value that is a LATER node (checked once all nodes are in, by :func:`_check_next`)."""
    if op != "input":
        raise bad("only an input is supplied by the runner")
    if not isinstance(rec, dict) or set(rec) - {"refuse"} != {"kind", "p", "fill", "next"}:
        raise bad(f"supplied must be an object with kind, p, fill and next (and refuse), got {_brief(rec)}")
    refuse = rec.get("refuse", "")
    if not isinstance(refuse, str):
        raise bad(f"supplied refuse must be a string, got {_brief(refuse)}")
    p, fill, nxt = rec["p"], rec["fill"], rec["next"]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (p, fill)):
        raise bad(f"supplied p and fill must be finite numbers, got {_brief(p)} and {_brief(fill)}")
    if nxt is not None and (not _is_count(nxt) or nxt <= position):
        raise bad(f"supplied next must be a later node's id, got {_brief(nxt)}")
    try:
        return Supplied(rec["kind"], float(p), float(fill), nxt, refuse)
    except (ValueError, TypeError) as e:
        raise bad(str(e)) from None


def _checked_shape(shape: Any, bad: Callable[[str], GraphLoadError]) -> tuple[int, ...]:
    """A declared shape: at most ``MAX_RANK`` sizes, each a whole number >= 0, ``MAX_ELEMENTS`` elements at most."""
    if not isinstance(shape, list) or len(shape) > MAX_RANK:
        raise bad(f"shape must be a list of at most {MAX_RANK} sizes, got {_brief(shape)}")
    wrong = [d for d in shape if not _is_count(d) or d < 0]
    if wrong:
        raise bad(f"shape {_brief(shape)} has size {_brief(wrong[0])}: sizes are whole numbers, 0 or more")
    if math.prod(shape) > MAX_ELEMENTS:
        raise bad(f"shape {_brief(shape)} holds {math.prod(shape)} elements, more than {MAX_ELEMENTS}")
    return tuple(shape)


def _check_rule(g: Graph, spec: Any, inputs: list[Node], attrs: dict[str, Any], shape: tuple[int, ...],
                dtype: str, bad: Callable[[str], GraphLoadError]) -> None:
    """What ``ops.apply`` checks when it makes the node, checked again: arity, attributes, kinds, shape rule."""
    if spec.arity is not None and len(inputs) != spec.arity:
        raise bad(f"{spec.name} takes {spec.arity} inputs, but the node lists {len(inputs)}")
    undeclared = sorted(set(attrs) - set(spec.attrs))
    if undeclared:
        raise bad(f"attribute {_brief(undeclared[0])} is not one of {spec.name}'s "
                  f"({', '.join(spec.attrs) or 'it has none'})")
    for i, n in enumerate(inputs):
        want = spec.kind_of_input(i)
        if want != "any" and n.dtype != want:
            raise bad(f"input {i} (node #{n.id}) holds {n.dtype} values, but {spec.name} needs {want} values")
    out_kind = spec.out_kind
    if out_kind == "same":
        kinds = {n.dtype for n in inputs}
        if len(kinds) > 1:
            raise bad("its inputs mix float and int values")
        out_kind = kinds.pop() if kinds else "float"
    if out_kind != dtype:
        raise bad(f"declared dtype {dtype!r}, but {spec.name} of these inputs gives {out_kind!r} values")
    in_shapes = [n.shape for n in inputs]
    try:
        rule = spec.infer(*in_shapes, **{**spec.attrs, **attrs})
        ruled = tuple(int(d) for d in rule)
    except Exception as e:  # noqa: BLE001 - a shape rule is any op's code, run on attributes nobody checked yet
        raise bad(f"its shape rule refuses inputs {in_shapes} with attributes {_brief(attrs, 200)}: "
                  f"{type(e).__name__}: {e}") from None
    if ruled != shape:
        raise bad(f"declared shape {shape}, but {spec.name}'s shape rule gives {ruled} for inputs {in_shapes} "
                  f"and attributes {_brief(attrs, 200)}")


def _checked_value(value: Any, shape: tuple[int, ...], kind: str, bad: Callable[[str], GraphLoadError]) -> np.ndarray:
    """A constant's array, made only after its data was seen to be numbers filling exactly ``shape``.

    The data is a nested list (``to_json`` writes ``array.tolist()``). Walking it level by
    level checks every row's length against the declared shape, so the array numpy makes
    afterwards holds at most as many elements as the JSON text spelt out, each a few bytes.
    """
    if not isinstance(value, dict) or set(value) != {"dtype", "data"}:
        raise bad(f"a constant's value is {{'dtype': ..., 'data': ...}}, got {_brief(value)}")
    dtype = value["dtype"]
    if not isinstance(dtype, str) or dtype not in CONSTANT_DTYPES[kind]:
        raise bad(f"a {kind} constant is stored as one of {', '.join(CONSTANT_DTYPES[kind])}, not {_brief(dtype)}")
    level = [value["data"]]
    for axis, size in enumerate(shape):
        if not all(isinstance(row, list) and len(row) == size for row in level):
            row = next(r for r in level if not (isinstance(r, list) and len(r) == size))
            raise bad(f"its data does not fill the declared shape {shape}: axis {axis} should have {size} "
                      f"items, found {_brief(row, 40)}")
        level = [item for row in level for item in row]
    if dtype == "bool":
        ok = all(type(v) is bool for v in level)
    elif kind == "int":
        info = np.iinfo(dtype)
        ok = all(type(v) is int and info.min <= v <= info.max for v in level)
    else:
        ok = all(type(v) in (int, float) for v in level)
    if not ok:
        raise bad(f"its data holds values that are not {dtype} numbers (first items: {_brief(level[:4])})")
    try:
        arr = np.array(level, dtype=dtype).reshape(shape)
    except (OverflowError, ValueError) as e:   # an integer beyond even float64's range
        raise bad(f"its data does not fit {dtype}: {e}") from None
    arr.setflags(write=False)   # like at.constant's arrays: a graph's constants are never written to
    return arr


def _checked_passes(passes: Any, n_nodes: int) -> list[Any]:
    """``graph.passes`` (the step-through view's records): every node id in them names a node of the graph."""
    if not isinstance(passes, list) or not all(isinstance(p, dict) for p in passes):
        raise GraphLoadError("passes must be a list of JSON objects (one per at.grad sweep)")
    for k, p in enumerate(passes):
        order, grads = p.get("order", []), p.get("grads", {})
        if not isinstance(order, list) or not isinstance(grads, dict) \
                or not all(key.isascii() and key.isdigit() for key in grads):
            raise GraphLoadError(f"pass {k} (an at.grad sweep): 'order' is a list of node ids and 'grads' maps "
                                 f"node ids to node ids")
        ids = [p[key] for key in ("y", "seed") if key in p] + order + [int(key) for key in grads] + list(grads.values())
        if not all(_is_count(i) and 0 <= i < n_nodes for i in ids):
            raise GraphLoadError(f"pass {k} (an at.grad sweep) names a node the graph does not have")
    return list(passes)



def _json_default(obj: Any) -> Any:
    if isinstance(obj, tuple):
        return list(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def _from_json_attr(value: Any) -> Any:
    # JSON has no tuples; shapes and axes come back as lists. Ops accept tuples, so
    # turn (nested) lists back into tuples.
    if isinstance(value, list):
        return tuple(_from_json_attr(v) for v in value)
    return value
