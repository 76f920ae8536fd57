"""Plain data across a process boundary: what the judge and a sandboxed submission may send each other.

A graded submission runs in its own process (:mod:`asgteach.grading.sandbox`); the judge, in another,
calls the submission's functions and reads its values. Whatever crosses is *data*, never code and never
an object of a class the sender chose: a decoded message is built only from Python's own types (None,
bool, int, float, complex, str, bytes, list, tuple, dict, set, slice, range) and numpy arrays of numbers,
booleans or text, each made afresh by the receiver. So an object "that equals anything" cannot arrive:
what arrives is an ``int`` or an ``ndarray`` that the judge's numpy compares. ``pickle`` is never used (it
runs code while it loads).

Three things are more than data and travel as *names*, resolved by the receiver in its own process:

* a module: ``{"$mod": "numpy"}`` - the receiver's own import of it (the judge imports only modules of
  numpy, asgteach and the standard library: :data:`IMPORTABLE`);
* a graph or a Tensor: the graph as its JSON document (``Graph.to_json``), which ``Graph.from_json``
  loads checking every node, so a graph of the submission's runs on the judge's own library; a numpy
  backend's plan as its graph and outputs, compiled again by the receiver;
* a few dataclasses of the library (a backward rule's context, an OpSpec): field by field, each field
  encoded as any value, the instance built by the receiver's own class;
* any other object (a function, a class, an instance): a *reference* ``{"$ref": [side, number]}``,
  which the receiver can only hand back or ask its owner about (:mod:`asgteach.grading.remote`).

This module is the format; :class:`Codec` holds the hooks for those three, which the remote endpoint fills.
Framing: every message is one JSON document, prefixed by its length in 8 bytes (big-endian); a receiver
refuses a message longer than :data:`MAX_MESSAGE` and anything nested deeper than :data:`MAX_DEPTH`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import struct
from typing import Any, BinaryIO, Callable

import numpy as np

__all__ = ["WireError", "Codec", "send", "receive", "MAX_MESSAGE", "MAX_DEPTH", "IMPORTABLE", "ARRAY_KINDS"]

#: the longest message either side reads (bytes of JSON): a bigger one is a protocol error. The judge decodes what
#: the submission sends, so this also bounds the memory a submission can make the judge spend on one answer
#: (a few times this); the lessons' largest values (a model's parameters, a graph with its constants) are ~1 MiB
MAX_MESSAGE = 64 * 1024 * 1024
#: the deepest nesting a decoded value may have
MAX_DEPTH = 100
#: numpy dtype kinds that may cross: booleans, integers, floats, complex numbers, text, bytes
ARRAY_KINDS = frozenset("biufcUS")
#: module names (and their submodules) a receiver may resolve ``{"$mod": name}`` to
IMPORTABLE = ("numpy", "asgteach", "math", "cmath", "functools", "itertools", "operator", "collections", "random",
              "statistics", "fractions", "decimal", "string", "re", "json", "time", "dataclasses", "typing",
              "matplotlib", "contextlib", "copy", "struct", "warnings", "pathlib", "tempfile", "types", "inspect",
              "safetensors")


class WireError(ValueError):
    """A message that is not plain data as this module defines it (too long, too deep, an unknown tag)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise WireError("bytes must travel as base64 text")
    return base64.b64decode(text.encode("ascii"), validate=True)


def _dtype(text: Any) -> np.dtype:
    if not isinstance(text, str) or len(text) > 16:
        raise WireError(f"not a dtype: {text!r}")
    try:
        dtype = np.dtype(text)
    except TypeError:
        raise WireError(f"not a dtype: {text!r}") from None
    if dtype.kind not in ARRAY_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise WireError(f"arrays of {dtype} do not cross (numbers, booleans and text only)")
    return dtype


