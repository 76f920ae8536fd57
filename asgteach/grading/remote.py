"""Two processes that call each other's functions with plain data: the judge and a sandboxed submission.

An :class:`Endpoint` sits at each end of a pair of pipes. Either side may ask the other to call a function
it was handed, read an attribute, an item or a length, and waits for the answer; while it waits it
answers what the other side asks (a student's ``verdict(attention, ...)`` calls the judge's ``attention``
back). Everything crosses as :mod:`asgteach.grading.wire` data:

* numbers, strings, lists, dicts and numpy arrays arrive as the receiver's own fresh objects;
* a graph arrives as its JSON document, loaded and checked by ``at.load_graph``; the receiver keeps one
  copy per sender's graph (a *mirror*) and extends it when the sender's graph has grown, so the Tensors of
  one graph stay in one graph on both sides;
* anything else (a function, a class, an instance of the student's class) stays where it is: the other
  side gets a :class:`Remote`, a handle through which it can only ask.

The two sides are not equal. ``side="judge"`` answers only *calls* of the objects it handed out, never
an attribute or an item of them (so a submission cannot walk from a callback to the judge's globals),
and resolves ``{"$mod": name}`` only to modules of :data:`~asgteach.grading.wire.IMPORTABLE`. A
``Remote`` has no ``==`` of its own: comparing it with anything is Python's identity, False for any other
object, so a returned object cannot claim to equal the reference.

An error on the other side arrives as :class:`RemoteError` (or, for the exception types in
:data:`PASSED_THROUGH`, as that type with the same message: the "not done yet" stub of an exercise is a
``NotImplementedError``, a missing name a ``NameError``).
"""

from __future__ import annotations

import builtins
import importlib
import itertools
import traceback
from typing import Any, BinaryIO, Callable

from .wire import IMPORTABLE, Codec, WireError, receive, send

__all__ = ["Endpoint", "Remote", "RemoteError", "ProtocolError", "PASSED_THROUGH", "claimed_type"]

#: exception types that arrive as themselves (by name), so checks can tell a stub or a missing name
PASSED_THROUGH = ("NotImplementedError", "NameError", "TypeError", "ValueError", "IndexError", "KeyError",
                  "AttributeError", "ZeroDivisionError", "ArithmeticError", "OverflowError", "FloatingPointError",
                  "RuntimeError", "AssertionError", "RecursionError", "MemoryError", "LookupError", "StopIteration")
#: the longest error message kept from the other side
MESSAGE_LIMIT = 4000


class RemoteError(Exception):
    """An exception raised on the other side, of a type not in PASSED_THROUGH (its name starts the message)."""


class ProtocolError(RuntimeError):
    """The other side broke the protocol (a malformed or unexpected message, or it went away)."""


