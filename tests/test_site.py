"""The course website (``./scripts/site``): built from the repository, then read offline in Chromium.

One build (scripts/site --out a temporary folder, so it installs its packages as an instructor's run would),
served by ``python -m http.server`` on 127.0.0.1 and opened in Debian's Chromium (tests/browser/harness.py). A
page may load only what the site itself holds: every request is recorded, and one that leaves 127.0.0.1 is
refused and fails the test. Screenshots of the index, a lesson and the API page land in test-artifacts/site/.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Iterator

import pytest
from browser.harness import browser, free_port

import asgteach as at

pytestmark = [
    pytest.mark.slow,  # builds the site and drives Chromium (./scripts/test runs it; the inner loop skips it)
    pytest.mark.skipif(sys.version_info < (3, 11), reason="the site's Sphinx 9 and MyST need Python >= 3.11"),
]

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "lessons").glob("*.ipynb"))
ARTIFACTS = ROOT / "test-artifacts" / "site"
GRAPH_MARK = "asg-picture"  # the class of the SVG picture that every at.show output carries (widgets/picture.py)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The site built from scratch (-E) by the script students and instructors run."""
    out = tmp_path_factory.mktemp("site") / "html"
    t0 = time.monotonic()
    proc = subprocess.run([str(ROOT / "scripts" / "site"), "--out", str(out), "-E"], cwd=ROOT,
                          capture_output=True, text=True, timeout=540)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"./scripts/site failed (exit {proc.returncode}):\n{log[-6000:]}"
    return {"out": out, "log": log, "seconds": time.monotonic() - t0}


@pytest.fixture(scope="module")
def base_url(site: dict[str, Any]) -> Iterator[str]:
    """The built site served on 127.0.0.1 (the server is stopped after the module)."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", "-b", "127.0.0.1", "-d", str(site["out"]),
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/index.html", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("python -m http.server did not answer") from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


class Reader:
    """A Chromium page that records every request and refuses those that leave the site's server."""

    def __init__(self, page: Any, base_url: str) -> None:
        self.page, self.base_url = page, base_url
        self.requests: list[str] = []
        page.on("request", lambda r: self.requests.append(r.url))
        page.route("**/*", lambda route: route.continue_() if self._local(route.request.url) else route.abort())

    def _local(self, url: str) -> bool:
        return url.startswith(self.base_url + "/") or url.startswith(("data:", "blob:", "about:"))

    def open(self, path: str) -> Any:
        """Go to ``path`` and wait until the network is quiet; assert nothing was asked of another host."""
        self.requests.clear()
        self.page.goto(f"{self.base_url}/{path}", wait_until="networkidle", timeout=60_000)
        outside = [u for u in self.requests if not self._local(u)]
        assert not outside, f"{path} asked for something outside the site (no CDN at view time): {outside}"
        return self.page

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path))
        return path


@pytest.fixture(scope="module")
def reader(base_url: str) -> Iterator[Reader]:
    with browser(width=1280, height=900) as page:
        yield Reader(page, base_url)