class Codec:
    """Turns values into plain JSON and back, with hooks for modules, graphs and references.

    ``ref(obj) -> [side, number]`` names an object that is not data; ``deref(side, number)`` turns such a
    name into what stands for it here; ``graph_out(g)`` / ``graph_in(doc)`` move graphs;
    ``module_in(name)`` resolves a module name (default: refuse).
    """

    def __init__(self, ref: Callable[[Any], list], deref: Callable[[str, int], Any],
                 graph_out: Callable[[Any], dict] | None = None, graph_in: Callable[[dict], Any] | None = None,
                 module_in: Callable[[str], Any] | None = None, value_types: dict[str, type] | None = None) -> None:
        self.ref, self.deref = ref, deref
        self.graph_out, self.graph_in = graph_out, graph_in
        self.module_in = module_in
        #: dataclasses of the library that travel field by field (a VJP rule's context, an OpSpec): the receiver
        #: builds its own instance from the fields, each of them encoded as any value (a function as a reference)
        self.value_types = dict(value_types or {})
        self._value_names = {cls: name for name, cls in self.value_types.items()}

    # -- out ---------------------------------------------------------------------------------------
    def encode(self, value: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise WireError(f"a value nested more than {MAX_DEPTH} deep")
        t = type(value)
        if value is None or t is bool or t is str or t is int:
            return value
        if t is float:
            return value if math.isfinite(value) else {"$f": repr(value)}
        if t is complex:
            return {"$c": [self.encode(value.real), self.encode(value.imag)]}
        if t is list:
            return [self.encode(v, depth + 1) for v in value]
        if t is tuple:
            return {"$t": [self.encode(v, depth + 1) for v in value]}
        if t is dict:
            return {"$d": [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in value.items()]}
        if t in (set, frozenset):
            return {"$set": [self.encode(v, depth + 1) for v in value], "frozen": t is frozenset}
        if t in (bytes, bytearray):
            return {"$b": _b64(bytes(value))}
        if t is slice:
            return {"$slice": [self.encode(value.start), self.encode(value.stop), self.encode(value.step)]}
        if t is range:
            return {"$range": [value.start, value.stop, value.step]}
        if value is Ellipsis:
            return {"$ellipsis": True}
        if t is np.ndarray and value.dtype.kind in ARRAY_KINDS and value.dtype.fields is None:
            data = value if value.flags.c_contiguous else value.copy(order="C")   # (ascontiguousarray makes 0-d 1-d)
            return {"$nd": data.dtype.str, "shape": list(data.shape), "data": _b64(data.tobytes())}
        if isinstance(value, np.generic) and t.__module__ == "numpy" and value.dtype.kind in ARRAY_KINDS:
            return {"$ns": value.dtype.str, "data": _b64(np.asarray(value).tobytes())}
        if t.__module__ == "numpy" and isinstance(value, np.dtype):
            return {"$dtype": value.str}
        if isinstance(value, type) and issubclass(value, np.generic) and value.__module__ == "numpy":
            return {"$dtype": np.dtype(value).str, "scalar_type": True}
        if t.__name__ == "module" and t is type(math):
            return {"$mod": value.__name__}
        if t in self._value_names:
            return {"$value": self._value_names[t],
                    "fields": {f.name: self.encode(getattr(value, f.name), depth + 1)
                               for f in dataclasses.fields(value) if f.init}}
        if self.graph_out is not None:
            doc = self.graph_out(value)
            if doc is not None:
                return doc
        return {"$ref": self.ref(value), "type": f"{t.__module__}.{t.__qualname__}"[:200],
                "callable": callable(value)}

    # -- in ----------------------------------------------------------------------------------------
    def decode(self, data: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise WireError(f"a value nested more than {MAX_DEPTH} deep")
        t = type(data)
        if data is None or t in (bool, str, int, float):
            return data
        if t is list:
            return [self.decode(v, depth + 1) for v in data]
        if t is not dict or len(data) == 0:
            raise WireError(f"not plain data: {type(data).__name__}")
        tag = next(iter(data))
        body = data[tag]
        if tag == "$f":
            if body not in ("nan", "inf", "-inf"):
                raise WireError(f"not a float: {body!r}")
            return float(body)
        if tag == "$c":
            return complex(float(self.decode(body[0])), float(self.decode(body[1])))
        if tag == "$t":
            return tuple(self.decode(v, depth + 1) for v in self._list(body))
        if tag == "$d":
            out = {}
            for pair in self._list(body):
                if type(pair) is not list or len(pair) != 2:
                    raise WireError("a dict travels as [key, value] pairs")
                key = self.decode(pair[0], depth + 1)
                try:
                    hash(key)
                except TypeError:
                    raise WireError(f"a dict key must be hashable, got {type(key).__name__}") from None
                out[key] = self.decode(pair[1], depth + 1)
            return out
        if tag == "$set":
            items = [self.decode(v, depth + 1) for v in self._list(body)]
            try:
                return frozenset(items) if data.get("frozen") else set(items)
            except TypeError:
                raise WireError("a set's items must be hashable") from None
        if tag == "$b":
            return _unb64(body)
        if tag == "$slice":
            return slice(*(self.decode(v, depth + 1) for v in self._list(body)[:3]))
        if tag == "$range":
            return range(*(int(v) for v in self._list(body)[:3]))
        if tag == "$ellipsis":
            return Ellipsis
        if tag == "$nd":
            dtype = _dtype(body)
            shape = data.get("shape")
            if type(shape) is not list or not all(type(d) is int and d >= 0 for d in shape) or len(shape) > 32:
                raise WireError(f"not an array shape: {shape!r}")
            raw = _unb64(data.get("data"))
            count = math.prod(shape)
            if len(raw) != count * dtype.itemsize:
                raise WireError(f"an array of shape {tuple(shape)} and dtype {dtype} needs {count * dtype.itemsize} "
                                f"bytes, got {len(raw)}")
            return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
        if tag == "$ns":
            dtype = _dtype(body)
            raw = _unb64(data.get("data"))
            if len(raw) != dtype.itemsize:
                raise WireError(f"a {dtype} scalar is {dtype.itemsize} bytes, got {len(raw)}")
            return np.frombuffer(raw, dtype=dtype)[0]
        if tag == "$dtype":
            dtype = _dtype(body)
            return dtype.type if data.get("scalar_type") else dtype
        if tag == "$mod":
            if self.module_in is None or type(body) is not str:
                raise WireError("a module does not cross here")
            return self.module_in(body)
        if tag in ("$graph", "$tensor", "$plan"):
            if self.graph_in is None:
                raise WireError("a graph does not cross here")
            return self.graph_in(data)
        if tag == "$value":
            cls = self.value_types.get(body) if type(body) is str else None
            fields = data.get("fields")
            if cls is None or type(fields) is not dict:
                raise WireError(f"no value type {body!r} crosses here")
            names = {f.name for f in dataclasses.fields(cls) if f.init}
            if not set(fields) <= names:
                raise WireError(f"{body} has no fields {sorted(set(fields) - names)}")
            return cls(**{k: self.decode(v, depth + 1) for k, v in fields.items()})
        if tag == "$ref":
            ref = self._list(body)
            if len(ref) != 2 or type(ref[0]) is not str or type(ref[1]) is not int:
                raise WireError(f"not a reference: {ref!r}")
            return self.deref(ref[0], ref[1])
        raise WireError(f"unknown tag {tag!r}")

    @staticmethod
    def _list(body: Any) -> list:
        if type(body) is not list:
            raise WireError(f"expected a list, got {type(body).__name__}")
        return body


def send(stream: BinaryIO, message: dict) -> None:
    """Write one message (a JSON-able dict) with its length in front."""
    data = json.dumps(message, separators=(",", ":"), allow_nan=False).encode("utf-8")
    stream.write(struct.pack(">Q", len(data)) + data)
    stream.flush()


def receive(stream: BinaryIO, limit: int = MAX_MESSAGE) -> dict:
    """Read one message; EOFError when the other side has gone, WireError when it is not a message."""
    head = _read(stream, 8)
    (length,) = struct.unpack(">Q", head)
    if length > limit:
        raise WireError(f"a message of {length} bytes (the limit is {limit})")
    body = _read(stream, length)
    try:
        message = json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise WireError(f"not a JSON message: {e}") from None
    if type(message) is not dict:
        raise WireError("a message is a JSON object")
    return message


def _read(stream: BinaryIO, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            raise EOFError("the other side closed the channel")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
