"""Re-running notebook cells (issue 11, section 1), tried in a real IPython shell.

A student re-runs cells again and again, out of order, after editing them, on the default
graph. Each test drives ``IPython.core.interactiveshell.InteractiveShell.run_cell`` the way
a kernel does, and checks that a re-run gives what the first run gave.
"""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell

import asgteach as at
from asgteach.backends import cached_plans


@pytest.fixture
def shell():
    """A real IPython shell with asgteach imported, on a fresh default graph."""
    sh = InteractiveShell.instance()
    at.reset()
    sh.user_ns.clear()
    sh.init_user_ns()

    def run(code: str, cell_id: str | None = None):
        result = sh.run_cell(code, store_history=True, cell_id=cell_id)
        error = result.error_before_exec or result.error_in_exec
        if error is not None:
            raise AssertionError(f"cell failed: {type(error).__name__}: {error}\n--- cell ---\n{code}")
        return result

    run("import numpy as np\nimport asgteach as at")
    yield sh, run
    at.reset()


BUILD = """
net = at.nn.MLP([2, 4, 1], activation="tanh", name="mlp")
x = at.input("x", (3, 2))
y = at.sum(net(x))
"""
RUN = """
feeds = {"x": np.ones((3, 2)), **{t.name: np.full(t.shape, 0.1) for t in net.parameters()}}
out = float(at.run(y, feeds))
"""
TRAIN = """
t = at.input("t", (3, 1))
loss = at.nn.mse_loss(net(x), t)
tr = at.Trainer(loss, optimizer=at.optim.SGD(lr=0.1), seed=0)
hist = tr.fit({"x": np.ones((3, 2)), "t": np.zeros((3, 1))}, steps=3, progress=False)
"""


def test_rerunning_cells_in_any_order_gives_the_first_result(shell) -> None:
    sh, run = shell
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a re-run of the same cell owes the student no notice
        run(BUILD)
        run(RUN)
        first = sh.user_ns["out"]
        for code in (BUILD, RUN, BUILD, BUILD, RUN, RUN, BUILD, RUN):
            run(code)
            if code is RUN:
                assert sh.user_ns["out"] == first
        run(TRAIN)
        first_hist = list(sh.user_ns["hist"])
        for code in (TRAIN, BUILD, TRAIN, TRAIN, BUILD, RUN, TRAIN):
            run(code)
        assert sh.user_ns["hist"] == first_hist
        assert sh.user_ns["out"] == first
    g = at.default_graph()
    assert g.find("x").id == sh.user_ns["x"].node_id   # by name means the newest
    assert g.find("mlp.0.weight").id == sh.user_ns["net"].parameters()[0].node_id


def test_edited_cell_with_jupyter_cell_id_rebinds_without_notice(shell) -> None:
    """Jupyter sends a cell id: editing the cell (other text) and re-running it is the same cell."""
    sh, run = shell
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(BUILD, cell_id="cell-a")
        run(BUILD.replace("[2, 4, 1]", "[2, 8, 1]").replace('"x", (3, 2)', '"x", (5, 2)'), cell_id="cell-a")
        run(RUN.replace("(3, 2)", "(5, 2)"), cell_id="cell-b")
    assert sh.user_ns["net"].parameters()[0].shape == (2, 8)
    assert at.default_graph().find("x").shape == (5, 2)


def test_auto_named_layers_keep_their_names_across_reruns(shell) -> None:
    sh, run = shell
    cell = "a = at.nn.Linear(2, 3)\nb = at.nn.Linear(3, 1)\nnames = sorted(at.nn.Sequential(a, b).named_parameters())"
    run(cell)
    first = sh.user_ns["names"]
    assert first == ["linear.bias", "linear.weight", "linear_1.bias", "linear_1.weight"]
    for _ in range(3):
        run(cell)
        assert sh.user_ns["names"] == first


