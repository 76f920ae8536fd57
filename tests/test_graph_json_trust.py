"""``Graph.from_json`` trusts nothing in its input (issue 22, item 7).

A graph file may be hand-edited, old, or made to do harm. Before this issue it loaded a
constant of dtype "U50000000" (a 790-byte file became hundreds of MiB), "object" arrays,
negative sizes, and a node declared ``(2,)`` whose op really gives ``(3,)``: numpy ran it as
``(3,)`` and the GPU, which sizes its buffers from the declared shape, as ``(2,)``. Now every
node is checked as ``ops.apply`` would have made it (its op's shape rule re-run with its
attributes), constants hold numbers filling exactly their declared shape, and anything else
is a :class:`GraphLoadError` naming the node. Each hostile document below is a real
``to_json`` output with one thing edited. Real graphs still round-trip, and run to the same
numbers on numpy and wgpu.
"""

from __future__ import annotations

import json
import tracemalloc
from typing import Any, Callable

import numpy as np
import pytest

import asgteach as at
from asgteach.graph import GraphLoadError
from asgteach.graph_json import MAX_RANK

from wgpu_helpers import assert_close, run_both

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]])


def _small() -> at.Graph:
    """#0 x (2, 3), #1 constant 'scale' (3,), #2 constant 'ids' (int), #3 mul, #4 sum(axis=1) 'total'."""
    with at.Graph("small") as g:
        x = at.input("x", (2, 3))
        c = at.constant(np.array([1.0, 2.0, 3.0]), name="scale")
        at.constant(np.array([2, 0]), name="ids")
        y = at.sum(x * c, axis=1)
        y.node.name = "total"
    return g


def _edited(edit: Callable[[dict], Any]) -> str:
    doc = json.loads(_small().to_json())
    edit(doc)
    return json.dumps(doc)


def _refused(text: str, node_id: int, op: str, name: str, *words: str) -> str:
    """Loading ``text`` raises GraphLoadError naming node ``node_id`` (id, op, name) and saying ``words``."""
    with pytest.raises(GraphLoadError) as info:
        at.load_graph(text)
    msg = str(info.value)
    assert f"node #{node_id} " in msg and f"op {op!r}" in msg and f"name {name!r}" in msg, msg
    assert "test_graph_json_trust.py:" in msg, f"the line that made the node: {msg}"
    for w in words:
        assert w in msg, f"{w!r} not in: {msg}"
    assert isinstance(info.value, ValueError)
    return msg


def _set(node: int, key: str, value: Any) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        doc["nodes"][node][key] = value
    return edit


# --- the hostile cases of the issue ---------------------------------------------------------------------
def test_a_huge_string_dtype_is_refused_before_anything_is_allocated() -> None:
    text = _edited(_set(1, "value", {"dtype": "U50000000", "data": ["a", "b", "c"]}))
    assert len(text) < 1500
    tracemalloc.start()
    try:
        _refused(text, 1, "constant", "scale", "'U50000000'", "float64")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, f"refusing a {len(text)}-byte document took {peak} bytes"


@pytest.mark.parametrize("dtype, data", [
    ("object", [1.0, 2.0, 3.0]), ("object", [{"__class__": "os.system"}, 2.0, 3.0]), ("complex128", [1.0, 2.0, 3.0]),
    ("datetime64[s]", [1, 2, 3]), ("V8", [1, 2, 3]), ("S5", ["a", "b", "c"]), ("<f8", [1.0, 2.0, 3.0]),
])
def test_constants_hold_only_numeric_or_bool_dtypes(dtype: str, data: list) -> None:
    _refused(_edited(_set(1, "value", {"dtype": dtype, "data": data})), 1, "constant", "scale", "float64, float32")


