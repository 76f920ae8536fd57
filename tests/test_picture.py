"""The graph's picture (asgteach/widgets/picture.py): what an unrun, untrusted notebook shows.

It must be the widget's drawing (same elements, same mirrored layout, same colours), legible at
100 % zoom (no text under 11 px), safe (user names are text), a PNG an untrusted notebook shows
beside an SVG for trusted views, and quick enough for a lesson with several graphs.
"""

from __future__ import annotations

import base64
import re
import struct
import sys
import xml.etree.ElementTree as ET

import pytest

import asgteach as at
from asgteach.widgets.elements import build_elements, scope_of
from asgteach.widgets.layout import mirror_layout
from asgteach.widgets.picture import GraphPicture, picture_hint, picture_mimebundle, picture_svg
from asgteach.widgets.styles import CATEGORY_COLOURS

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = "<img src=x onerror=alert(1)>$\\href{javascript:alert(1)}{x}$"


def _mlp():
    with at.Graph():
        x, t = at.input("x", (4, 2)), at.input("t", (4, 1))
        net = at.nn.MLP([2, 8, 1], activation="tanh", name="mlp")
        loss = at.nn.mse_loss(at.sigmoid(net(x)), t)
        at.grad(loss, net.parameters())
    return loss


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", png[16:24])


def _nodes(svg: str) -> dict[str, tuple[float, float, str]]:
    """data-id -> (x, y of the label's first line, fill of the outline) for every node of the picture."""
    root = ET.fromstring(svg)
    out = {}
    for g in root.iter(f"{SVG}g"):
        if g.get("class") != "asg-node":
            continue
        path, text = g.find(f"{SVG}path"), g.find(f"{SVG}text")
        out[g.get("data-id")] = (float(text.get("x")), float(text.get("y")), path.get("fill"))
    return out


def test_the_bundle_is_a_png_and_an_svg_and_no_html() -> None:
    bundle = picture_mimebundle(_mlp())
    assert set(bundle) == {"image/png", "image/svg+xml"}, "text/html would win over the PNG in an untrusted notebook"
    png = base64.b64decode(bundle["image/png"])
    root = ET.fromstring(bundle["image/svg+xml"])
    assert _png_size(png) == (int(root.get("width")), int(root.get("height"))), "screen resolution: 1 px per CSS px"


def test_same_elements_and_same_mirrored_layout_as_the_widget() -> None:
    loss = _mlp()
    els = build_elements(scope_of(loss), "both", None, details=False)   # a new view's defaults for 40-odd nodes
    lay = mirror_layout(els)
    drawn = _nodes(picture_svg(loss))
    assert set(drawn) == set(lay.positions)
    # one shift moves every layout centre onto the picture's (the first label line sits above the centre)
    nid = next(iter(lay.positions))
    lines = {e["data"]["id"]: e["data"]["label"].count("\n") + 1 for e in els if e["group"] == "nodes"}
    dx = drawn[nid][0] - lay.positions[nid][0]
    dy = drawn[nid][1] + (lines[nid] - 1) * 0.625 * 12 - lay.positions[nid][1]
    for i, (x, y) in lay.positions.items():
        assert drawn[i][0] == pytest.approx(x + dx, abs=0.2)
        assert drawn[i][1] + (lines[i] - 1) * 0.625 * 12 == pytest.approx(y + dy, abs=0.2)
    # the backward column mirrors the forward one: every gradient at its node's height, to its right
    for e in els:
        m = e["data"].get("mirror")
        if e["group"] == "nodes" and m in lay.positions:
            assert lay.positions[e["data"]["id"]][1] == lay.positions[m][1]
            assert drawn[e["data"]["id"]][0] > drawn[m][0]


def test_colours_are_the_palette_of_the_widget() -> None:
    loss = _mlp()
    cats = {e["data"]["id"]: e["data"]["cat"] for e in build_elements(scope_of(loss), "both", None, details=False)
            if e["group"] == "nodes" and e["data"].get("cat")}
    drawn = _nodes(picture_svg(loss))
    assert cats and all(drawn[i][2] == CATEGORY_COLOURS[c] for i, c in cats.items())
    assert {"input", "parameter", "gradient"} <= set(cats.values())


def test_legible_and_says_run_this_cell_not_a_claim_about_extensions() -> None:
    for lang in ("en", "ru"):
        svg = picture_svg(_mlp(), lang=lang)
        sizes = [float(s) for s in re.findall(r'font-size="([0-9.]+)"', svg)]
        assert sizes and min(sizes) >= 11, sizes
        assert picture_hint(lang) in svg
        assert "extension" not in svg and "not enabled" not in svg and "расширени" not in svg
    assert "run this cell to click the nodes" in picture_hint("en")
    assert min(float(s) for s in re.findall(r'font-size="([0-9.]+)"', picture_svg(_mlp(), present=True))) >= 17


def test_a_view_like_object_is_drawn_as_it_is_now() -> None:
    loss = _mlp()

    class View:   # what the widget hands over: its scope and its current settings
        scope = scope_of(loss)
        mode, expanded, details, lang, present = "forward", set(), True, "ru", False

    svg = picture_svg(View())
    assert set(_nodes(svg)) == {e["data"]["id"] for e in build_elements(View.scope, "forward", set(), True)
                                if e["group"] == "nodes" and e["data"].get("kind") != "compound"}
    assert picture_hint("ru") in svg


def test_user_names_stay_text() -> None:
    with at.Graph():
        p = at.parameter(HOSTILE, (2,), layer=HOSTILE, role="weight")
        y = at.sum(p * p)
        at.grad(y, [p])
    svg = picture_svg(y, expanded=None)
    ET.fromstring(svg)   # well-formed XML: nothing the user typed became markup
    assert "<img" not in svg and "$" not in svg and "\\href" not in svg
    assert "mathjax_ignore" in svg.split(">", 1)[0], "inline in an HTML export, MathJax must leave it alone"


def test_graph_picture_displays_itself_and_saves(tmp_path) -> None:
    from IPython.core.formatters import DisplayFormatter

    pic = GraphPicture(_mlp())
    data, _ = DisplayFormatter().format(pic)   # what IPython shows for it
    assert {"image/png", "image/svg+xml", "text/plain"} == set(data)
    assert pic.save(tmp_path / "g.png").read_bytes() == pic.png
    assert pic.save(tmp_path / "g.svg").read_text(encoding="utf-8") == pic.svg
    assert pic.svg in pic.save(tmp_path / "g.html").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="suffix"):
        pic.save(tmp_path / "g.jpg")


def test_at_show_outside_a_notebook_returns_the_picture(capsys) -> None:
    loss = _mlp()
    pic = at.show(loss, static=True)
    assert isinstance(pic, GraphPicture) and pic.svg.startswith("<svg") and pic.png[:4] == b"\x89PNG"
    assert capsys.readouterr().err == "", "static=True is asked for: nothing to explain"
    data = loss._repr_mimebundle_()   # what a Graph or Tensor ending a cell shows where no widget can be built
    assert set(data) == {"image/png", "image/svg+xml", "text/plain"}


def test_at_show_in_marimo_returns_the_view(monkeypatch) -> None:
    """marimo draws anywidgets itself (the view's ``_display_``): at.show hands it the view, not a picture."""
    import types

    marimo = types.ModuleType("marimo")
    marimo.running_in_notebook = lambda: True
    monkeypatch.setitem(sys.modules, "marimo", marimo)
    view = at.show(_mlp())
    assert not isinstance(view, GraphPicture) and hasattr(view, "_display_")
