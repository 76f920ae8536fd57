"""The graded run's two sides: the plain-data channel, the remote handles and the bubblewrap sandbox.

The wire and the handles are tested in one process (fast). The sandbox tests run real submissions
through :func:`asgteach.grading.judge.judge_with_outputs`, each in bubblewrap: what the submission can
see, write and start, and what comes back to the judge. Without bubblewrap these fail under ``CI=true``
(with what to install) and skip loudly elsewhere. tests/test_grading_attacks.py runs the attacks through
nbgrader's own commands.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import asgteach as at
from asgteach.grading import sandbox
from asgteach.grading.judge import judge_with_outputs
from asgteach.grading.remote import Endpoint, Remote
from asgteach.grading.sandbox import Limits
from asgteach.grading.wire import Codec, WireError, receive, send

ROOT = Path(__file__).resolve().parents[1]


def needs_sandbox() -> None:
    ok, why = sandbox.available()
    if ok:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"graded mode's sandbox is missing on this CI machine: {why}")
    print(f"\n!!! SKIPPED: graded mode's sandbox is missing here: {why}", file=sys.stderr)
    pytest.skip(f"no sandbox: {why}")


# --- the wire (one process) ---------------------------------------------------------------------------------

def _codec() -> Codec:
    refs: list = []
    return Codec(lambda o: (refs.append(o), ["judge", len(refs)])[1], lambda s, n: refs[n - 1])


@pytest.mark.parametrize("value", [
    None, True, 3, -2**70, 1.5, float("inf"), "text", [1, [2.5]], (1, "a"), {"k": (1, 2), (1, 2): [3]},
    {1, 2}, frozenset({"a"}), b"\x00\xff", slice(1, None, 2), range(2, 9, 3), complex(1, -2),
    np.float32(1.25), np.int64(-7), np.bool_(True),
])
def test_plain_values_come_back_as_the_same_python_values(value) -> None:
    c = _codec()
    back = c.decode(c.encode(value))
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize("array", [np.array(2.0), np.arange(6.0).reshape(2, 3).T, np.array([1, 2], np.uint8),
                                   np.array([[True, False]]), np.array(["ab", "c"]), np.zeros((0, 3)),
                                   np.array([np.nan, -np.inf], np.float32)])
def test_arrays_keep_dtype_shape_and_bits(array) -> None:
    c = _codec()
    back = c.decode(c.encode(array))
    assert type(back) is np.ndarray and back.dtype == array.dtype and back.shape == array.shape
    assert back.tobytes() == np.ascontiguousarray(array).tobytes()


def test_objects_that_are_not_data_travel_as_references_never_as_themselves() -> None:
    class Anything:
        def __eq__(self, other):
            return True

    class Sneaky(str):
        pass

    c = _codec()
    for value in (Anything(), Sneaky("x"), np.array([Anything()], dtype=object), lambda: 1):
        assert "$ref" in c.encode(value)


@pytest.mark.parametrize("doc, words", [
    ({"$nd": "|O", "shape": [1], "data": ""}, "arrays of object"),
    ({"$nd": "<f8", "shape": [3], "data": "AAAA"}, "needs 24 bytes"),
    ({"$pickle": "gASV"}, "unknown tag"),
    ({"$mod": "os"}, "does not cross"),
    ({"$value": "builtins.object", "fields": {}}, "no value type"),
    ({"$d": [[[1], 2]]}, "hashable"),
])
def test_what_is_not_plain_data_is_refused(doc, words) -> None:
    with pytest.raises(WireError, match=words):
        _codec().decode(doc)


def test_a_message_longer_than_the_limit_is_refused_before_it_is_read() -> None:
    buf = io.BytesIO()
    send(buf, {"kind": "x", "pad": "y" * 100})
    buf.seek(0)
    with pytest.raises(WireError, match="limit"):
        receive(buf, limit=50)


def _pair(namespace: dict) -> tuple[Endpoint, threading.Thread]:
    """A judge endpoint talking to a sandbox endpoint in a thread of this process (no sandbox: the protocol)."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    judge = Endpoint("judge", os.fdopen(r1, "rb", buffering=0), os.fdopen(w2, "wb", buffering=0))
    served = Endpoint("sandbox", os.fdopen(r2, "rb", buffering=0), os.fdopen(w1, "wb", buffering=0),
                      namespace=namespace)
    thread = threading.Thread(target=served.serve, daemon=True)
    thread.start()
    return judge, thread


