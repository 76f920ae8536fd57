"""Mistakes caught while the graph is BUILT: each error names the op or input, the bad value
and the user's line, in one paragraph (issue 11, section 4).

Like tests/test_errors.py, each test records the line that makes the bad node
(``line, make = caller_line(), lambda: ...``: the lambda's body is on the same line) and
checks that the message points at this file and that line.
"""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import asgteach as at
from error_helpers import caller_line
from error_helpers import raises_text as _raises
from asgteach.ops import apply
from wgpu_helpers import need_module

HERE = "test_build_errors.py"




def _at(line: int) -> str:
    return f"{HERE}:{line}"


# --- input / parameter shapes: sizes are ints, 0 or more ----------------------------------------
def test_input_with_a_fractional_size_names_the_input_and_line() -> None:
    with at.Graph():
        line, make = caller_line(), (lambda: at.input("f", (2.5,)))
        msg = _raises(at.ShapeError, make)
    assert msg.startswith("input 'f':") and "2.5" in msg and "sizes must be ints" in msg
    assert _at(line) in msg and 'at.input("f", (2.5,))' in msg  # the line's text is shown too


@pytest.mark.parametrize("bad, shown", [
    (3.0, "3.0"), ("3", "'3'"), (True, "True"), (np.float64(2.0), "2.0"), (None, "None"),
], ids=["whole_float", "str", "bool", "numpy_float", "none"])
def test_input_rejects_every_non_int_size(bad, shown) -> None:
    with at.Graph():
        line, make = caller_line(), (lambda: at.input("batch", (bad, 4)))
        msg = _raises(at.ShapeError, make)
    assert msg.startswith("input 'batch':") and "sizes must be ints" in msg and shown in msg
    assert _at(line) in msg


def test_whole_float_size_says_which_int_to_write() -> None:
    with at.Graph():
        msg = _raises(at.ShapeError, lambda: at.input("h", (8 / 2,)))
    assert "write 4, not 4.0" in msg and "//" in msg


def test_parameter_and_negative_sizes_are_named() -> None:
    with at.Graph():
        line, make = caller_line(), (lambda: at.parameter("w", (3, 1.5)))
        msg = _raises(at.ShapeError, make)
        assert msg.startswith("parameter 'w':") and "1.5" in msg and _at(line) in msg
        line, make = caller_line(), (lambda: at.input("g", (3, -2)))
        msg = _raises(at.ShapeError, make)
        assert msg.startswith("input 'g':") and "negative" in msg and "-2" in msg and _at(line) in msg
        line, make = caller_line(), (lambda: at.input("s", "34"))
        msg = _raises(at.ShapeError, make)
        assert "tuple of ints" in msg and "'34'" in msg and _at(line) in msg


def test_numpy_integer_sizes_stay_accepted() -> None:
    with at.Graph():
        x = at.input("n", (np.int64(2), np.int32(3)))
        v = at.input("v", np.int16(5))
        p = at.parameter("p", np.array([4, 1]))
        e = at.input("e", (0, 3))
    assert x.shape == (2, 3) and v.shape == (5,) and p.shape == (4, 1) and e.shape == (0, 3)
    assert all(type(d) is int for d in x.shape + v.shape + p.shape)


# --- ops that work along ONE axis ------------------------------------------------------------------
def test_softmax_with_a_tuple_axis_says_it_takes_one_axis() -> None:
    with at.Graph():
        x = at.input("x", (2, 3))
        line, make = caller_line(), (lambda: at.softmax(x, axis=(0, 1)))
        msg = _raises(at.ShapeError, make)
    assert msg.startswith("softmax:") and "takes one axis" in msg and "(0, 1)" in msg
    assert "(2, 3)" in msg and _at(line) in msg
    assert "unpack" not in msg and "reshape" in msg  # what to do: join the axes first