def test_a_different_cell_rebuilding_a_named_layer_gives_one_notice(shell) -> None:
    sh, run = shell
    run(BUILD)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run('net2 = at.nn.MLP([2, 4, 1], name="mlp")')   # another cell, the same layer name
    notices = [w for w in caught if issubclass(w.category, at.NameReboundWarning)]
    assert len(notices) == 1, [str(w.message) for w in caught]      # one line for the whole MLP
    assert "'mlp'" in str(notices[0].message) and "<ipython-input" in str(notices[0].message)
    assert at.default_graph().find("mlp.0.weight").id == sh.user_ns["net2"].parameters()[0].node_id
    # the old net still runs, fed by its Tensors (by name, "mlp.0.weight" now means the new one)
    run("old = at.run(y, {x: np.ones((3, 2)), **{t: np.full(t.shape, 0.1) for t in net.parameters()}})")
    with pytest.raises(AssertionError, match="now means parameter"):
        run(RUN)


def test_memory_stays_bounded_over_40_reruns_of_a_cell_with_an_8mb_constant(shell) -> None:
    sh, run = shell
    cell = """
c = at.constant(np.ones((1024, 1024)))          # 8 MB of float64
z = at.input("z", (1024, 1024))
s = float(at.run(at.sum(z * c), {"z": np.ones((1024, 1024))}))
"""
    run(cell)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(40):
            run(cell)
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert sh.user_ns["s"] == 1024 * 1024
    g = at.default_graph()
    assert len(g.constants) == 1                   # only the live cell's constant is held
    assert len(cached_plans(g)) <= 1               # and only its plan
    assert grown < 24 * 2**20, f"grew by {grown / 2**20:.1f} MB over 40 re-runs (each run makes 8 MB)"


def test_plans_and_constants_of_a_live_cell_survive_sweeps(shell) -> None:
    sh, run = shell
    run("k = at.constant(np.arange(3.0))\nq = at.input('q', (3,))\nr = q * k")
    run("v1 = at.run(r, {'q': np.ones(3)})")
    for _ in range(3):
        run("unrelated = at.constant(np.zeros(5)) + 1")
    run("v2 = at.run(r, {'q': np.ones(3)})")
    np.testing.assert_array_equal(sh.user_ns["v2"], [0.0, 1.0, 2.0])
    assert sh.user_ns["k"].node_id in at.default_graph().constants


def test_out_of_order_cells_feed_the_newest_input_by_name(shell) -> None:
    sh, run = shell
    run("x = at.input('x', (2,))", cell_id="c1")
    run("y = x * 2", cell_id="c2")
    run("x = at.input('x', (2,))", cell_id="c1")   # re-run c1 only: y still reads the OLD x
    with pytest.raises(at.FeedError, match="missing feed"):
        sh.user_ns["y"].graph  # noqa: B018 - the graph is there
        at.run(sh.user_ns["y"], {"x": np.ones(2)})
    run("y = x * 2", cell_id="c2")                  # re-running c2 catches up
    run("v = at.run(y, {'x': np.ones(2)})", cell_id="c3")
    np.testing.assert_array_equal(sh.user_ns["v"], [2.0, 2.0])


# -- the rules without a shell ------------------------------------------------------------------

def test_explicit_graph_refuses_two_parameters_of_one_name_naming_both_lines() -> None:
    with at.Graph():
        at.parameter("w", (2, 2))
        with pytest.raises(ValueError) as err:
            at.parameter("w", (3,))
    text = str(err.value)
    assert "'w'" in text and text.count("test_notebook_cells.py:") == 2
    assert 'at.parameter("w", (2, 2))' in text and 'at.parameter("w", (3,))' in text


def test_explicit_graph_refuses_a_second_layer_of_one_name() -> None:
    with at.Graph():
        at.nn.Linear(2, 3, name="enc")
        with pytest.raises(ValueError, match="'enc.weight' already exists"):
            at.nn.MLP([3, 2], name="enc")   # MLP's first layer would be enc.0: not a clash...
            at.nn.Linear(3, 2, name="enc")  # ...but this one is