def test_an_int_node_stores_int_values_and_a_float_node_float_ones() -> None:
    _refused(_edited(_set(2, "value", {"dtype": "float64", "data": [2.0, 0.0]})), 2, "constant", "ids", "int64")
    _refused(_edited(_set(2, "value", {"dtype": "int64", "data": [2.5, 0]})), 2, "constant", "ids",
             "not int64 numbers")
    _refused(_edited(_set(2, "value", {"dtype": "int8", "data": [300, 0]})), 2, "constant", "ids",
             "not int8 numbers")
    _refused(_edited(_set(1, "value", {"dtype": "float64", "data": [1.0, "2", None]})), 1, "constant", "scale",
             "not float64 numbers")
    _refused(_edited(_set(1, "value", {"dtype": "float64", "data": [1.0, 2.0, 10**400]})), 1, "constant", "scale",
             "does not fit float64")
    _refused(_edited(_set(1, "value", [1.0, 2.0, 3.0])), 1, "constant", "scale", "{'dtype': ..., 'data': ...}")


def test_a_declared_shape_that_the_ops_rule_contradicts_is_refused() -> None:
    # numpy computed (2,) from the inputs whatever was declared, and the GPU sized its buffers from the declaration
    _refused(_edited(_set(4, "shape", [3])), 4, "sum", "total", "declared shape (3,)", "gives (2,)")
    _refused(_edited(_set(3, "shape", [3, 2])), 3, "mul", "mul", "declared shape (3, 2)", "gives (2, 3)")

    def wrong_attr(doc: dict) -> None:
        doc["nodes"][4]["attrs"]["axis"] = [0]      # the rule would give (3,), the node says (2,)
    _refused(_edited(wrong_attr), 4, "sum", "total", "declared shape (2,)", "gives (3,)")

    def out_of_range(doc: dict) -> None:
        doc["nodes"][4]["attrs"]["axis"] = [7]
    _refused(_edited(out_of_range), 4, "sum", "total", "shape rule refuses")

    def undeclared(doc: dict) -> None:
        doc["nodes"][4]["attrs"]["evil"] = 1
    _refused(_edited(undeclared), 4, "sum", "total", "attribute 'evil'", "axis, keepdims")


def test_a_constants_data_must_fill_its_declared_shape_exactly() -> None:
    _refused(_edited(_set(1, "shape", [4])), 1, "constant", "scale", "axis 0 should have 4 items")
    _refused(_edited(_set(1, "value", {"dtype": "float64", "data": [[1.0], [2.0], [3.0]]})), 1, "constant",
             "scale", "not float64 numbers")

    def claims_a_gigabyte(doc: dict) -> None:
        doc["nodes"][1]["shape"] = [2**27]          # 1 GiB of float64 declared, 3 numbers given
    tracemalloc.start()
    try:
        _refused(_edited(claims_a_gigabyte), 1, "constant", "scale", "does not fill the declared shape")
        assert tracemalloc.get_traced_memory()[1] < 2**20
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("shape, words", [
    ([-2, 3], "size -2"), ([2, 2.5], "size 2.5"), ([2, 3.0], "size 3.0"), ([True, 3], "size True"),
    ([2, "3"], "size '3'"), ("2,3", "a list of at most"), ([1] * (MAX_RANK + 1), "a list of at most"),
    ([2**21] * 3, "elements, more than"),
])
def test_sizes_are_whole_numbers_zero_or_more_and_ranks_and_sizes_are_bounded(shape: Any, words: str) -> None:
    _refused(_edited(_set(0, "shape", shape)), 0, "input", "x", words)