class Remote:
    """A handle to an object that lives on the other side: call it, read its attributes and items."""

    __slots__ = ("_endpoint", "_key", "_type", "_callable")

    def __init__(self, endpoint: "Endpoint", key: list, type_name: str, is_callable: bool) -> None:
        object.__setattr__(self, "_endpoint", endpoint)
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_type", type_name)
        object.__setattr__(self, "_callable", is_callable)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._endpoint.request("call", target=self, args=list(args), kwargs=kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__") and name not in ("__name__", "__qualname__", "__doc__"):
            raise AttributeError(name)
        return self._endpoint.request("getattr", target=self, name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._endpoint.request("setattr", target=self, name=name, value=value)

    def __getitem__(self, key: Any) -> Any:
        return self._endpoint.request("getitem", target=self, key=key)

    def __len__(self) -> int:
        n = self._endpoint.request("len", target=self)
        if type(n) is not int or n < 0:
            raise TypeError(f"len() of a {self._type} gave {n!r}")
        return n

    def __iter__(self) -> Any:
        items = self._endpoint.request("list", target=self)
        if type(items) is not list:
            raise TypeError(f"iterating a {self._type} gave a {type(items).__name__}")
        return iter(items)

    def __contains__(self, item: Any) -> bool:
        return self._endpoint.request("contains", target=self, item=item) is True

    def __repr__(self) -> str:
        return f"<{self._type} (in the submission's process)>"

    __hash__ = object.__hash__


def claimed_type(obj: Any) -> str:
    """The dotted name of ``obj``'s class. For a :class:`Remote`, the name the other side sent with it: in the
    judge, the submission's word about its own object (a claim, not a finding: a class can be given any name)."""
    if isinstance(obj, Remote):
        return obj._type
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


class Endpoint:
    """One end of the channel: ``side`` is "judge" (trusted) or "sandbox" (runs the submission)."""

    def __init__(self, side: str, rfile: BinaryIO, wfile: BinaryIO, namespace: dict | None = None,
                 extra: dict[str, Callable[..., Any]] | None = None) -> None:
        if side not in ("judge", "sandbox"):
            raise ValueError(side)
        self.side, self.peer = side, ("sandbox" if side == "judge" else "judge")
        self.rfile, self.wfile = rfile, wfile
        #: the namespace a "name" request reads (the sandbox's notebook namespace)
        self.namespace = namespace if namespace is not None else {}
        #: more operations this side serves (the sandbox: running a cell)
        self.extra = dict(extra or {})
        self._exported: dict[int, Any] = {}           # number -> an object of ours the other side holds
        self._numbers: dict[int, int] = {}            # id(obj) -> its number
        self._remotes: dict[int, Remote] = {}         # number -> our handle to the other side's object
        self._graphs: dict[int, Any] = {}             # number -> a graph of ours the other side has seen
        self._graph_numbers: dict[int, int] = {}      # id(graph) -> its number
        self._mirrors: dict[int, Any] = {}            # the other side's graph number -> our copy
        self._synced: dict[tuple[str, int], int] = {}  # (owner, number) -> nodes both sides have
        self._counter = itertools.count(1)
        self._ids = itertools.count(1)
        from ..ops import registry

        value_types = {f"asgteach.ops.registry.{cls.__name__}": cls
                       for cls in (registry.VjpContext, registry.OpSpec, registry.GPU, registry.View, registry.Tools,
                                   registry.Composite)}
        self.codec = Codec(self._ref, self._deref, self._graph_out, self._graph_in, self._module_in, value_types)

    # -- references ----------------------------------------------------------------------------------
    def _ref(self, obj: Any) -> list:
        if isinstance(obj, Remote) and obj._endpoint is self:
            return list(obj._key)
        number = self._numbers.get(id(obj))
        if number is None or self._exported.get(number) is not obj:
            number = next(self._counter)
            self._exported[number] = obj
            self._numbers[id(obj)] = number
        return [self.side, number]

    def _deref(self, side: str, number: int) -> Any:
        if side == self.side:
            if number not in self._exported:
                raise WireError(f"no object #{number} was handed out")
            return self._exported[number]
        if side != self.peer:
            raise WireError(f"no side {side!r}")
        if number not in self._remotes:
            raise WireError(f"a reference #{number} that came without its type")
        return self._remotes[number]

    def _decode_ref(self, data: dict) -> Any:
        return self.codec.decode(data)

    # -- graphs --------------------------------------------------------------------------------------
    def _graph_out(self, value: Any) -> dict | None:
        from ..graph import Graph
        from ..tensor import Tensor

        if isinstance(value, Tensor) and type(value) is Tensor:
            doc = self._graph_doc(value.graph)
            return {"$tensor": doc["$graph"], "node": int(value.node_id), **{k: v for k, v in doc.items()
                                                                           if k != "$graph"}}
        if type(value) is Graph:
            return self._graph_doc(value)
        from ..backends.numpy_plan import Plan

        if type(value) is Plan:       # a numpy plan: its graph and outputs; the receiver compiles its own
            doc = self._graph_doc(value.graph)
            return {"$plan": doc["$graph"], "outputs": [int(i) for i in value.outputs],
                    **{k: v for k, v in doc.items() if k != "$graph"}}
        return None

    def _graph_doc(self, g: Any) -> dict:
        key = None
        for number, mirror in self._mirrors.items():
            if mirror is g:
                key = (self.peer, number)
                break
        if key is None:
            number = self._graph_numbers.get(id(g))
            if number is None or self._graphs.get(number) is not g:
                number = next(self._counter)
                self._graphs[number] = g
                self._graph_numbers[id(g)] = number
            key = (self.side, number)
        doc: dict[str, Any] = {"$graph": list(key), "nodes": len(g.nodes), "base": self._synced.get(key, 0)}
        if len(g.nodes) > self._synced.get(key, 0) or key not in self._synced:
            doc["json"] = g.to_json()
            self._synced[key] = len(g.nodes)
        return doc

    def _graph_in(self, data: dict) -> Any:
        from ..ops import load_graph
        from ..tensor import Tensor

        tensor, plan = "$tensor" in data, "$plan" in data
        key = data["$tensor"] if tensor else data["$plan"] if plan else data["$graph"]
        if type(key) is not list or len(key) != 2 or key[0] not in ("judge", "sandbox") or type(key[1]) is not int:
            raise WireError(f"not a graph key: {key!r}")
        owner, number = key[0], key[1]
        nodes = data.get("nodes")
        if type(nodes) is not int:
            raise WireError("a graph says how many nodes it has")
        local = (self._graphs.get(number) if owner == self.side else self._mirrors.get(number))
        if "json" in data:
            loaded = load_graph(data["json"])
            base = self._synced.get((owner, number), 0)
            if local is not None and len(local.nodes) == base and _same_prefix(local, loaded, base):
                _append(local, loaded, base)
                g = local
            elif owner == self.peer and local is None:
                g = loaded
                self._mirrors[number] = g
            else:          # both sides added nodes since they last agreed: a copy of its own
                g = loaded
            if g is local or (owner == self.peer and self._mirrors.get(number) is g):
                self._synced[(owner, number)] = len(loaded.nodes)
        else:
            if local is None:
                raise WireError(f"a graph #{number} that was never sent")
            g = local
        if tensor:
            node = data.get("node")
            if type(node) is not int or not 0 <= node < len(g.nodes):
                raise WireError(f"a Tensor of node {node!r}, which its graph does not have")
            return Tensor(g, node)
        if plan:
            outputs = data.get("outputs")
            if type(outputs) is not list or not outputs or not all(type(i) is int and 0 <= i < len(g.nodes)
                                                                     for i in outputs):
                raise WireError("a plan's outputs are nodes of its graph")
            from ..backends import compile as compile_plan

            return compile_plan([Tensor(g, i) for i in outputs], backend="numpy")
        return g

    def _module_in(self, name: str) -> Any:
        if self.side == "judge" and not any(name == m or name.startswith(m + ".") for m in IMPORTABLE):
            raise WireError(f"the judge does not import {name!r} for a submission")
        return importlib.import_module(name)

    # -- requests ------------------------------------------------------------------------------------
    def request(self, op: str, **payload: Any) -> Any:
        """Ask the other side; answer its own requests while waiting; return the decoded result."""
        rid = next(self._ids)
        message = {"kind": "request", "id": rid, "op": op}
        message.update({k: self.codec.encode(v) for k, v in payload.items()})
        self._send(message)
        while True:
            reply = self._receive()
            if reply.get("kind") == "request":
                self._answer(reply)
                continue
            if reply.get("kind") != "reply" or reply.get("id") != rid:
                raise ProtocolError(f"expected the reply to request {rid}, got {str(reply)[:200]}")
            self._learn(reply)
            if "error" in reply:
                raise _error_from(reply["error"])
            return self.codec.decode(reply.get("value"))

    def serve(self) -> None:
        """Answer requests until the other side says goodbye or goes away (the sandbox's main loop)."""
        while True:
            try:
                message = self._receive()
            except EOFError:
                return
            if message.get("kind") == "bye":
                return
            if message.get("kind") != "request":
                raise ProtocolError(f"expected a request, got {str(message)[:200]}")
            self._answer(message)

    def bye(self) -> None:
        """Tell the other side the conversation is over (it may have gone already: that is fine)."""
        try:
            send(self.wfile, {"kind": "bye"})
        except (OSError, ValueError):
            pass

    def _send(self, message: dict) -> None:
        try:
            send(self.wfile, message)
        except (BrokenPipeError, OSError) as e:
            raise ProtocolError(f"the {self.peer} went away ({e})") from None

    def _receive(self) -> dict:
        try:
            return receive(self.rfile)
        except EOFError:
            raise
        except (WireError, OSError) as e:
            raise ProtocolError(f"a broken message from the {self.peer}: {e}") from None

    def _learn(self, message: dict) -> None:
        """Note the types of the references in a message before decoding it (a Remote needs its type)."""
        stack = [message]
        while stack:
            item = stack.pop()
            if type(item) is dict:
                ref = item.get("$ref")
                if type(ref) is list and len(ref) == 2 and ref[0] == self.peer and type(ref[1]) is int \
                        and ref[1] not in self._remotes:
                    self._remotes[ref[1]] = Remote(self, [self.peer, ref[1]], str(item.get("type", "object"))[:200],
                                                   bool(item.get("callable")))
                stack.extend(v for v in item.values() if type(v) in (dict, list))
            elif type(item) is list:
                stack.extend(v for v in item if type(v) in (dict, list))

    def _answer(self, message: dict) -> None:
        rid = message.get("id")
        try:
            self._learn(message)
            value = self._perform(message)
            reply = {"kind": "reply", "id": rid, "value": self.codec.encode(value)}
        except (ProtocolError, EOFError):
            raise
        except BaseException as e:  # noqa: BLE001 - any error of the call goes back to the asker
            if isinstance(e, (KeyboardInterrupt, SystemExit)) and self.side == "judge":
                raise
            reply = {"kind": "reply", "id": rid, "error": _error_to(e)}
        self._send(reply)

    def _perform(self, message: dict) -> Any:
        op = message.get("op")
        decode = self.codec.decode
        if op in self.extra and self.side == "sandbox":
            return self.extra[op](**{k: decode(v) for k, v in message.items() if k not in ("kind", "id", "op")})
        if op == "name" and self.side == "sandbox":
            name = decode(message.get("name"))
            if type(name) is not str:
                raise TypeError("a name is a string")
            if name in self.namespace:
                return self.namespace[name]
            if hasattr(builtins, name):
                return getattr(builtins, name)
            raise NameError(f"name {name!r} is not defined")
        target = decode(message.get("target"))
        if isinstance(target, Remote):
            raise TypeError("a request about an object of the asker's own")
        if op == "call":
            args, kwargs = decode(message.get("args")), decode(message.get("kwargs"))
            if type(args) is not list or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
                raise TypeError("a call's arguments are a list and a dict of names")
            graph = _graph_of_arguments([*args, *kwargs.values()])
            if graph is None:
                return target(*args, **kwargs)
            with graph:      # what the call builds goes where its Tensors are (the caller's `with` is not here)
                return target(*args, **kwargs)
        if self.side == "judge":
            raise PermissionError(f"the judge answers only calls of what it handed out, not {op!r}")
        if op == "getattr":
            return getattr(target, decode(message.get("name")))
        if op == "setattr":
            setattr(target, decode(message.get("name")), decode(message.get("value")))
            return None
        if op == "getitem":
            return target[decode(message.get("key"))]
        if op == "len":
            return len(target)
        if op == "list":
            return list(target)
        if op == "contains":
            return decode(message.get("item")) in target
        raise ValueError(f"unknown request {op!r}")


def _graph_of_arguments(values: list) -> Any:
    """The one graph the Tensors among ``values`` (and in their lists, tuples and contexts) belong to, or None."""
    from ..ops.registry import VjpContext
    from ..tensor import Tensor

    graphs: dict[int, Any] = {}
    todo = list(values)
    while todo:
        v = todo.pop()
        if isinstance(v, Tensor):
            graphs[id(v.graph)] = v.graph
        elif isinstance(v, (list, tuple)):
            todo.extend(v)
        elif isinstance(v, VjpContext):
            todo.extend([*v.inputs, v.out])
    return next(iter(graphs.values())) if len(graphs) == 1 else None


def _same_prefix(local: Any, loaded: Any, base: int) -> bool:
    if len(loaded.nodes) < base:
        return False
    return all(a.op == b.op and a.inputs == b.inputs and a.shape == b.shape
               for a, b in zip(local.nodes[:base], loaded.nodes[:base]))


def _append(local: Any, loaded: Any, base: int) -> None:
    """Add ``loaded``'s nodes after ``base`` to ``local`` (both hold the same first ``base`` nodes)."""
    for node in loaded.nodes[base:]:
        local.add_node(node.op, node.inputs, node.attrs, node.shape, node.dtype, name=node.name, source=node.source,
                       meta=dict(node.meta), value=loaded.constants.get(node.id), supplied=node.supplied)
        local.nodes[-1].phase = node.phase
    local.passes = loaded.passes


def _error_to(e: BaseException) -> dict:
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    return {"type": type(e).__name__[:100], "message": str(e)[:MESSAGE_LIMIT], "text": text[:MESSAGE_LIMIT]}


def _error_from(data: Any) -> BaseException:
    if type(data) is not dict:
        return RemoteError("an error without a description")
    name, message = str(data.get("type", "Exception"))[:100], str(data.get("message", ""))[:MESSAGE_LIMIT]
    if name in PASSED_THROUGH:
        return getattr(builtins, name)(message)
    if name == "ExerciseError":
        from .exercises import ExerciseError

        return ExerciseError(message)
    if name == "KeysMissing":
        from .keys import KeysMissing

        return KeysMissing(message)
    if name in ("ShapeError", "FeedError", "KernelError", "NumericsError", "NotDifferentiableError"):
        import asgteach

        return getattr(asgteach, name)(message)
    return RemoteError(f"{name}: {message}")