def test_trainer_refuses_a_loss_over_two_parameters_of_one_name() -> None:
    at.reset()
    try:
        x = at.input("x", (4, 2))
        old = at.nn.Linear(2, 1, name="fc")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", at.NameReboundWarning)
            new = at.nn.Linear(2, 1, name="fc")
        loss = at.mean((old(x) - new(x)) ** 2)
        with pytest.raises(ValueError, match="two parameters named 'fc.weight'"):
            at.Trainer(loss, optimizer=at.optim.SGD(lr=0.1))
    finally:
        at.reset()


def test_reset_starts_a_fresh_default_graph_and_old_tensors_still_run() -> None:
    old_x = at.input("x", (2,))
    old_y = old_x * 3
    fresh = at.reset()
    assert at.default_graph() is fresh and len(fresh.nodes) == 0
    np.testing.assert_array_equal(at.run(old_y, {old_x: np.ones(2)}), [3.0, 3.0])
    new_x = at.input("x", (2,))
    with pytest.raises(ValueError, match=r"before at\.reset\(\)"):
        old_y + new_x
    at.reset()


def test_script_default_graph_collects_when_constants_grow(monkeypatch) -> None:
    g = at.reset()
    monkeypatch.setattr(g.session, "COLLECT_BYTES", 1_000_000)   # (the default graph's session sweeps)
    keep = at.constant(np.ones(1000))                       # 8 kB, held
    for _ in range(10):
        tmp = at.constant(np.ones(50_000)) * 2               # 400 kB each, dropped at rebinding
    assert g.collections >= 1
    held = sum(v.nbytes for v in g.constants.values())
    assert held <= 4 * 400_000                               # not 10 x 400 kB
    assert keep.node_id in g.constants and tmp.node.inputs[0] in g.constants
    np.testing.assert_array_equal(at.run(keep * 1), np.ones(1000))
    at.reset()


def test_a_released_node_rebuilt_from_its_id_is_refused_clearly() -> None:
    g = at.Graph()
    with g:
        c = at.constant(np.ones(3))
        cid = c.node_id
    del c
    g.collect()
    assert cid in g.released and cid not in g.constants
    with pytest.raises(at.ReleasedError, match="released"):
        at.run(at.Tensor(g, cid))


def test_from_json_fails_at_load_time_on_an_unknown_op() -> None:
    with at.Graph() as g:
        x = at.input("x", (2,))
        at.relu(x)
    text = g.to_json().replace('"op": "relu"', '"op": "relu_from_the_future"')
    with pytest.raises(ValueError, match=r"node #1 .*'relu_from_the_future'.*not registered"):
        at.load_graph(text)
    assert [n.op for n in at.load_graph(g.to_json()).nodes] == ["input", "relu"]


def test_a_check_failing_after_a_rerun_above_the_answer_says_what_may_have_happened(shell) -> None:
    """A setup cell re-run after the answer draws a new point: the check fails (rightly), and says that cells ran
    since the answer; a check right after its answer says nothing of the sort."""
    sh, run = shell
    run("from asgteach.grading.exercises import exercise, check, ExerciseError\n"
        "from asgteach.grading.checks import check_array")
    setup = "point = np.random.default_rng().standard_normal(3)"
    answer = "with exercise(1):\n    doubled = 2 * point"
    check = "with check(1):\n    check_array(doubled, 2 * point, name='doubled')"
    for cell in (setup, answer, check):
        run(cell)
    run(setup)                                        # out of order: a new point, the old answer
    result = sh.run_cell(check, store_history=True)
    err = result.error_in_exec
    assert type(err).__name__ == "ExerciseError", err
    answered = sh.execution_count - 3                 # (the answer's In [n]: three cells ago)
    assert f"Cells have run since your answer cell, In [{answered}]" in str(err)
    assert "run that section's cells again in order" in str(err)
    run(answer)
    result = sh.run_cell(check.replace("2 * point", "3 * point"), store_history=True)   # a wrong check, adjacent
    assert "Cells have run since" not in str(result.error_in_exec)
