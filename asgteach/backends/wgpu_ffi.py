"""Make wgpu-py's first use of each C struct cheap (a per-process start-up cost, not a GPU one).

wgpu-py talks to wgpu-native through cffi and names C types as strings:
``ffi.new("WGPUBindGroupDescriptor *")``. cffi turns a string into a type by *parsing C*
the first time it sees it, and to parse one type name it feeds pycparser a prelude that
declares every typedef of the header (~900 for ``webgpu.h``). So each new struct costs
~10 ms of pure Python: creating an adapter, a device and the first plan meets ~40 of
them, about 0.4 s of a first ``Trainer`` (measured on a 2-core machine).

Almost all of those strings have one of three shapes, ``"Name"``, ``"Name *"`` and
``"Name[]"``, where ``Name`` is a typedef cffi already knows from the header or a primitive
such as ``uint8_t``. For those the answer needs no parsing, and it is exactly what cffi's
parser returns for them (``Parser._get_type_and_quals``: a typedef name is looked up in the
declarations, a primitive in ``resolve_common_type``; ``*`` wraps it in
``PointerType(type, quals)``, ``[]`` in ``ArrayType(type, None)``). :func:`speed_up`
installs that shortcut as cffi's own type-cache miss handler; any other string (a
function type, ``unsigned int``, anything unusual) still goes through cffi's parser. The
result is cffi's own cached type object, the same one parsing would give
(``tests/test_wgpu_compile_cache.py`` checks that).

It leans on cffi internals (``FFI._parsed_types``, ``_parser._declarations``,
``_get_cached_btype``, ``cffi.model``), so it is strictly optional: if any of them is
missing or looks different, nothing is changed and cffi parses as before.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["speed_up"]

_SIMPLE = re.compile(r"\s*([A-Za-z_]\w*)\s*(\*|\[\s*\])?\s*$")   # Name, Name *, Name[]
_PREFIXES = ("short", "long", "signed", "unsigned")   # words the parser rewrites (signed -> int)


def speed_up(ffi: Any) -> bool:
    """Install the shortcut on ``ffi`` (wgpu-native's FFI object). Returns whether it is installed."""
    try:
        from cffi import model
        from cffi.commontypes import resolve_common_type

        parser = ffi._parser
        declarations = parser._declarations
        parsed = ffi._parsed_types
        lock = ffi._lock
        get_btype = ffi._get_cached_btype
        pointer, array, raw_function = model.PointerType, model.ArrayType, model.RawFunctionType
        primitive = model.PrimitiveType.ALL_PRIMITIVE_TYPES
    except (ImportError, AttributeError):
        return False
    if type(parsed) is not dict:   # already installed (or cffi changed): leave it alone
        return isinstance(parsed, _TypeCache)

    def resolve(cdecl: Any) -> Any:
        m = _SIMPLE.match(cdecl) if isinstance(cdecl, str) else None
        if m is None:
            return None
        word, suffix = m.group(1), m.group(2)
        decl = declarations.get("typedef " + word)
        if decl is not None:   # a typedef of the header (the parser looks these up first)
            if isinstance(decl[0], raw_function):
                return None
            tp, quals = decl
        elif word in primitive and word not in _PREFIXES:   # uint8_t, uintptr_t, char, float...
            tp, quals = resolve_common_type(parser, word)
        else:
            return None
        t = tp if suffix is None else pointer(tp, quals) if suffix == "*" else array(tp, None)
        with lock:
            return get_btype(t), False   # (btype, "is a raw function type"): what FFI._typeof_locked stores

    ffi._parsed_types = _TypeCache(parsed, resolve)
    return True


class _TypeCache(dict):
    """cffi's {type string: (ctype, is raw function)} cache, filling simple misses without the C parser.

    cffi reads it as ``cache[cdecl]`` and parses on ``KeyError``; ``__missing__`` answers first when it can.
    """

    __slots__ = ("_resolve",)

    def __init__(self, initial: dict, resolve: Any) -> None:
        super().__init__(initial)
        self._resolve = resolve

    def __missing__(self, cdecl: Any) -> Any:
        result = self._resolve(cdecl)
        if result is None:
            raise KeyError(cdecl)
        self[cdecl] = result
        return result