def test_a_remote_function_runs_on_its_side_and_its_result_is_data() -> None:
    calls = []

    def student(x, scale=1.0):
        calls.append(threading.current_thread().name)
        return x * scale

    class Anything:
        def __eq__(self, other):
            return True

    judge, thread = _pair({"student": student, "cheat": Anything(), "n": 3})
    f = judge.request("name", name="student")
    assert isinstance(f, Remote)
    out = f(np.arange(3.0), scale=2.0)
    assert type(out) is np.ndarray and out.tolist() == [0.0, 2.0, 4.0] and calls
    cheat = judge.request("name", name="cheat")
    assert isinstance(cheat, Remote) and (cheat == 5) is False and (cheat == cheat) is True
    with pytest.raises(NameError, match="nope"):
        judge.request("name", name="nope")
    judge.bye()
    thread.join(5)


def test_the_judge_answers_calls_of_what_it_handed_out_and_nothing_else() -> None:
    secret = {"key": 42}

    def reference(x):          # handed to the student's function as a callback
        return x + 1

    def student(fn):
        out = fn(1)
        try:
            fn.__globals__
        except AttributeError:
            pass
        try:
            getattr_result = fn.data           # a Remote asks its owner, which refuses
        except Exception as e:  # noqa: BLE001
            getattr_result = type(e).__name__ + ": " + str(e)
        return out, getattr_result

    judge, thread = _pair({"student": student})
    out, refused = judge.request("name", name="student")(reference)
    assert out == 2 and "only calls" in refused and secret["key"] == 42
    judge.bye()
    thread.join(5)


def test_graphs_cross_as_json_and_the_tensors_of_one_graph_stay_in_one_graph() -> None:
    with at.Graph() as g:
        a = at.input("a", (3,))
        da = at.grad(at.sum(at.tanh(a) * a), [a])[0]

    def double(t):
        return t * 2.0

    judge, thread = _pair({"da": da, "a": a, "double": double})
    da_j, a_j = judge.request("name", name="da"), judge.request("name", name="a")
    assert da_j.graph is a_j.graph and da_j.graph is not g and len(da_j.graph.nodes) == len(g.nodes)
    x = np.array([-1.0, 0.5, 2.0])
    assert np.allclose(at.run(da_j, {a_j: x}), np.tanh(x) + x * (1 - np.tanh(x) ** 2))
    with at.Graph() as mine:
        b = at.input("b", (2,))
    doubled = judge.request("name", name="double")(b)           # built on the sandbox's copy, appended here
    assert doubled.graph is mine and mine.nodes[doubled.node_id].op == "mul"
    assert at.run(doubled, {b: np.array([1.0, 2.0])}).tolist() == [2.0, 4.0]
    judge.bye()
    thread.join(5)


# --- the sandbox ------------------------------------------------------------------------------------------

