"""User text never becomes markup or maths in the views (issue 11, section 6: injection).

JupyterLab typesets ``text/html`` outputs with MathJax, with every TeX package loaded
(``\\href`` included) and ``$``, ``\\(``, ``\\[`` and ``\\begin`` as delimiters; the graph view's
inspector typesets only its own formula boxes (``.asg-math``, with KaTeX, trust off), but its
HTML keeps to the same rules, so that it stays safe wherever it is shown. A name that reaches a
typeset region is typeset: ``$\\href{javascript:...}{x}$`` becomes a link. These tests build
a graph in which every piece of user text is hostile (node and parameter names, layer names, a
user-registered op's name, a constant's label, the source file and line, attribute values) and
walk every page the views produce, in every language, checking that:

* no tag or attribute came from a name (no ``<img onerror>``, no ``<a href=javascript:>``);
* every text outside the regions MathJax skips (``class="mathjax_ignore"``, ``<code>``) is free
  of ``$`` and ``\\`` — so no delimiter of a name can reach MathJax;
* our own formula regions (``.asg-math``) hold no piece of a name;
* each name still shows, literally.

The browser half (tests/browser/test_injection_browser.py) checks the same in a real JupyterLab.
"""

from __future__ import annotations

import io
from html.parser import HTMLParser

import numpy as np
import pytest

import asgteach as at
from asgteach.ops.registry import REGISTRY, OpSpec, apply
from asgteach.widgets import elements as E
from asgteach.widgets.inspector import InspectorData, empty_html, group_html, node_html, prose
from asgteach.widgets.static import static_html
from asgteach.widgets.styles import legend_html
from asgteach.usertext import NO_MATH, plain_text, user_text

from wgpu_helpers import need_module

HREF = r"$\href{javascript:alert(1)}{x}$"
PAREN = r"\(x\)"
BRACKET = r"\[x\]"
IMG = "<img src=x onerror=alert(1)>"
ENV = r"\begin{align}\href{javascript:alert(2)}{e}\end{align}"
TICKS = r"a`$\href{javascript:alert(3)}{b}$`c"  # a backtick would close prose's <code> early
OP = r"$\href{javascript:alert(4)}{op}$"  # a user-registered op
HOSTILE = (HREF, PAREN, BRACKET, IMG, ENV, TICKS)
#: Pieces of the names above that must never reach a typeset formula.
MARKERS = ("javascript", "alert", "onerror", "<img", r"\(x", r"\[x", "align")
#: Elements MathJax (3 and 2) never looks inside, and the class that makes it skip one.
SKIP_TAGS = {"script", "noscript", "style", "textarea", "pre", "code", "annotation", "annotation-xml"}
IGNORE_CLASSES = {"mathjax_ignore", "tex2jax_ignore"}
VOID = {"br", "img", "hr", "wbr", "input", "meta", "link", "col", "area", "base", "source"}
SECTIONS = ("asg-name", "asg-what", "asg-formula", "asg-vjp", "asg-why", "asg-role", "asg-tech", "asg-values",
            "asg-local", "asg-bnote", "asg-step", "asg-group")
ALLOWED_TAGS = {"div", "span", "code", "b", "i", "p", "ul", "ol", "li", "details", "summary", "table", "tr", "td",
                "sub", "br", "img", "hr", "style", "svg", "defs", "marker", "path", "line", "text", "g", "title",
                "rect"}


