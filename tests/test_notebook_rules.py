"""The rules that make nbval's comparison of lessons/ and notebooks/ deliberate, not lucky.

nbval re-executes every notebook and compares each cell's outputs with the committed ones. Some outputs
cannot match byte for byte, and each kind is handled on purpose:

* **widgets** (``at.show``'s GraphView, a Graph or Tensor ending a cell): their model ids are random.
  nbval itself skips the widget-view mimetype, but the view's text and static-HTML copies would still be
  compared and tie every lesson to the exact markup of ``asgteach/widgets/static.py``. Rule: a cell that
  shows a graph carries nbval's tag ``nbval-ignore-output`` and a metadata field ``nbval_why`` naming the
  widget, so nbval runs it (an error still fails) but compares nothing.
* **figures**: nbval skips ``image/png`` by design; their text (``<Figure size ... with N Axes>``) is
  still compared, which checks the figure's layout. Nothing to mark.
* **anything else machine-dependent** (timings, adapters): the same tag and ``nbval_why``, so every ignored
  output says why it is ignored.
* **no test markers in the code a student reads**: no ``# NBVAL_...`` comment in any cell's source (nbval's
  cell tags do the same job from the metadata, which a reader does not see).
* **no saved widget state** in a notebook's metadata: it changes on every run and weighs ~100 KB per view
  (``scripts/run-notebooks`` executes with ``store_widget_state=False``).
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted([*ROOT.glob("lessons/*.ipynb"), *ROOT.glob("notebooks/*.ipynb")])
WIDGET = "application/vnd.jupyter.widget-view+json"
IGNORE = "nbval-ignore-output"
SHOWS_A_GRAPH = re.compile(r"\bat\.show\(")


def _cells(path: Path) -> list[tuple[int, str, list, dict]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for k, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            out.append((k, src, cell.get("outputs", []), cell.get("metadata", {})))
    return out


def _has_widget_output(outputs: list) -> bool:
    return any(WIDGET in o.get("data", {}) for o in outputs)


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 10


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_widget_cells_are_ignored_on_purpose(path: Path) -> None:
    for k, src, outputs, meta in _cells(path):
        if not (_has_widget_output(outputs) or SHOWS_A_GRAPH.search(src)):
            continue
        assert IGNORE in meta.get("tags", []), (
            f"{path.name}, cell {k} shows a graph widget: tag it '{IGNORE}' (widget ids and static HTML are not "
            f"compared), got tags {meta.get('tags')}")
        assert "widget" in meta.get("nbval_why", ""), (
            f"{path.name}, cell {k}: its metadata 'nbval_why' must say why, naming the widget, e.g. "
            "'an interactive widget: nbval runs this cell but compares no widget output'")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_ignored_output_says_why(path: Path) -> None:
    for k, src, _, meta in _cells(path):
        assert "NBVAL" not in src, (
            f"{path.name}, cell {k}: a '# NBVAL_...' comment in code a student reads; use nbval's cell tag "
            f"'{IGNORE}' and a metadata field 'nbval_why' instead")
        if IGNORE in meta.get("tags", []):
            assert len(meta.get("nbval_why", "").strip()) > 10, (
                f"{path.name}, cell {k} is tagged '{IGNORE}': its metadata 'nbval_why' must say why")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_saved_widget_state(path: Path) -> None:
    metadata = json.loads(path.read_text(encoding="utf-8"))["metadata"]
    assert "widgets" not in metadata, (
        f"{path.name} stores widget state in its metadata: re-execute it with ./scripts/run-notebooks "
        "(store_widget_state=False) after deleting metadata['widgets']")


def test_nbval_skips_widget_and_image_data() -> None:
    """The rules above lean on nbval's own skip list: keep it checked when nbval is upgraded."""
    from nbval.plugin import IPyNbFile

    source = inspect.getsource(IPyNbFile.__init__)
    for mimetype in (WIDGET, "image/png"):
        assert f"'{mimetype}'" in source, f"nbval no longer skips {mimetype}: revisit tests/test_notebook_rules.py"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_notebooks_are_normalized(path: Path) -> None:
    """Re-executing a lesson must leave its file unchanged: no execution timestamps, and
    widget views named by position (scripts/normalize-notebooks.py, run by run-notebooks)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for k, cell in enumerate(nb["cells"]):
        assert "execution" not in cell.get("metadata", {}), (
            f"{path.name}, cell {k}: execution timestamps are committed; re-run ./scripts/run-notebooks {path.name}")
        for j, out in enumerate(cell.get("outputs", [])):
            view = out.get("data", {}).get(WIDGET)
            if view:
                assert view["model_id"] == f"asgteach-cell{k}-output{j}", (
                    f"{path.name}, cell {k}: a random widget model id is committed; re-run ./scripts/run-notebooks")