def _notebook(*cells: tuple[str, str]) -> dict:
    """A course notebook from (kind, source) pairs: kinds context, answer1, check1, other."""
    out = []
    for i, (kind, source) in enumerate(cells):
        if kind == "context":
            meta = {"grade": False, "grade_id": f"cell-c{i}", "locked": True, "solution": False, "schema_version": 3}
        elif kind.startswith("answer"):
            meta = {"grade": False, "grade_id": f"exercise-{kind[6:]}", "locked": False, "solution": True,
                    "schema_version": 3}
        elif kind.startswith("check"):
            meta = {"grade": True, "grade_id": f"exercise-{kind[5:]}-check", "locked": True, "points": 1,
                    "solution": False, "schema_version": 3}
        else:
            meta = None
        out.append({"cell_type": "code", "id": f"c{i}", "metadata": {"nbgrader": meta} if meta else {},
                    "source": source, "outputs": [], "execution_count": None})
    return {"cells": out, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


IMPORTS = "import numpy as np\nimport asgteach as at\nfrom asgteach.lessons import check, exercise, check_array\n"
DOOR = "_os = np.testing._private.utils.os   # a door the source rules do not know: the sandbox must hold\n"


def _judge(answer: str, check: str = "with check(1, graded=True):\n    check_array(f(np.arange(3.0)), "
                                     "np.arange(3.0) ** 2, name='f(x)')\n", limits: Limits | None = None):
    nb = _notebook(("context", IMPORTS + DOOR), ("answer1", answer), ("check1", check))
    return judge_with_outputs(nb, "test-lesson", source_nb=nb, limits=limits or Limits(time=120, request_time=60))


def test_an_honest_answer_passes_and_its_output_comes_back() -> None:
    needs_sandbox()
    verdicts, outputs = _judge("with exercise(1):\n    def f(x):\n        return x * x\nprint('hi from the sandbox')\n")
    assert verdicts[1].passed, verdicts[1].message
    assert "hi from the sandbox" in outputs[1]["output"]


def test_the_sandbox_sees_python_and_asgteach_and_nothing_of_the_course_or_the_checkout() -> None:
    needs_sandbox()
    answer = (
        "seen = {p: _os.path.exists(p) for p in " + repr([
            str(ROOT / "instructor" / "answer_keys.py"), str(ROOT / "lessons"), str(ROOT / "tests"), str(ROOT / ".git"),
            str(ROOT / "asgteach" / "__init__.py"), os.path.expanduser("~/.bashrc"), "/etc/passwd", "/home",
            str(Path.home() / ".ssh")]) + "}\n"
        "print('SEEN', seen, _os.getuid(), _os.getcwd())\n"
        "print('ROOT', ','.join(sorted(_os.listdir(" + repr(str(ROOT)) + "))))\n"
        "with exercise(1):\n    def f(x):\n        return x * x\n")
    verdicts, outputs = _judge(answer)
    text = outputs[1]["output"]
    assert verdicts[1].passed, verdicts[1].message
    seen = eval(text.split("SEEN ", 1)[1].split("}", 1)[0] + "}")   # noqa: S307 - our own printout
    assert seen.pop(str(ROOT / "asgteach" / "__init__.py")) is True
    assert not any(seen.values()), seen
    assert " 65534 /tmp/work\n" in text          # nobody, in its private scratch folder
    listed = set(text.split("ROOT ", 1)[1].split()[0].split(","))
    assert listed <= {"asgteach", "shaders", ".venv"}     # of the checkout: the package and its Python, nothing else


def test_writes_stay_in_the_sandbox_and_no_process_outlives_it(tmp_path: Path) -> None:
    needs_sandbox()
    marker = tmp_path / "written-by-the-submission"
    answer = (
        f"_os.system('touch {marker} /tmp/work/mine; (sleep 3597.25 &)')\n"
        "pid = _os.fork()\n"
        "if pid == 0:\n    _os.execv('/bin/sleep', ['sleep', '3596.75'])\n"
        "with exercise(1):\n    def f(x):\n        return x * x\n"
        "class Bomb:\n    def __del__(self):\n"
        f"        _os.system('touch {marker}; sleep 3595.5 &')\n"
        "bomb = Bomb()\n")
    verdicts, _ = _judge(answer)
    assert verdicts[1].passed, verdicts[1].message
    time.sleep(1.0)
    assert not marker.exists()
    left = subprocess.run(["pgrep", "-f", "sleep 3597.25|sleep 3596.75|sleep 3595.5"], capture_output=True,
                          text=True).stdout.split()
    assert left == [], f"processes the submission started are still alive: {left}"


def test_the_sandbox_imports_the_asgteach_the_judge_runs() -> None:
    """A tree on PYTHONPATH (bench/autograde_time.py --tree), an editable install or a wheel: the same package."""
    needs_sandbox()
    nb = _notebook(("context", IMPORTS + "print('FILE', at.__file__)\n"),
                   ("answer1", "with exercise(1):\n    def f(x):\n        return x * x\n"),
                   ("check1", "with check(1, graded=True):\n    check_array(f(2.0), 4.0)\n"))
    verdicts, outputs = judge_with_outputs(nb, "test-lesson", source_nb=nb, limits=Limits(time=60, request_time=30))
    assert f"FILE {at.__file__}" in outputs[0]["output"], outputs[0]
    assert verdicts[1].passed, verdicts[1].message


def test_no_network_in_the_sandbox() -> None:
    needs_sandbox()
    probe = ("import socket\ns = socket.socket()\ntry:\n    s.connect(('127.0.0.1', 22))\n    net = 'connected'\n"
             "except OSError as e:\n    net = 'refused: ' + str(e)\nprint('NET', net)\n")
    # (in a context cell: an answer may not import socket at all; the sandbox must hold for every cell)
    nb = _notebook(("context", IMPORTS + probe),
                   ("answer1", "with exercise(1):\n    def f(x):\n        return x * x\n"),
                   ("check1", "with check(1, graded=True):\n    check_array(f(2.0), 4.0)\n"))
    verdicts, outputs = judge_with_outputs(nb, "test-lesson", source_nb=nb, limits=Limits(time=120, request_time=60))
    assert "NET refused" in outputs[0]["output"], outputs[0]
    assert verdicts[1].passed, verdicts[1].message


def test_a_hanging_answer_costs_its_time_limit_and_the_next_exercise_is_graded() -> None:
    needs_sandbox()
    nb = _notebook(("context", IMPORTS), ("answer1", "with exercise(1):\n    while True:\n        pass\n"),
                   ("check1", "with check(1, graded=True):\n    check_array(f(1.0), 1.0)\n"),
                   ("answer2", "with exercise(2):\n    def g(x):\n        return x + 1\n"),
                   ("check2", "with check(2, graded=True):\n    check_array(g(np.arange(3.0)), np.arange(1.0, 4.0))\n"))
    t0 = time.monotonic()
    verdicts, _ = judge_with_outputs(nb, "test-lesson", source_nb=nb, limits=Limits(time=120, request_time=8))
    assert time.monotonic() - t0 < 60
    assert not verdicts[1].passed and "stopped" in verdicts[1].message
    assert verdicts[2].passed, verdicts[2].message


def test_a_hanging_call_from_the_check_is_stopped_too() -> None:
    needs_sandbox()
    t0 = time.monotonic()
    verdicts, _ = _judge("with exercise(1):\n    def f(x):\n        while True:\n            pass\n",
                         limits=Limits(time=120, request_time=8))
    assert time.monotonic() - t0 < 60
    assert not verdicts[1].passed and "stopped" in verdicts[1].message


def test_memory_is_capped() -> None:
    needs_sandbox()
    answer = ("hoard = []\ntry:\n    while True:\n        hoard.append(np.ones(2 ** 26))\nexcept MemoryError:\n"
              "    print('CAPPED at', len(hoard) * 512, 'MiB')\n    hoard = None\n"
              "with exercise(1):\n    def f(x):\n        return x * x\n")
    verdicts, outputs = _judge(answer, limits=Limits(time=120, request_time=60, memory=2 * 1024**3))
    assert "CAPPED at" in outputs[1]["output"], outputs[1]
    assert verdicts[1].passed, verdicts[1].message


def test_an_object_that_equals_anything_does_not_pass_a_comparison() -> None:
    needs_sandbox()
    answer = ("class Anything:\n    def __eq__(self, other):\n        return True\n    def __array__(self, *a, **k):\n"
              "        return np.arange(3.0) ** 2\n"
              "with exercise(1):\n    def f(x):\n        return Anything()\n")
    verdicts, _ = _judge(answer)
    assert not verdicts[1].passed


def test_without_bubblewrap_graded_mode_refuses_to_grade(monkeypatch) -> None:
    monkeypatch.setenv("ASGTEACH_BWRAP", "/nonexistent/bwrap")
    with pytest.raises(sandbox.SandboxUnavailable, match="apt-get install bubblewrap"):
        _judge("with exercise(1):\n    def f(x):\n        return x * x\n")


def test_a_cell_that_breaks_its_rule_does_not_run_so_a_later_answer_cannot_use_what_it_imports() -> None:
    needs_sandbox()
    nb = _notebook(("context", IMPORTS),
                   ("answer1", "import os as helper\nwith exercise(1):\n    raise NotImplementedError('exercise 1')\n"),
                   ("check1", "with check(1, graded=True):\n    pass\n"),
                   ("answer2", "with exercise(2):\n    def g(x):\n        return x + len(helper.sep)\n"),
                   ("check2", "with check(2, graded=True):\n    check_array(g(np.arange(3.0)), np.arange(1.0, 4.0))\n"))
    verdicts, outputs = judge_with_outputs(nb, "test-lesson", source_nb=nb, limits=Limits(time=120, request_time=60))
    assert not verdicts[1].passed and "imports os" in verdicts[1].message
    assert not verdicts[2].passed and "helper" in verdicts[2].message, verdicts[2].message
    assert 1 not in outputs                                        # the broken cell never ran


def test_what_an_earlier_cell_binds_from_a_refused_name_is_refused_in_the_later_exercise() -> None:
    """Lesson 02's exercise 2 may not use at.run; exercise 1 may. An alias or a helper made in exercise 1's cell and
    used in exercise 2's is the same shortcut: refused there. A value computed with it is data, and stays allowed."""
    needs_sandbox()
    helper = "def helper(graph, feeds):\n    return at.run(graph.nodes, feeds)\n"
    for smuggle, refused in [("go = at.run\n", "go"), (helper, "helper"), ("s_value = at.run(1.0)\n", None)]:
        nb = _notebook(("context", IMPORTS),
                       ("answer1", smuggle + "with exercise(1):\n    pass\n"),
                       ("check1", "with check(1, graded=True):\n    pass\n"),
                       ("answer2", "with exercise(2):\n    def evaluate(graph, feeds):\n"
                                   f"        return {refused or 's_value'}\n"),
                       ("check2", "with check(2, graded=True):\n    pass\n"))
        verdicts, _ = judge_with_outputs(nb, "02-the-asg", source_nb=nb, limits=Limits(time=60, request_time=30))
        if refused:
            assert not verdicts[2].passed and f"uses {refused}, which an earlier cell made" in verdicts[2].message
        else:
            assert verdicts[2].passed, verdicts[2].message