def test_unknown_keys_ops_and_bad_input_ids_are_refused() -> None:
    _refused(_edited(_set(3, "evil", 1)), 3, "mul", "mul", "unknown key 'evil'")
    _refused(_edited(_set(3, "op", "mul_from_the_future")), 3, "mul_from_the_future", "mul", "not registered")
    _refused(_edited(_set(3, "inputs", [0, 3])), 3, "mul", "mul", "input id 3 is not an earlier node")
    _refused(_edited(_set(3, "inputs", [0, 4])), 3, "mul", "mul", "input id 4 is not an earlier node")
    _refused(_edited(_set(3, "inputs", [0, -1])), 3, "mul", "mul", "input id -1 is not an earlier node")
    _refused(_edited(_set(3, "inputs", [0, 1.0])), 3, "mul", "mul", "a list of node ids")
    _refused(_edited(_set(3, "inputs", [0])), 3, "mul", "mul", "takes 2 inputs")
    _refused(_edited(_set(3, "id", 7)), 3, "mul", "mul", "consecutive")
    _refused(_edited(_set(0, "inputs", [0])), 0, "input", "x", "is not an earlier node")
    _refused(_edited(_set(0, "attrs", {"shape": [2, 3]})), 0, "input", "x", "a leaf")
    _refused(_edited(_set(3, "value", {"dtype": "float64", "data": [1.0]})), 3, "mul", "mul",
             "only a constant stores a value")
    _refused(_edited(_set(4, "dtype", "int")), 4, "sum", "total", "declared dtype 'int'")
    _refused(_edited(_set(4, "dtype", "float32")), 4, "sum", "total", "dtype 'float32' is not one of")
    _refused(_edited(_set(4, "phase", "sideways")), 4, "sum", "total", "phase 'sideways'")
    _refused(_edited(_set(4, "meta", [])), 4, "sum", "total", "meta must be a JSON object")

    def int_into_float_op(doc: dict) -> None:
        doc["nodes"][3]["inputs"] = [0, 2]          # mul of x and the int ids
        doc["nodes"][3]["shape"] = [2, 2]
    _refused(_edited(int_into_float_op), 3, "mul", "mul", "input 1 (node #2) holds int values")

    def missing(doc: dict) -> None:
        del doc["nodes"][3]["shape"]
    _refused(_edited(missing), 3, "mul", "mul", "missing key 'shape'")


def test_the_document_itself_is_checked() -> None:
    for edit, words in [
        (lambda d: d.update(evil=1), "unknown key 'evil'"),
        (lambda d: d.update(version=2), "version 2"),
        (lambda d: d.update(name=["x"]), "name must be text"),
        (lambda d: d.update(nodes={}), "no list of nodes"),
        (lambda d: d["nodes"].__setitem__(3, "mul"), "node #3: a node is a JSON object"),
        (lambda d: d.update(passes=[{"y": 99}]), "pass 0"),
        (lambda d: d.update(passes=[{"grads": {"x": 1}}]), "pass 0"),
        (lambda d: d.update(passes=[{"order": [0, True]}]), "pass 0"),
    ]:
        with pytest.raises(GraphLoadError, match=words):
            at.load_graph(_edited(edit))
    with pytest.raises(GraphLoadError, match="not a JSON document"):
        at.load_graph('{"format": "asgteach-graph", "nodes": [')
    with pytest.raises(GraphLoadError, match="asgteach-graph"):
        at.load_graph("[]")
    nested = '{"format": "asgteach-graph", "nodes": [' + "[" * 100_000 + "]" * 100_000 + "]}"
    with pytest.raises(GraphLoadError):
        at.load_graph(nested)


# --- real graphs still load, and run to the same numbers everywhere ------------------------------------
def _unmarked(text: str) -> str:
    """A graph's JSON without its backward rules' shortcut marks (from_json does not load them)."""
    doc = json.loads(text)
    for n in doc["nodes"]:
        n.get("meta", {}).pop("shortcut", None)
    assert text == json.dumps(json.loads(text))   # (to_json writes json.dumps' own layout)
    return json.dumps(doc)


def _same_everywhere(g: at.Graph, outs: list[at.Tensor], feeds: dict[str, np.ndarray]) -> None:
    """``g`` after a JSON round trip: identical numpy values, and the GPU agrees with numpy."""
    h = at.load_graph(g.to_json())
    assert h.to_json() == _unmarked(g.to_json())
    loaded = [at.Tensor(h, t.node_id) for t in outs]
    for a, b in zip(at.run(outs, feeds, backend="numpy"), at.run(loaded, feeds, backend="numpy")):
        np.testing.assert_array_equal(a, b)
    run_both(loaded, feeds, f"{g.name} loaded from JSON")
    want = at.run(outs, {k: np.asarray(v, np.float32) if v.dtype.kind == "f" else v for k, v in feeds.items()},
                  backend="wgpu")
    got = at.run(loaded, {k: np.asarray(v, np.float32) if v.dtype.kind == "f" else v for k, v in feeds.items()},
                 backend="wgpu")
    for k, (a, b) in enumerate(zip(got, want)):
        assert_close(a, b, f"{g.name}: output {k} on wgpu, loaded vs built")