def graph_outputs(notebook: Path) -> int:
    """How many outputs of a notebook, as committed, carry the static picture of a graph."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    count = 0
    for cell in nb["cells"]:
        if "### BEGIN SOLUTION" in "".join(cell.get("source", [])):
            continue   # an exercise's answer: the site shows the student's version, without its outputs
        for output in cell.get("outputs", []):
            svg = output.get("data", {}).get("image/svg+xml", "")
            count += f'class="{GRAPH_MARK}' in ("".join(svg) if isinstance(svg, list) else svg)
    return count


def graph_images(page: Path) -> list[str]:
    """The images of a built page that are graph pictures (MyST-NB writes an SVG output as an <img> of a file)."""
    srcs = re.findall(r'<img[^>]*\bsrc="([^"]+\.svg)"', page.read_text(encoding="utf-8"))
    return [src for src in srcs if f'class="{GRAPH_MARK}' in (page.parent / src).read_text(encoding="utf-8")]


class _Resources(HTMLParser):
    """The URLs a page loads by itself: scripts, stylesheets, images, frames, media."""

    LOADS = {"script": "src", "img": "src", "iframe": "src", "source": "src", "audio": "src", "video": "src",
             "embed": "src", "object": "data", "link": "href"}

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = self.LOADS.get(tag)
        values = dict(attrs)
        if tag == "link" and not {"stylesheet", "icon", "preload", "modulepreload"} & set(
                (values.get("rel") or "").split()):
            return  # <link rel="next" href=...> is a link, not something the page loads
        if attr and values.get(attr):
            self.urls.append(values[attr])


def test_site_builds_without_warnings(site: dict[str, Any]) -> None:
    """Sphinx's warnings (the file scripts/site asks it to write beside the output; pip's own lines are not)."""
    log = Path(str(site["out"]) + ".doctrees") / "warnings.txt"
    warnings = log.read_text(encoding="utf-8").strip()
    assert not warnings, f"the site's build warns (docs/site/conf.py, or the page it names):\n{warnings}"
    print(f"./scripts/site -E took {site['seconds']:.0f} s")


def test_built_pages_load_nothing_from_outside(site: dict[str, Any]) -> None:
    """Every page, read without a browser: no script, stylesheet or image from another host, MathJax included."""
    out: Path = site["out"]
    pages = sorted(out.rglob("*.html"))
    assert len(pages) > len(LESSONS)
    external: dict[str, list[str]] = {}
    for page in pages:
        parser = _Resources()
        parser.feed(page.read_text(encoding="utf-8"))
        bad = [u for u in parser.urls if re.match(r"(https?:)?//", u, re.I)]
        if bad:
            external[str(page.relative_to(out))] = bad
    for css in sorted((out / "_static").rglob("*.css")):
        bad = re.findall(r"""url\(\s*['"]?((?:https?:)?//[^'")]+)""", css.read_text(encoding="utf-8", errors="replace"))
        if bad:
            external[str(css.relative_to(out))] = bad
    assert not external, f"pages that would load from another host: {external}"
    assert (out / "_static" / "mathjax" / "tex-chtml.js").is_file(), "MathJax must be served from the site"


def test_every_lesson_is_a_page_with_its_graphs(site: dict[str, Any]) -> None:
    """Each lesson renders from its committed outputs, and each at.show output as its picture (the SVG; a
    widget-view output, whose state is not stored, must not be what the page shows)."""
    out: Path = site["out"]
    for notebook in LESSONS:
        page = out / "lessons" / (notebook.stem + ".html")
        assert page.is_file(), f"no page for {notebook.name}"
        html = page.read_text(encoding="utf-8")
        assert len(graph_images(page)) == graph_outputs(notebook), f"{page.name}: graphs missing"
        assert "application/vnd.jupyter.widget-view+json" not in html, f"{page.name} shows an empty widget view"


def test_the_site_hands_out_no_answers(site: dict[str, Any]) -> None:
    """An exercise shows as in the student's notebook: the solution code cut to `raise NotImplementedError`, and
    the cell's output (what the answer printed) left out; the check cells after it keep theirs."""
    out: Path = site["out"]
    shown = 0
    for notebook in LESSONS:
        nb = json.loads(notebook.read_text(encoding="utf-8"))
        solutions = ["".join(c["source"]) for c in nb["cells"] if "### BEGIN SOLUTION" in "".join(c["source"])]
        html = (out / "lessons" / (notebook.stem + ".html")).read_text(encoding="utf-8")
        assert "BEGIN SOLUTION" not in html and "END SOLUTION" not in html, notebook.name
        for source in solutions:
            answer = source.split("### BEGIN SOLUTION", 1)[1].split("### END SOLUTION", 1)[0].strip().splitlines()
            # the answer's longest line does not appear on the page (escaped as the page escapes code)
            longest = max((ln.strip() for ln in answer), key=len)
            assert longest.replace("<", "&lt;").replace(">", "&gt;") not in html or len(longest) < 25, \
                (notebook.name, longest)
        shown += html.count('NotImplementedError</span><span class="p">(</span><span class="s2">"exercise')
    assert shown >= 10, f"only {shown} exercise placeholders on the lesson pages"


def test_index_lists_every_lesson(reader: Reader) -> None:
    page = reader.open("index.html")
    hrefs = page.eval_on_selector_all("article a[href]", "els => els.map(e => e.getAttribute('href'))")
    for notebook in LESSONS:
        assert f"lessons/{notebook.stem}.html" in hrefs, f"the index does not link {notebook.name}"
    for guide in ("docs/install.html", "docs/teaching.html", "api/index.html", "licence.html"):
        assert guide in hrefs, f"the index does not link {guide}"
    reader.screenshot("index")


def test_lesson_shows_its_graph_as_a_picture(reader: Reader, site: dict[str, Any]) -> None:
    """The first lesson with a graph: its picture is drawn, with nodes, at a size a class can read."""
    notebook = next(nb for nb in LESSONS if graph_outputs(nb))
    built = site["out"] / "lessons" / f"{notebook.stem}.html"
    src = graph_images(built)[0]
    svg = (built.parent / src).read_text(encoding="utf-8")
    assert svg.count('class="asg-node') >= 2, "the graph's picture has no nodes"
    sizes = {float(v) for v in re.findall(r'font-size="([0-9.]+)"', svg)}
    assert sizes and min(sizes) >= 11, f"the picture's labels are {sorted(sizes)} px at its own size"
    page = reader.open(f"lessons/{notebook.stem}.html")
    graph = page.locator(f'img[src="{src}"]').first
    graph.scroll_into_view_if_needed()
    page.wait_for_function("(i) => i.complete && i.naturalWidth > 0", arg=graph.element_handle())
    box = graph.bounding_box()
    assert box and box["width"] > 150 and box["height"] > 150, f"{notebook.name}: the graph is drawn at {box}"
    assert graph.is_visible()
    # drawn at its own size, or shrunk no further than 11 px labels from its 12 px ones (a narrow page shrinks it)
    natural = graph.evaluate("i => i.naturalWidth")
    assert box["width"] >= natural * 11 / 12, f"the picture is shrunk to {box['width']} of {natural} px"
    page.evaluate("window.scrollBy(0, -120)")
    reader.screenshot("lesson-graph")


def test_math_is_typeset_from_the_site(reader: Reader) -> None:
    """A lesson with formulas: MathJax (served from _static/mathjax) has typeset them."""
    notebook = next(nb for nb in LESSONS if "$$" in nb.read_text(encoding="utf-8"))
    page = reader.open(f"lessons/{notebook.stem}.html")
    page.wait_for_selector("mjx-container", timeout=30_000)
    assert page.locator("mjx-container").count() > 3


def test_api_page_documents_the_public_api(reader: Reader, site: dict[str, Any]) -> None:
    page = reader.open("api/asgteach.html")
    entry = page.locator('dt[id="asgteach.grad"]')
    assert entry.count() == 1, "asgteach.grad is not documented"
    assert "grad(" in entry.inner_text()
    doc = page.locator('dt[id="asgteach.grad"] + dd').inner_text()
    first_sentence = at.grad.__doc__.split(".")[0].replace("``", "")
    assert first_sentence in doc and "Returns" in doc.title(), f"at.grad's docstring is not shown: {doc[:300]}"
    reader.screenshot("api")
    html = (site["out"] / "api" / "asgteach.html").read_text(encoding="utf-8")
    modules = {"nn", "optim", "init", "ops"}
    missing = [name for name in at.__all__ if name not in modules and f'id="asgteach.{name}"' not in html]
    assert not missing, f"public names without an entry on the API page: {missing}"
    for name in modules:
        assert (site["out"] / "api" / f"{name}.html").is_file(), f"no API page for asgteach.{name}"
    nn_page = (site["out"] / "api" / "nn.html").read_text(encoding="utf-8")
    assert 'id="asgteach.nn.Linear"' in nn_page and 'id="asgteach.nn.mse_loss"' in nn_page


def test_search_finds_pages(reader: Reader) -> None:
    """Sphinx's own search (a local index): results for a word every lesson uses."""
    page = reader.open("search.html?q=gradient")
    results = page.locator("#search-results ul.search li")
    page.wait_for_function("() => document.querySelectorAll('#search-results ul.search li').length > 0",
                           timeout=30_000)
    hrefs = results.evaluate_all("els => els.map(e => e.querySelector('a').getAttribute('href'))")
    assert any("lessons/" in h for h in hrefs), f"search for 'gradient' found no lesson: {hrefs[:10]}"


def test_licence_page_shows_the_licence_files(reader: Reader) -> None:
    page = reader.open("licence.html")
    text = page.locator("article").inner_text()
    files = [p for p in (ROOT / "LICENSE", ROOT / "LICENSE-lessons") if p.is_file()]
    for path in files:
        first = path.read_text(encoding="utf-8").strip().splitlines()[0]
        assert first in text, f"the licence page does not show {path.name}"
