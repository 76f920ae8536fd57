"""Progress (asgteach/progress.py): a tqdm bar in a terminal or a notebook, plain lines in a log, nothing when off.

A log must get no carriage returns (tqdm's way of redrawing a bar in place) and a line per tenth
of the work; the Trainer's fit, gradcheck and ``asgteach check`` all go through the one helper.
"""

from __future__ import annotations

import io
import os
import re
import select
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import asgteach as at
from asgteach import progress
from asgteach.opcheck import sweep
from asgteach.progress import Progress

LINE = re.compile(r"^training: (\d+)/(\d+) steps \((\d+)%\), \d+\.\d s, loss (\S+)$")


@pytest.fixture(autouse=True)
def _progress_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASGTEACH_NO_PROGRESS", raising=False)
    monkeypatch.setattr(progress, "EVERY_SECONDS", float("inf"))  # lines by the work done only, however slow


def _tiny_trainer() -> tuple[at.nn.Trainer, dict]:
    rng = np.random.default_rng(0)
    with at.Graph():
        x, t = at.input("x", (8, 2)), at.input("t", (8, 1))
        loss = at.mean((at.nn.MLP([2, 4, 1])(x) - t) ** 2)
    return at.nn.Trainer(loss, at.optim.SGD(lr=0.1)), {x: rng.standard_normal((8, 2)), t: rng.standard_normal((8, 1))}


def test_a_log_gets_one_line_per_tenth_and_no_carriage_return() -> None:
    log = io.StringIO()
    assert progress.mode(log) == "lines"
    with Progress(1000, "training", "step", stream=log) as bar:
        for i in range(1000):
            bar.update(1, loss=1.0 / (i + 1))
    text = log.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert [LINE.match(line).groups()[:3] for line in lines] == [(str(k), "1000", str(k // 10))
                                                                   for k in range(100, 1001, 100)], lines
    assert lines[-1].endswith("loss 0.001")


def test_fit_with_stderr_in_a_log(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    tr, feeds = _tiny_trainer()
    losses = tr.fit(feeds, steps=50)
    err = capsys.readouterr().err
    assert "\r" not in err, repr(err[:300])
    found = [LINE.match(line) for line in err.splitlines()]
    assert all(found), err
    assert [int(m.group(1)) for m in found] == list(range(5, 51, 5))
    assert float(found[-1].group(4)) == pytest.approx(losses[-1], rel=1e-3)  # the loss of the step it names

    monkeypatch.setenv("ASGTEACH_NO_PROGRESS", "1")
    tr.fit(feeds, steps=50)
    assert capsys.readouterr().err == ""


def test_gradcheck_and_op_sweep_in_a_log(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    with at.Graph():
        x = at.input("x", (3, 4))
        y = at.sum(at.tanh(x))
    monkeypatch.setenv("ASGTEACH_NO_PROGRESS", "1")  # does not hide what is asked for by name
    assert at.gradcheck(y, [x], {x: np.full((3, 4), 0.3)}, progress=True).ok
    err = capsys.readouterr().err
    assert "\r" not in err
    # 25 graph runs (1 backward + 2 x 12 forward); leave=False: no closing line beyond the tenths
    assert err.splitlines()[0].startswith("gradcheck: 3/25 runs (12%), ")
    assert err.splitlines()[-1].startswith("gradcheck: 25/25 runs (100%), ")

    monkeypatch.delenv("ASGTEACH_NO_PROGRESS")
    results = sweep(["numpy"], ["add", "mul", "tanh"])
    assert all(r.results["numpy"][0] for r in results)
    err = capsys.readouterr().err
    assert [line.split(",")[0] for line in err.splitlines()] == [f"checking ops: {k}/3 ops ({100 * k // 3}%)"
                                                                 for k in (1, 2, 3)], err


def test_delay_unknown_total_and_off() -> None:
    log = io.StringIO()
    with Progress(100, "quick", "run", stream=log, delay=3600) as bar:  # a quick loop shows nothing
        bar.update(100)
    assert log.getvalue() == ""
    with Progress(None, "batches", "step", stream=log) as bar:  # no total: a last line at the end
        for _ in range(7):
            bar.update(1, loss=np.float32(0.5))
    assert re.fullmatch(r"batches: 7 steps, \d+\.\d s, loss 0\.5\n", log.getvalue()), log.getvalue()
    log = io.StringIO()
    with Progress(10, "silent", "step", stream=log, show=False) as bar:
        bar.update(10)
    assert log.getvalue() == "" and bar.disable


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_a_terminal_gets_the_tqdm_bar() -> None:
    leader, follower = os.openpty()
    with os.fdopen(follower, "w") as tty:
        assert progress.mode(tty) == "bar"
        with Progress(20, "training", "step", stream=tty) as bar:
            for _ in range(20):
                bar.update(1, loss=0.25)
        tty.flush()
        drawn = b""
        while select.select([leader], [], [], 2.0)[0]:   # a pty hands its bytes over in pieces: read them all
            chunk = os.read(leader, 65536)
            if not chunk:
                break
            drawn += chunk
            if b"20/20" in drawn:
                break
        drawn = drawn.decode()
    os.close(leader)
    assert "\r" in drawn and "training: 100%" in drawn and "20/20" in drawn, repr(drawn)


FIT = """
import numpy as np, asgteach as at
rng = np.random.default_rng(0)
x, t = at.input("x", (8, 2)), at.input("t", (8, 1))
loss = at.mean((at.nn.MLP([2, 4, 1])(x) - t) ** 2)
at.nn.Trainer(loss, at.optim.SGD(lr=0.1)).fit({x: rng.standard_normal((8, 2)), t: rng.standard_normal((8, 1))},
                                              steps=200)
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["file", "pipe"])
def test_a_script_with_stderr_redirected(where: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ASGTEACH_NO_PROGRESS"}
    # bytes, not text: reading text would turn each "\r" into "\n" (universal newlines) and hide it
    if where == "file":
        with (tmp_path / "log").open("wb") as log:
            proc = subprocess.run([sys.executable, "-c", FIT], stderr=log, env=env, timeout=120)
        raw = (tmp_path / "log").read_bytes()
    else:
        proc = subprocess.run([sys.executable, "-c", FIT], capture_output=True, env=env, timeout=120)
        raw = proc.stderr
    err = raw.decode()
    assert proc.returncode == 0, err
    assert b"\r" not in raw, raw[:300]  # the code before asgteach.progress wrote 22 of them here (tqdm's redraws)
    assert [int(LINE.match(line).group(1)) for line in err.splitlines()] == list(range(20, 201, 20)), err


@pytest.mark.slow
def test_a_notebook_kernel_keeps_the_tqdm_bar(tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import os; os.environ.pop('ASGTEACH_NO_PROGRESS', None)\n"
                                          "from asgteach import progress\nprint(progress.mode())"),
                nbformat.v4.new_code_cell(FIT)]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert nb.cells[0].outputs[0]["text"] == "bar\n"
    fit_outputs = nb.cells[1].outputs
    assert not any("training: " in o.get("text", "") for o in fit_outputs), fit_outputs  # no plain lines
    # tqdm.auto's notebook bar: a widget (ipywidgets is installed here)
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in fit_outputs), fit_outputs