def test_other_one_axis_ops_say_so_too() -> None:
    with at.Graph():
        x = at.input("x", (2, 3, 4))
        cases = [
            ("log_softmax", "[1, 2]", caller_line(), lambda: at.log_softmax(x, axis=[1, 2])),
            ("argmax", "(0, 1)", caller_line(), lambda: at.argmax(x, axis=(0, 1))),
            ("argmax", "None", caller_line(), lambda: at.argmax(x, axis=None)),
            ("softmax", "(-1, 0)", caller_line(), lambda: x.softmax(axis=(-1, 0))),
            ("log_softmax", "1.0", caller_line(), lambda: at.log_softmax(x, axis=1.0)),
        ]
        for op, shown, line, make in cases:
            msg = _raises(at.ShapeError, make)
            assert msg.startswith(f"{op}:") and "takes one axis" in msg and shown in msg, msg
            assert "(2, 3, 4)" in msg and _at(line) in msg, msg


def test_one_axis_ops_built_directly_check_their_axis() -> None:
    # a node made by apply() (as Graph.from_json does) goes through the same check
    with at.Graph():
        x = at.input("x", (2, 3))
        line, make = caller_line(), (lambda: apply("softmax", x, axis=(0, 1)))
        msg = _raises(at.ShapeError, make)
        assert msg.startswith("softmax:") and "takes one axis" in msg and _at(line) in msg
        msg = _raises(at.ShapeError, lambda: apply("argmax", x, axis=(0, 1)))
        assert msg.startswith("argmax:") and "takes one axis" in msg


def test_one_axis_ops_accept_numpy_ints_and_still_work() -> None:
    X = np.arange(6.0).reshape(2, 3)
    with at.Graph():
        x = at.input("x", (2, 3))
        s = at.softmax(x, axis=np.int64(0))
        i = at.argmax(x, axis=np.int32(-1))
        ls = at.log_softmax(x, axis=1)
    s_v, i_v, ls_v = at.run([s, i, ls], {x: X})
    e = np.exp(X - X.max(axis=0))
    np.testing.assert_allclose(s_v, e / e.sum(axis=0))
    np.testing.assert_array_equal(i_v, [2, 2])
    np.testing.assert_allclose(ls_v, X - np.log(np.exp(X).sum(axis=1, keepdims=True)))


# --- operands that are not numbers: a TypeError at build time, not a NaN constant ----------------
def test_adding_none_is_a_type_error_naming_the_op_and_line() -> None:
    with at.Graph() as g:
        x = at.input("x", (3,))
        n = len(g.nodes)
        line, make = caller_line(), (lambda: x + None)
        msg = _raises(TypeError, make)
        assert len(g.nodes) == n  # no NaN constant was left behind
    assert msg.startswith("add: input 1 is None") and "NoneType" in msg and _at(line) in msg


def test_other_non_numbers_and_other_ops() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        cases = [
            ("mul: input 1", "str", "'a'", caller_line(), lambda: x * "a"),
            ("sub: input 0", "NoneType", "None", caller_line(), lambda: None - x),
            ("relu: input 0", "NoneType", "None", caller_line(), lambda: at.relu(None)),
            ("maximum: input 1", "dict", "{'a': 1}", caller_line(), lambda: at.maximum(x, {"a": 1})),
            ("add: input 1", "list", "holding None", caller_line(), lambda: x + [1.0, None, 2.0]),
            ("softmax", "NoneType", "None", caller_line(), lambda: at.softmax(None)),
            ("sum", "str", "'1 2 3'", caller_line(), lambda: at.sum("1 2 3")),
            ("div: input 1", "complex", "1j", caller_line(), lambda: x / 1j),
        ]
        for head, type_name, shown, line, make in cases:
            msg = _raises(TypeError, make)
            assert msg.startswith(head) and type_name in msg and shown in msg, msg
            assert _at(line) in msg, msg
        msg = _raises(TypeError, lambda: at.add(x, [x, x]))
        assert "Tensor" in msg and "at.concat" in msg  # a list of Tensors: say how to join them


def test_numbers_arrays_lists_and_bools_stay_accepted() -> None:
    with at.Graph():
        x = at.input("x", (2, 3))
        ys = [x + 1, x * np.float32(2), x - np.arange(3), x + [[1, 2, 3]], x * True,
              x * [True, False, True], 2 ** x, at.maximum(x, np.int64(1)), x + np.array([[0.5], [1.5]])]
    X = np.arange(6.0).reshape(2, 3)
    got = at.run(ys, {x: X})
    want = [X + 1, X * 2, X - np.arange(3), X + [[1, 2, 3]], X, X * [1, 0, 1], 2 ** X, np.maximum(X, 1),
            X + [[0.5], [1.5]]]
    for g_, w in zip(got, want):
        np.testing.assert_allclose(g_, w)