@pytest.mark.gpu
def test_an_mlp_and_its_gradient_round_trip_and_run_the_same_on_numpy_and_wgpu() -> None:
    rng = np.random.default_rng(0)
    with at.Graph("mlp") as g:
        x, t = at.input("x", (4, 3)), at.input("t", (4, 2))
        net = at.nn.MLP([3, 8, 2], activation="tanh", name="mlp")
        loss = at.nn.mse_loss(net(x), t)
        params = [at.Tensor(g, p.id) for p in g.parameters()]
        grads = at.grad(loss, params)
    feeds = {"x": rng.standard_normal((4, 3)), "t": rng.standard_normal((4, 2))}
    feeds.update({p.name: rng.standard_normal(p.shape) * 0.5 for p in g.parameters()})
    _same_everywhere(g, [loss, *grads], feeds)


@pytest.mark.gpu
def test_int_bool_and_float_constants_round_trip_and_run_the_same_on_numpy_and_wgpu() -> None:
    with at.Graph("constants") as g:
        table = at.input("table", (5, 3))
        ids = at.constant(np.array([4, 0, 2, 2]), name="ids")                 # int64
        mask = at.constant(np.array([True, False, True]), name="mask")        # bool: stored as 0.0 / 1.0
        scale = at.constant(np.array([[0.5], [-2.0], [1.0], [3.0]]), name="scale")
        rows = at.embedding(ids, table)
        y = rows * mask * scale + 1.5
        s = at.sum(y, axis=0)
    assert g.constants[ids.node_id].dtype == np.int64
    feeds = {"table": np.arange(15.0).reshape(5, 3) / 7}
    _same_everywhere(g, [y, s], feeds)


@pytest.mark.gpu
def test_a_constant_stored_as_bool_or_a_narrow_type_loads_as_written() -> None:
    """to_json writes what a graph holds; a hand-written file may store a mask as bools, ids as int32."""
    def narrow(doc: dict) -> None:
        doc["nodes"][1]["value"] = {"dtype": "bool", "data": [True, False, True]}
        doc["nodes"][2]["value"] = {"dtype": "int32", "data": [2, 0]}
    h = at.load_graph(_edited(narrow))
    assert h.constants[1].dtype == np.bool_ and h.constants[2].dtype == np.int32
    assert not h.constants[1].flags.writeable
    total = at.Tensor(h, 4)
    np.testing.assert_array_equal(at.run(total, {"x": X}, backend="numpy"), X @ np.array([1.0, 0.0, 1.0]))
    run_both([total], {"x": X}, "a bool constant loaded from JSON")


@pytest.mark.gpu
def test_an_edited_layer_norm_rule_runs_the_same_on_the_gpu_as_on_numpy() -> None:
    """A GPU plan runs layer_norm's input gradient as ONE kernel when its pass recognises the rule's nodes
    (wgpu_passes/layer_norm_dx.py). The kernel's eps must then be the one the loaded graph holds: a file whose
    rule says eps = 10 computes another gradient, and both backends must compute that one."""
    with at.Graph() as g:
        x = at.input("x", (4, 8))
        w = at.parameter("w", (8,))
        y = at.sum(at.layer_norm(x, w) ** 2)
        (dx,) = at.grad(y, [x])
    doc = json.loads(g.to_json())
    (eps,) = [n for n in doc["nodes"] if n["op"] == "constant" and n.get("value", {}).get("data") == 1e-5]
    eps["value"]["data"] = 10.0
    h = at.load_graph(json.dumps(doc))
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((4, 8)).astype(np.float32), "w": np.ones(8, np.float32)}
    out = at.Tensor(h, dx.node_id)
    want = at.run(out, feeds, backend="numpy")
    assert not np.allclose(want, at.run(dx, feeds, backend="numpy"), rtol=1e-2)   # the edit changed the gradient
    plan = at.compile([out], backend="wgpu")
    assert "1 LayerNorm input gradient" in str(plan.passes)                        # still one kernel on the GPU
    np.testing.assert_allclose(plan.run(feeds)[0], want, rtol=1e-4, atol=1e-5)
