"""A numpy stand-in for one line of WGSL: lesson 17's check of a GPU formula on a machine without a GPU.

A student's op gives its GPU kernel as a one-line WGSL expression (``gpu=GPU(expr="select(alpha * (exp(x) - 1.0),
x, x > 0.0)")``). Where a Vulkan adapter exists the check compiles and runs it as a shader; where none exists it
still checks the formula's *mathematics* with :func:`wgsl_standin`: the text read as a Python expression (``1.0f``
-> ``1.0``, ``&&``/``||``/``!`` -> numpy's logical_and/or/not), only arithmetic, comparisons and the functions WGSL
and ``shaders/elementwise_math.wgsl`` offer allowed, evaluated with numpy in float32. It never checks WGSL syntax,
and the check says so loudly when it is all there is.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable

import numpy as np

__all__ = ["wgsl_standin"]

def _select(f: Any, t: Any, cond: Any) -> Any:
    return np.where(cond, t, f)


def _clamp(x: Any, lo: Any, hi: Any) -> Any:
    return np.minimum(np.maximum(x, lo), hi)


#: WGSL's built-in functions (and the helpers of shaders/elementwise_math.wgsl) that the stand-in knows. Their
#: names are WGSL's, not asgteach ops' (tests/test_user_op.py's ALLOWED says so for this literal)
_WGSL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "log": np.log, "abs": np.abs, "sqrt": np.sqrt, "tanh": np.tanh, "sign": np.sign,
    "max": np.maximum, "min": np.minimum, "pow": np.power, "select": _select, "clamp": _clamp, "exp2": np.exp2,
    "log2": np.log2, "sin": np.sin, "cos": np.cos, "floor": np.floor, "ceil": np.ceil,
    "f_log": np.log, "f_sqrt": np.sqrt, "f_tanh": np.tanh, "f_log1p": np.log1p,
    "f_relu": lambda x: np.maximum(x, 0), "f_max": np.maximum, "f_min": np.minimum, "f_pow": np.power,
    "f_softplus": lambda x, beta: np.logaddexp(0.0, beta * x) / beta, "f_sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_not": np.logical_not,
}
_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Call, ast.Name, ast.Load, ast.Constant,
                  ast.Add, ast.Sub, ast.Mult, ast.Div, ast.USub, ast.UAdd, ast.Gt, ast.GtE, ast.Lt, ast.LtE, ast.Eq,
                  ast.NotEq, ast.Mod)


class _Logical(ast.NodeTransformer):
    """WGSL's &&, || and ! on arrays of booleans: numpy's logical_and, logical_or and logical_not."""

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        fn = "logical_and" if isinstance(node.op, ast.And) else "logical_or"
        out = node.values[0]
        for value in node.values[1:]:
            out = ast.Call(ast.Name(fn, ast.Load()), [out, value], [])
        return out

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.Call(ast.Name("logical_not", ast.Load()), [node.operand], [])
        return node


def wgsl_standin(expr: str, dtype: Any = np.float32, **values: Any) -> np.ndarray:
    """Evaluate a one-line WGSL ``expr`` with numpy, in ``dtype``: what a check does where there is no GPU.

    ``values`` are the inputs (``x``; or ``a``, ``b``) and the number attributes by name. Only
    arithmetic, comparisons, ``&&``/``||``/``!`` (as numpy's logical_and/or/not) and the functions WGSL and
    ``shaders/elementwise_math.wgsl`` offer (``select``, ``exp``, ``f_log1p``, ...) are understood; a
    ``ValueError`` says what is not. It checks the formula's mathematics, never its WGSL syntax.

    >>> float(wgsl_standin("select(alpha * x, x, x > 0.0)", x=np.float32(-2.0), alpha=0.5))
    -1.0
    """
    text = re.sub(r"(\d)[fh]\b", r"\1", expr)                   # 1.0f -> 1.0
    text = text.replace("&&", " and ").replace("||", " or ")   # Python's and/or bind as loosely as WGSL's
    text = re.sub(r"!(?!=)", " not ", text)
    try:
        tree = _Logical().visit(ast.parse(text.strip(), mode="eval"))
    except SyntaxError as e:
        raise ValueError(f"cannot read {expr!r} as one expression ({e.msg})") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ValueError(f"{expr!r} uses {type(node).__name__}, which the stand-in does not know")
        if isinstance(node, ast.Name) and node.id not in values and node.id not in _WGSL_FUNCTIONS:
            raise ValueError(f"{expr!r} names {node.id!r}, which is neither an input, an attribute nor a function "
                             f"the stand-in knows")
    names = {k: (np.asarray(v, dtype=dtype) if not callable(v) else v) for k, v in values.items()}
    try:
        with np.errstate(all="ignore"):
            code = compile(ast.fix_missing_locations(tree), "<wgsl>", "eval")
            out = eval(code, {"__builtins__": {}}, {**_WGSL_FUNCTIONS, **names})  # noqa: S307
    except (TypeError, ValueError, ZeroDivisionError) as e:
        raise ValueError(f"the stand-in could not evaluate {expr!r} ({type(e).__name__}: {e})") from None
    return np.asarray(out, dtype=dtype)