# --- ragged nested lists ------------------------------------------------------------------------
def test_ragged_constant_names_the_rows_and_line() -> None:
    with at.Graph():
        line, make = caller_line(), (lambda: at.constant([[1, 2], [3]]))
        msg = _raises(at.ShapeError, make)
    assert msg.startswith("constant:") and "ragged" in msg and "[[1, 2], [3]]" in msg
    assert "row [0] has 2 items but row [1] has 1" in msg and _at(line) in msg


def test_ragged_lists_deeper_mixed_and_as_operands() -> None:
    with at.Graph():
        x = at.input("x", (2, 2))
        line, make = caller_line(), (lambda: at.constant([[[1, 2], [3, 4]], [[5, 6], [7]]]))
        msg = _raises(at.ShapeError, make)
        assert "row [0][0] has 2 items but row [1][1] has 1" in msg and _at(line) in msg
        line, make = caller_line(), (lambda: at.constant([1, [2, 3]]))
        msg = _raises(at.ShapeError, make)
        assert "item [0] is a number but item [1] is a list" in msg and _at(line) in msg
        line, make = caller_line(), (lambda: x * [[1.0, 2.0], [3.0]])
        msg = _raises(at.ShapeError, make)
        assert msg.startswith("mul: input 1") and "ragged" in msg and _at(line) in msg
        line, make = caller_line(), (lambda: at.constant(None))
        msg = _raises(TypeError, make)
        assert msg.startswith("constant: the value is None") and _at(line) in msg


# --- in a notebook: one paragraph, raised near the user's call ------------------------------------
_CELLS = {
    "input": ("x = at.input('f', (2.5,))", "ShapeError: input 'f': shape must be a tuple of ints"),
    "softmax": ("y = at.softmax(at.input('g', (2, 3)), axis=(0, 1))", "ShapeError: softmax: takes one axis"),
    "add_none": ("y = at.input('h', (3,)) + None", "TypeError: add: input 1 is None"),
    "ragged": ("c = at.constant([[1, 2], [3]])", "ShapeError: constant: the value [[1, 2], [3]] is a ragged"),
}


@pytest.mark.slow
def test_ipython_shows_one_short_paragraph() -> None:
    need_module("IPython", "pip install -e '.[dev]' (./scripts/setup does)")
    script = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "sh = InteractiveShell.instance()\n"
        "sh.run_cell('import asgteach as at')\n"
        "for cell in sys.argv[1:]:\n"
        "    print('=== CELL')\n"
        "    sh.run_cell(cell)\n"
    )
    out = subprocess.run([sys.executable, "-c", script, *(c for c, _ in _CELLS.values())],
                         capture_output=True, text=True, timeout=120).stdout
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # colours off, whatever the IPython version
    shown = out.split("=== CELL")[1:]
    assert len(shown) == len(_CELLS), out
    for (cell, headline), text in zip(_CELLS.values(), shown):
        assert headline in text, text
        assert cell in text.split(headline)[1]  # the user's line, quoted under the message
        assert "During handling" not in text and "/numpy/" not in text, text  # no chained or numpy frames
        library_frames = [ln for ln in text.splitlines() if ln.startswith("File ") and "asgteach" in ln]
        assert len(library_frames) <= 3, text


def test_concat_takes_one_axis_and_shape_ops_name_themselves() -> None:
    x = at.input("x", (2, 3))
    with pytest.raises(at.ShapeError, match=r"concat: takes one axis") as err:
        at.concat([x, x], axis=(0, 1))
    assert "test_build_errors.py:" in str(err.value)
    assert at.concat([x, x], axis=np.int64(-1)).shape == (2, 6)
    for call, op in ((lambda: at.reshape(None, (3,)), "reshape"), (lambda: at.transpose("ab"), "transpose"),
                     (lambda: at.broadcast_to(None, (2,)), "broadcast_to")):
        with pytest.raises(TypeError, match=rf"^{op}: input 0 is"):
            call()
