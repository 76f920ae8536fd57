"""Make executed notebooks byte-stable, so re-running a lesson leaves its file unchanged.

Two things change on every execution although nothing the student sees does:
* each cell's ``metadata.execution`` timestamps — dropped;
* the random ``model_id`` of a widget view (at.show's GraphView) — replaced by a name
  made from the cell's position (the widget state is not stored, so no id refers to it).

Usage: python scripts/normalize-notebooks.py NOTEBOOK [NOTEBOOK ...]
"""

from __future__ import annotations

import json
import sys

WIDGET = "application/vnd.jupyter.widget-view+json"


def normalize(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    for c, cell in enumerate(nb.get("cells", [])):
        cell.get("metadata", {}).pop("execution", None)
        for k, out in enumerate(cell.get("outputs", [])):
            view = out.get("data", {}).get(WIDGET)
            if isinstance(view, dict) and "model_id" in view:
                view["model_id"] = f"asgteach-cell{c}-output{k}"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(nb, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        normalize(p)
