"""A lesson opened before anything runs (untrusted) shows every graph as its picture (issue 24, item 3).

What every student sees first: a lesson with its committed outputs, not yet run, in a notebook
JupyterLab does not trust (no signature). JupyterLab then shows only *safe* output types, the
first in its order: sanitized HTML, then the PNG; never an SVG, never a widget. Before this issue
the output carried HTML holding an SVG, which the sanitizer cut down to a garbled run of label
text plus a false note that "the Jupyter widgets extension is not enabled".

Two notebooks, both made from copies of real lessons executed in a temporary folder (the
committed lessons are left alone):

* **committed style**: executed as ``scripts/run-notebooks`` does (nbconvert, no widget state):
  each graph output is its picture (PNG + SVG);
* **saved from a live session**: executed with ``ASGTEACH_VIEW=widget``, so each output is what a
  student's saved notebook holds: the widget view with the picture beside it.

Both are opened untrusted and unrun in a real JupyterLab (Debian Chromium). Every graph output must
be one PNG image at its own size (labels stay >= 11 px), with no text of its own in the output,
and the page must hold none of the old failure texts. Screenshots of each picture land in
test-artifacts/browser/picture-*.png (look at them).

Then a notebook is RUN there, with ``XDG_RUNTIME_DIR`` unset as on a hub (issue 24, item 4): the
clickable graph takes the picture's place, the GPU probe writes nothing into any cell, and
``asgteach doctor`` run from the notebook names JupyterLab.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import JupyterLab, Lab, browser, write_notebook

pytestmark = pytest.mark.slow  # a real JupyterLab and Chromium (./scripts/test runs it; the inner loop skips it)

ROOT = Path(__file__).resolve().parents[2]
LESSONS = ("03-chain-rule-and-reverse-mode.ipynb", "09-attention-and-a-transformer-block.ipynb")
WIDGET = "application/vnd.jupyter.widget-view+json"
#: texts that mean the picture did not come through: the old notes and widget errors (anywhere on the page),
#: and what the sanitizer left of the old SVG (in an output)
STRAY = ("extension is not enabled", "Error displaying widget", "Failed to load model class", "model not found",
         "static view")
GARBLED = ("#0 input", "→ (", "∂L/∂", "run this cell")


def _execute(src: Path, dest: Path, view: str | None) -> int:
    """Execute a copy of lesson ``src`` into ``dest`` as nbconvert does; the number of graph outputs it holds."""
    shutil.copy(src, dest)
    env = {**os.environ, "ASGTEACH_NO_PROGRESS": "1"}
    if view:
        env["ASGTEACH_VIEW"] = view
    jupyter = Path(sys.executable).with_name("jupyter")
    proc = subprocess.run([str(jupyter), "nbconvert", "--to", "notebook", "--execute", "--inplace",
                           "--ExecutePreprocessor.store_widget_state=False", dest.name], cwd=dest.parent, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    nb = json.loads(dest.read_text(encoding="utf-8"))
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    pictures = [i for i, o in enumerate(outputs) if "image/png" in o.get("data", {})
                and "asg-picture" in "".join(o["data"].get("image/svg+xml", ""))]
    assert not [o for o in outputs if "image/png" in o.get("data", {}) and WIDGET in o["data"]], \
        "a picture and a widget view in ONE output: a reopened notebook would show only the widget's error"
    # a live session's view is two outputs: the picture, then the widget view (which hides it while it lives)
    assert all((WIDGET in outputs[i + 1].get("data", {}) if i + 1 < len(outputs) else False) is (view == "widget")
               for i in pictures)
    return len(pictures)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lessons")
    expected = {}
    for name in LESSONS:
        for style, view in (("committed", None), ("saved", "widget")):
            dest = root / f"{style}-{name}"
            expected[dest.name] = _execute(ROOT / "lessons" / name, dest, view)
            assert expected[dest.name] >= 1, f"{name} shows no graph any more: pick another lesson"
    write_notebook(root / "live.ipynb", LIVE)
    # a data folder of its own: no notebook signature from anywhere, so every notebook opens untrusted;
    # no XDG_RUNTIME_DIR, as on a hub or in a container (the kernels inherit the server's environment)
    saved = {k: os.environ.get(k) for k in ("JUPYTER_DATA_DIR", "XDG_RUNTIME_DIR")}
    os.environ["JUPYTER_DATA_DIR"] = str(tmp_path_factory.mktemp("jupyter-data"))
    os.environ.pop("XDG_RUNTIME_DIR", None)
    # the notebook a student saved after a live run, reopened after its kernel died: trusted (JupyterLab signed
    # it on save), its widget views pointing at models no kernel holds any more
    jupyter = Path(sys.executable).with_name("jupyter")
    for name in LESSONS:
        nb = json.loads((root / f"saved-{name}").read_text(encoding="utf-8"))
        nb["metadata"]["asgteach_test"] = "reopened"   # other bytes than saved-*: a signature is of the content
        (root / f"reopened-{name}").write_text(json.dumps(nb), encoding="utf-8")
        expected[f"reopened-{name}"] = expected[f"saved-{name}"]
        subprocess.run([str(jupyter), "trust", f"reopened-{name}"], cwd=root, check=True, capture_output=True)
    # ipykernel forwards what C code writes to fd 2 into the cell, except under pytest (it sees
    # PYTEST_CURRENT_TEST): the server and its kernels must not inherit it, or a stray line could not show
    current = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        with JupyterLab(root=root) as server, browser(1400, 1000) as page:
            if current is not None:
                os.environ["PYTEST_CURRENT_TEST"] = current
            yield Lab(page, server), expected
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


#: a notebook run in the browser: the GPU probe inside a cell (a view probes in a thread, whose stderr the
#: kernel may send to any cell or none), a graph, the doctor
LIVE = [
    "import asgteach as at\nprint(at.backends.available())",
    "with at.Graph():\n    x = at.input('x', (2, 3))\n    w = at.parameter('w', (3, 4))\n"
    "    y = at.sum(at.tanh(x @ w))\n    at.grad(y, [x, w])\nat.show(y)",
    "import subprocess, sys\nprint(subprocess.run([sys.executable, '-m', 'asgteach', 'doctor'], capture_output=True,"
    " text=True).stdout)",
]

#: every output area of the notebook: its mime type, whether the page hides it, and for pictures the image's sizes
_OUTPUTS = """() => [...document.querySelectorAll('.jp-Notebook .jp-OutputArea-output')].map(o => {
  const img = o.querySelector('img');
  return {mime: o.getAttribute('data-mime-type') || '', text: o.innerText.trim(), hidden: o.offsetParent === null,
          alt: img ? img.alt : null, natural: img ? img.naturalWidth : 0, shown: img ? img.clientWidth : 0,
          height: img ? img.clientHeight : 0};
})"""


@pytest.mark.parametrize("style", ["committed", "saved"])
@pytest.mark.parametrize("lesson", LESSONS)
def test_every_graph_shows_as_its_picture_untrusted_and_unrun(lab, lesson: str, style: str) -> None:
    ui, expected = lab
    name = f"{style}-{lesson}"
    ui.open(name)
    page = ui.page
    page.wait_for_function("(n) => document.querySelectorAll('.jp-Notebook .jp-RenderedImage img').length >= n",
                           arg=expected[name], timeout=ui.timeout)
    page.wait_for_function("() => [...document.querySelectorAll('.jp-Notebook .jp-RenderedImage img')]"
                           ".every(i => i.complete && i.naturalWidth > 0)", timeout=ui.timeout)
    outputs = page.evaluate(_OUTPUTS)
    pictures = [o for o in outputs if o["mime"] == "image/png" and o["natural"] > 0]
    graphs = [o for o in pictures if o["natural"] >= 500]   # a graph's picture is at least the legend's width
    assert len(graphs) == expected[name], ui.fail(f"{name}: {len(graphs)} pictures for {expected[name]} graphs:"
                                                  f" {outputs}")
    assert not [o for o in outputs if o["mime"] in ("image/svg+xml", "text/html", WIDGET)], \
        ui.fail(f"{name}: an untrusted notebook showed an unsafe type: {outputs}")
    for o in graphs:
        assert o["text"] == "", ui.fail(f"{name}: text inside a picture's output: {o['text'][:200]!r}")
        # at its own size, or shrunk no further than 11 px labels from 12 px (a narrow window shrinks images)
        assert o["shown"] >= o["natural"] * 11 / 12, ui.fail(f"{name}: the picture is shrunk: {o}")
    body = page.inner_text(".jp-Notebook")
    assert not [s for s in STRAY if s in body], ui.fail(f"{name}: stray text {[s for s in STRAY if s in body]}")
    garbled = [o["text"][:120] for o in outputs if not o["mime"].startswith("application/vnd.jupyter.std")
               and any(g in o["text"] for g in GARBLED)]   # (a lesson's own prints may name nodes)
    assert not garbled, ui.fail(f"{name}: label text outside a picture: {garbled}")
    imgs = page.query_selector_all(".jp-Notebook .jp-RenderedImage img")
    big = [i for i in imgs if i.evaluate("i => i.naturalWidth") >= 500]
    for k, img in enumerate(big):   # the picture, and its whole cell (what a student sees around it)
        img.scroll_into_view_if_needed()
        ui.screenshot(f"picture-{style}-{Path(lesson).stem}-{k}", element=img)
        ui.screenshot(f"picture-cell-{style}-{Path(lesson).stem}-{k}", element=img.evaluate_handle(
            "i => i.closest('.jp-Cell')").as_element())


@pytest.mark.parametrize("lesson", LESSONS)
def test_a_saved_notebook_reopened_after_its_kernel_died_still_shows_every_picture(lab, lesson: str) -> None:
    """Trusted, its widget models gone: each widget view shows JupyterLab's "model not found" error
    (the widget renderer has no fallback), and the picture displayed just before it stays readable."""
    ui, expected = lab
    name = f"reopened-{lesson}"
    ui.open(name)
    page = ui.page
    sel = ".jp-Notebook .jp-OutputArea-output img"
    page.wait_for_function("([s, n]) => [...document.querySelectorAll(s)].filter(i => i.complete && "
                           "i.naturalWidth >= 500).length >= n", arg=[sel, expected[name]], timeout=ui.timeout)
    outputs = page.evaluate(_OUTPUTS)
    pictures = [o for o in outputs if o["mime"] in ("image/svg+xml", "image/png") and o["natural"] >= 500
                and not o["hidden"]]
    assert len(pictures) == expected[name], ui.fail(f"{name}: {len(pictures)} pictures shown for "
                                                    f"{expected[name]} graphs: {outputs}")
    for o in pictures:
        assert o["shown"] >= o["natural"] * 11 / 12, ui.fail(f"{name}: the picture is shrunk: {o}")
    img = page.query_selector_all(sel)[0]
    img.scroll_into_view_if_needed()
    ui.screenshot(f"picture-reopened-{Path(lesson).stem}", element=img.evaluate_handle(
        "i => i.closest('.jp-Cell')").as_element())


def test_a_run_draws_the_graph_the_gpu_probe_stays_quiet_and_the_doctor_sees_jupyterlab(lab) -> None:
    ui, _ = lab
    ui.open("live.ipynb")
    ui.run_all()
    ui.wait_idle_cells(len(LIVE))
    ui.wait_graph(0)
    outputs = ui.page.evaluate(_OUTPUTS)
    stderr = [o["text"] for o in outputs if o["mime"] == "application/vnd.jupyter.stderr"]
    assert not [t for t in stderr if "XDG" in t or "error:" in t], ui.fail(f"the GPU probe wrote into a cell: {stderr}")
    assert [o for o in outputs if o["mime"] in ("image/png", "image/svg+xml") and o["hidden"]], \
        ui.fail("the picture was not displayed before the live graph (a reopened notebook would lose it)")
    assert not [o for o in outputs if o["mime"] in ("image/png", "image/svg+xml") and o["natural"] >= 500
                and not o["hidden"]], \
        ui.fail("the picture stayed beside the live graph")
    doctor = next((o["text"] for o in outputs if "asgteach doctor" in o["text"]), "")
    assert "front-end: JupyterLab" in doctor, ui.fail(f"the doctor's report: {doctor[:1500]}")
    if "'wgpu'" in next((o["text"] for o in outputs if "numpy" in o["text"]), ""):
        assert "GPU probe messages" in doctor, doctor[:2000]
    ui.screenshot("picture-live-run")
