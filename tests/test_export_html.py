"""`jupyter nbconvert --to html --execute` of a lesson shows its graphs offline (issue 24, item 5).

nbconvert runs the kernel itself, with no browser attached, so ``at.show`` keeps each graph as its
picture (asgteach/frontend.py's ``headless_runner``): nbconvert's HTML puts the SVG inline. A
widget view there would be an empty box offline (its state and a widget manager come from a CDN).
The test converts a copy of a lesson with the plain command, checks the HTML holds one picture per
graph and that nothing of an output loads from another host, then opens the page in Chromium with
every request to another host refused and looks at the pictures.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "lessons" / "02-the-asg.ipynb"
WIDGET = "application/vnd.jupyter.widget-view+json"
ARTIFACTS = ROOT / "test-artifacts" / "export"
#: What nbconvert's own page template loads from a CDN (maths typesetting, require.js); no output needs it.
TEMPLATE_HOSTS = {"cdnjs.cloudflare.com", "cdn.jsdelivr.net", "unpkg.com"}


def _graph_cells(nb: dict) -> int:
    """Code cells whose committed outputs hold a graph (a widget view or its picture)."""
    return sum(1 for c in nb["cells"] if c["cell_type"] == "code" and any(
        WIDGET in o.get("data", {}) or "image/svg+xml" in o.get("data", {}) for o in c.get("outputs", [])))


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, int]:
    work = tmp_path_factory.mktemp("export")
    shutil.copy(LESSON, work / LESSON.name)
    jupyter = Path(sys.executable).with_name("jupyter")
    proc = subprocess.run([str(jupyter), "nbconvert", "--to", "html", "--execute", LESSON.name], cwd=work,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    graphs = _graph_cells(json.loads(LESSON.read_text(encoding="utf-8")))
    assert graphs >= 1, f"{LESSON.name} shows no graph any more: pick another lesson"
    return work / LESSON.with_suffix(".html").name, graphs


def _pictures(html: str) -> list[str]:
    """The graph pictures of the page as SVG text: inline, or in an <img> as base64 (nbconvert 7's way)."""
    inline = re.findall(r'<svg xmlns="http://www.w3.org/2000/svg" class="asg-picture.*?</svg>', html, re.S)
    srcs = re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html)
    encoded = [base64.b64decode(b).decode("utf-8") for b in srcs]
    return inline + [svg for svg in encoded if 'class="asg-picture' in svg]


def test_every_graph_is_its_picture_and_loads_nothing(exported) -> None:
    page, graphs = exported
    html = page.read_text(encoding="utf-8")
    pictures = _pictures(html)
    assert len(pictures) == graphs, f"{len(pictures)} pictures for {graphs} graphs"
    assert WIDGET not in html, "a widget view would be an empty box offline"
    for svg in pictures:
        assert "run this cell to click the nodes" in svg
        assert not re.search(r"(?:href|src)=|url\(|@import", svg), "a picture refers to nothing outside itself"
        assert re.findall(r"https?://[^\s\"'<>]+", svg) == ["http://www.w3.org/2000/svg"]
    # whatever else the page loads from another host is nbconvert's own template, in <head>, not an output
    loads = re.findall(r'<(?:script|link|img|iframe)[^>]*(?:src|href)="(https?://[^"/]+)', html)
    assert {u.split("//", 1)[1] for u in loads} <= TEMPLATE_HOSTS, loads
    body = html.split("<body", 1)[1]
    assert not re.search(r'<(?:script|img|iframe)[^>]*src="https?://', body), "an output loads from another host"


def test_the_pictures_show_in_a_browser_with_no_network(exported) -> None:
    from tests.browser.harness import browser

    page_path, graphs = exported
    refused: list[str] = []

    def route(r) -> None:
        if r.request.url.startswith(("file:", "data:")):
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser(1400, 1000) as page:
        page.route("**/*", route)
        page.goto(page_path.as_uri())
        page.wait_for_load_state("load")
        # each picture, inline or an <img> of SVG: drawn at its own size (an <img> that failed has no natural size)
        pictures = page.evaluate("""() => [...document.querySelectorAll('svg.asg-picture, img[src^="data:image/svg"]')]
            .filter(e => e.tagName !== 'IMG' || atob(e.src.split(',')[1]).includes('class="asg-picture'))
            .map((e, i) => { e.setAttribute('data-picture', i); const r = e.getBoundingClientRect();
                             return {w: r.width, h: r.height, natural: e.naturalWidth ?? r.width}; })""")
        assert len(pictures) == graphs
        for pic in pictures:
            assert pic["w"] > 200 and pic["h"] > 100 and pic["natural"] > 200, pic
        first = page.query_selector('[data-picture="0"]')
        first.scroll_into_view_if_needed()
        first.screenshot(path=str(ARTIFACTS / "nbconvert-offline-picture.png"))
    assert all(any(h in u for h in TEMPLATE_HOSTS) for u in refused), refused