class Walk(HTMLParser):
    """Each text of a page, sorted by where MathJax would see it: skipped, formula, or free."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)  # texts as the DOM holds them: &#36; is "$" again
        self.stack: list[tuple[str, bool, bool, str | None]] = []
        self.skipped: list[tuple[str | None, str]] = []
        self.formula: list[tuple[str | None, str]] = []
        self.free: list[tuple[str | None, str]] = []
        self.tags: list[tuple[str, dict]] = []
        self.sections: set[str] = set()
        self.feed(page)
        self.close()
        assert not self.stack, f"unclosed tags {[s[0] for s in self.stack]}"

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append((tag, a))
        if tag in VOID:
            return
        cls = set(a.get("class", "").split())
        _, skipped, formula, sec = self.stack[-1] if self.stack else ("", False, False, None)
        skipped = skipped or tag in SKIP_TAGS or bool(cls & IGNORE_CLASSES)
        formula = formula or "asg-math" in cls
        sec = next((c for c in SECTIONS if c in cls), sec)
        if sec:
            self.sections.add(sec)
        self.stack.append((tag, skipped, formula, sec))

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1][0] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        _, skipped, formula, sec = self.stack[-1] if self.stack else ("", False, False, None)
        (self.skipped if skipped else self.formula if formula else self.free).append((sec, data))

    def shown(self) -> str:
        return "".join(d for _, d in self.skipped)


def check_page(page: str, where: str) -> Walk:
    """Assert that ``page`` holds no markup, delimiter or formula made of user text."""
    w = Walk(page)
    for tag, attrs in w.tags:
        assert tag in ALLOWED_TAGS, f"{where}: a <{tag}> tag"
        for k, v in attrs.items():
            assert not k.startswith("on") and k not in ("href", "xlink:href"), f"{where}: <{tag} {k}=...>"
            if k in ("src", "style", "action", "formaction", "background", "poster"):  # where a URL would load
                assert "javascript:" not in v.lower(), f"{where}: javascript: in <{tag} {k}>"
        if tag == "img":
            assert "asg-heatmap" in attrs.get("class", "") and attrs["src"].startswith("data:image/png;base64,")
    for sec, text in w.free:  # what MathJax reads: no delimiter, no escape, no environment
        assert "$" not in text and "\\" not in text, f"{where} [{sec}]: typeset text {text!r}"
    for sec, text in w.formula:  # our own maths only
        assert not any(m in text for m in MARKERS), f"{where} [{sec}]: a name inside a formula: {text!r}"
    return w


@pytest.fixture
def hostile_op():
    # register() refuses such a name now (op names are identifiers); the view must still escape whatever an op's
    # name holds, so the spec goes into the registry by hand (defence in depth, not a way students take)
    REGISTRY[OP] = OpSpec(OP, "activation", 1, lambda s, **_: s, lambda a, **_: 2.0 * a, vjp=lambda c, g: (g * 2.0,))
    yield OP
    REGISTRY.pop(OP, None)


@pytest.fixture
def hostile(hostile_op, tmp_path):
    src = tmp_path / r"$\(f\)$.py"
    src.write_text(f'y = "{HREF} {IMG}"\n', encoding="utf-8")
    with at.Graph() as g:
        x = at.input(HREF, (3, 2))
        w = at.parameter(PAREN, (2, 2), layer=IMG, role="weight", layer_kind="Linear")
        b = at.parameter(BRACKET, (2,), layer=IMG, role="bias", init="zeros")
        v = at.parameter(TICKS, (2,), init="zeros", layer=ENV)  # generic role: `{name}` of `{layer}`
        c = at.constant(np.full(2, 0.5), name=ENV)
        h = at.matmul(x, w) + b
        z = apply(hostile_op, h, label=HREF) * c + v  # a user attribute value
        y = at.sum(at.tanh(z) + z)  # z used twice: a step sums two contributions
        at.grad(y, [x, w, b, v])
    for n in g.nodes:
        if n.op == "tanh":
            n.source = f"{src}:1"
    rng = np.random.default_rng(0)
    feeds = {x: rng.standard_normal((3, 2)), w: rng.standard_normal((2, 2)), b: rng.standard_normal(2),
             v: rng.standard_normal(2)}
    return g, y, feeds


def test_user_text_escapes_and_hides_from_mathjax() -> None:
    assert user_text(HREF) == f'<span class="{NO_MATH}">&#36;&#92;href{{javascript:alert(1)}}{{x}}&#36;</span>'
    assert plain_text(IMG) == "&lt;img src=x onerror=alert(1)&gt;"
    assert plain_text('"\'&') == "&quot;&#x27;&amp;"
    for s in HOSTILE:
        w = check_page(user_text(s), "user_text")
        assert w.shown() == s and not w.free
        # prose (role texts have names filled in) is never typeset either, even when a name holds a backtick
        check_page(prose(f"`{s}` and {s}"), "prose")


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_every_inspector_page_keeps_hostile_names_literal(hostile, lang: str) -> None:
    from asgteach.widgets.view import GraphView

    g, y, feeds = hostile
    view = GraphView(y, feeds=feeds, lang=lang, collapse=False)
    seen: set[str] = set()
    for i in view.scope.ids:
        view.click(f"n{i}")
        w = check_page(view.canvas.inspector_html, f"{lang} inspector #{i} {g.nodes[i].op}")
        assert g.nodes[i].name in w.shown(), f"#{i}: the name is not shown as typed"
        seen |= w.sections
    # every section a node page has was walked, with the user's text in it where it belongs
    assert {"asg-name", "asg-what", "asg-formula", "asg-vjp", "asg-why", "asg-role", "asg-tech", "asg-values",
            "asg-local", "asg-bnote"} <= seen, seen
    pid = next(n.id for n in g.nodes if n.name == PAREN)
    view.click(f"n{pid}")
    w = check_page(view.canvas.inspector_html, "role")
    role = "".join(d for s, d in w.skipped if s == "asg-role")
    assert PAREN in role and IMG in role, "the role text names the parameter and its layer"
    tanh = next(n.id for n in g.nodes if n.op == "tanh")
    view.click(f"n{tanh}")
    tech = "".join(d for s, d in check_page(view.canvas.inspector_html, "tech").skipped if s == "asg-tech")
    assert r"$\(f\)$.py" in tech and f'y = "{HREF} {IMG}"' in tech  # file and line
    op_node = next(n.id for n in g.nodes if n.op == OP)
    view.click(f"n{op_node}")
    w = check_page(view.canvas.inspector_html, "user op")
    assert OP in "".join(d for s, d in w.skipped if s is None)  # no record: the title is its name
    assert f"label={HREF}" in "".join(d for s, d in w.skipped if s == "asg-tech")  # attribute values
    local = next(n.id for n in g.nodes if n.op == "matmul")
    view.click(f"n{local}")
    assert HREF in "".join(d for s, d in check_page(view.canvas.inspector_html, "local").skipped if s == "asg-local")

    # the step-through pages and the status line
    assert view.steps
    for k in range(len(view.steps)):
        view.step(+1)
        check_page(view.canvas.inspector_html, f"{lang} step {k + 1}")
        check_page(view.canvas.status_html, f"{lang} status {k + 1}")
    assert any("asg-math" in view.step_html(k) for k in range(len(view.steps))), "a fan-out sum was shown"
    # the layer groups (named by the user), open and closed
    for name in view.groups:
        for _ in range(2):
            view.click(f"g:{name}")
            w = check_page(view.canvas.inspector_html, f"{lang} group {name}")
            assert name in w.shown()
    view.reset()
    check_page(view.canvas.inspector_html, "empty")
    check_page(view.canvas.legend_html, "legend")
    view.selected = f"n{tanh}"
    view.show_wgsl()
    check_page(view.canvas.wgsl_html or "<div></div>", "wgsl")


def test_graph_elements_carry_no_html(hostile) -> None:
    """Cytoscape draws labels on a canvas (text, never HTML); a data key named like its tooltip source would be
    set as innerHTML on click, so there is none."""
    g, y, feeds = hostile
    for mode in E.MODES:
        for el in E.build_elements(E.scope_of(y), mode, None):
            assert "tooltip" not in el["data"]
    labels = [el["data"]["label"] for el in E.build_elements(E.scope_of(y), "both", None) if el["group"] == "nodes"]
    assert any(HREF in lab for lab in labels) and any(IMG in lab for lab in labels)  # shown as typed


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_static_view_and_plain_pages(hostile, lang: str) -> None:
    g, y, feeds = hostile
    for mode in E.MODES:
        for expanded in (None, set()):
            page = static_html(y, lang=lang, mode=mode, expanded=expanded)
            w = check_page(page, f"static {mode} {expanded}")
            assert not w.free or all(not d.strip() for _, d in w.free), "the static picture is one skipped region"
    assert HREF in check_page(static_html(y, lang=lang, mode="forward", expanded=None), "static").shown()
    data = InspectorData(g)
    for i in range(len(g.nodes)):
        check_page(node_html(data, i, lang), f"no values #{i}")
    groups = E.groups_of(g, E.scope_of(y).ids)
    for name, members in groups.items():
        check_page(group_html(data, name, members, lang), f"group {name}")
    check_page(empty_html(lang), "empty")
    check_page(legend_html(None, lang), "legend")


def test_gradcheck_figure_draws_hostile_names() -> None:
    need_module("matplotlib", "pip install -e . (a dependency of asgteach)")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    with at.Graph():
        x = at.input(HREF, (3,))
        y = at.sum(at.tanh(x))
    report = at.gradcheck(y, [x], {x: np.linspace(-1, 1, 3)})
    fig = report.plot()
    FigureCanvasAgg(fig).print_png(io.BytesIO())  # mathtext would fail on \href
    assert HREF in fig.axes[0].get_title().replace("\\$", "$")


def test_gradcheck_report_html_keeps_hostile_input_names_literal() -> None:
    hostile = r"$\href{javascript:alert(1)}{x}$"
    with at.Graph():
        x = at.input(hostile, (3,))
        y = at.sum(x * x)
    page = at.gradcheck(y, [x], {x: np.array([0.5, -1.0, 2.0])})._repr_html_()
    assert NO_MATH in page.split(">", 1)[0]          # the whole report is out of MathJax's reach
    assert "$" not in page and "\\href" not in page and "&#36;" in page
