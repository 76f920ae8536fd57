"""GraphView: the interactive graph (cytoscape.js in an anywidget), its toolbar and the Node Inspector.

Layout of the widget (all of it one :class:`~asgteach.widgets.canvas.GraphCanvas`)::

    [Fit] [forward|backward|both] [EN|RU] [◂] [Step backward ▸] [Reset] [Expand all] [Details] [Present] [WGSL]
    +-----------------------------------------------------------+----------------------+
    |  the graph: forward column top-down | gradients bottom-up |  Node Inspector      |
    |  (as wide as the cell; as tall as the graph, up to a max) |  (beside, or below   |
    +-----------------------------------------------------------+   when there is no   |
    legend (colour AND shape per category)                          room beside)
    WGSL source (when asked)

The positions come from :mod:`.layout` (cytoscape's "preset" layout): the forward graph on
the left, the backward graph mirrored on the right, each gradient at its node's height. The
canvas is sized so that labels render at >= 11 CSS px (18 in presentation mode) when all
nodes fit; its zoom never goes below that (a bigger graph pans instead of shrinking).

The Python side holds all state (mode, open groups, details, selection, step) and makes all
the HTML; the browser only draws. A rebuild sends the whole element list, positions included,
as one traitlet change; a click or a step sends only the changed highlight classes and the
inspector's HTML. Why one widget and not ipywidgets buttons around a canvas: marimo draws
anywidgets but not ipywidgets, and one model is one thing to load in every front-end.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping

from .elements import (
    COLLAPSE_DEFAULT, MODES, Scope, build_elements, group_path, groups_of, parse_element_id, scope_of, visible_ids,
)
from .i18n import LANGS, t
from .inspector import InspectorData, empty_html, esc, group_html, node_html
from .layout import FONT_PX, PAD, mirror_layout
from .steps import Step, grad_passes, steps_of
from .styles import PRESENT_SCALE, cytoscape_style, legend_html
from ..usertext import user_text

__all__ = ["GraphView", "COLLAPSE_AT", "LEGIBLE_PX", "PRESENT_PX", "EXPAND_WARN_AT", "canvas_height",
           "expand_estimate_s"]

#: Above this many drawn nodes, layers start collapsed (one node per layer).
COLLAPSE_AT = COLLAPSE_DEFAULT
#: The smallest label a reader gets (CSS px = zoom x font size): the zoom never goes below it.
LEGIBLE_PX, PRESENT_PX = 11.0, 18.0
#: The canvas grows with the graph between these heights (px); beyond, the reader pans.
MIN_HEIGHT, MAX_HEIGHT = 240, 960
#: Space around the drawing inside the canvas (px), as the layout's fit leaves it.
FIT_PADDING = 16
#: "Expand all" over this many nodes asks first: drawing them takes seconds, and then a long pan.
EXPAND_WARN_AT = 2000
#: Measured cost of one drawn element (node or edge) in JupyterLab + Chromium, seconds
#: (bench/widget_paint.py: 1.57 s for the 1,015 nodes and 1,309 edges, kernel and browser together).
SECONDS_PER_ELEMENT = 0.0007
#: Toolbar words, by the key of their button.
_WORDS = ("fit", "step_back", "step", "reset", "details", "present", "wgsl")


def canvas_height(layout_height: float, zoom: float = 1.0, boxes: int = 0) -> int:
    """The canvas height (px) showing a drawing ``layout_height`` tall at ``zoom``, within the limits.

    ``boxes``: how deep layer boxes nest (each adds its label and padding above and below).
    """
    return int(min(MAX_HEIGHT, max(MIN_HEIGHT, (layout_height + 34 * boxes) * zoom + 2 * FIT_PADDING + 8)))


def expand_estimate_s(n_nodes: int, n_edges: int) -> float:
    """About how long the browser takes to draw this many elements (see SECONDS_PER_ELEMENT)."""
    return (n_nodes + n_edges) * SECONDS_PER_ELEMENT


def _wgpu_plan_shader(graph: Any, node_id: int) -> str:
    """The WGSL source the wgpu backend runs for ``node_id`` (raises if there is none)."""
    from ..backends import compile as _compile
    from ..tensor import Tensor

    plan = _compile([Tensor(graph, node_id)], "wgpu")
    shader_for = getattr(plan, "shader_for", None)
    if shader_for is None:
        raise RuntimeError("this wgpu backend cannot show its kernels (no Plan.shader_for)")
    return shader_for(node_id)


class GraphView:
    """An interactive view of a graph: click nodes, switch passes, step through backward.

    Build it with :func:`asgteach.show`. ``view.widget`` (also ``view.canvas``) is the one
    anywidget the browser draws; the view displays itself in Jupyter (``_repr_mimebundle_``)
    and in marimo (``_display_``). What the browser shows is readable from Python:
    ``view.canvas.elements``, ``.highlights``, ``.inspector_html``, ``.status_html``,
    ``.legend_html``, ``.toolbar``.
    """

    def __init__(
        self,
        target: Any,
        values: Mapping[Any, Any] | None = None,
        feeds: Mapping[Any, Any] | None = None,
        trainer: Any = None,
        lang: str = "en",
        mode: str | None = None,
        collapse: bool | None = None,
        height: str | None = None,
        present: bool = False,
        details: bool | None = None,
    ) -> None:
        from .canvas import GraphCanvas
        from .values import compute_values, resolve_values

        self.scope: Scope = scope_of(target)
        self.graph = g = self.scope.graph
        self.lang = lang.lower()[:2] if lang.lower()[:2] in LANGS else "en"
        self.mode = mode or ("both" if self.scope.has_backward else "forward")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.groups = groups_of(g, self.scope.ids)
        n_drawn = len(visible_ids(self.scope, self.mode)[0])
        start_closed = collapse if collapse is not None else n_drawn > COLLAPSE_AT
        #: groups drawn open; None: all open
        self.expanded: set[str] | None = set() if start_closed else None
        #: draw glue (reshape, transpose, scalar constants, the seed ...) as nodes; off for lesson-size graphs
        self.details = details if details is not None else n_drawn > COLLAPSE_AT
        self.present = bool(present)
        self._fixed_height = height
        self._expand_asked = False
        self.wgsl_available = False

        vals = resolve_values(g, values)
        if feeds is not None or trainer is not None:
            vals = {**compute_values(g, self.scope.ids, feeds, trainer), **vals}
        passes = [p for p in grad_passes(g) if p.get("y") in set(self.scope.ids)]
        self.pass_record = passes[-1] if passes else None
        self.steps: list[Step] = steps_of(g, self.pass_record) if self.pass_record else []
        senders = {(s.node, snd): c for s in self.steps for c, snd in zip(s.contributions, s.senders)
                   if snd is not None}
        grads = {int(k): int(v) for k, v in self.pass_record["grads"].items()} if self.pass_record else {}
        self.data = InspectorData(g, vals, grads, senders)
        self.step_index = -1
        self.selected: str | None = None
        self._elements: list[dict] = []
        self._drawn_ids: set[str] = set()

        self.canvas = GraphCanvas(padding=FIT_PADDING, inspector_html=empty_html(self.lang))
        self.widget = self.canvas
        self.canvas.observe(self._on_event, names="event")
        self._set_style()
        self._set_toolbar()
        self._rebuild()
        threading.Thread(target=self._probe_wgpu, daemon=True).start()

    # -- drawing ------------------------------------------------------------------------------
    def elements(self) -> list[dict]:
        """The cytoscape elements for the current mode and open groups."""
        return build_elements(self.scope, self.mode, self.expanded, details=self.details)

    @property
    def font_px(self) -> float:
        """Label size of a node in model units (x 1.6 in presentation mode)."""
        return FONT_PX * (PRESENT_SCALE if self.present else 1.0)

    def _set_style(self) -> None:
        # the zoom never makes a label smaller than legible; fit never blows a tiny graph up past 2x
        with self.canvas.hold_sync():
            self.canvas.stylesheet = cytoscape_style(self.present, FONT_PX)
            self.canvas.min_zoom = (PRESENT_PX if self.present else LEGIBLE_PX) / self.font_px
            self.canvas.max_zoom = 2.0

    def _set_toolbar(self) -> None:
        """The toolbar's words (in the view's language) and states, as the browser draws them."""
        lang = self.lang
        opening = not (self.expanded is None or self.expanded >= set(self.groups))
        self.canvas.toolbar = {
            "words": {k: t(k, lang) for k in _WORDS},
            "modes": [[t(m, lang), m] for m in MODES], "mode": self.mode,
            "langs": [[c.upper(), c] for c in LANGS], "lang": lang,
            "expand_label": t("expand_all" if opening else "collapse_all", lang),
            "can_step": bool(self.steps), "can_expand": bool(self.groups),
            "details": self.details, "present": self.present, "wgsl": self.wgsl_available,
        }

    def _rebuild(self) -> None:
        """Draw the current mode and open groups: the elements and their positions, as one message."""
        self._elements = els = self.elements()
        self.layout = lay = mirror_layout(els, self.font_px)
        drawn = []
        for el in els:
            data = {**el["data"], "key": el["data"]["id"]}
            item: dict[str, Any] = {"group": el["group"], "data": data, "classes": el.get("classes", "")}
            if el["group"] == "nodes":
                at = lay.positions.get(data["id"])
                if at is not None:
                    item["position"] = {"x": at[0], "y": at[1]}
                    w, h = lay.sizes[data["id"]]
                    data["w"], data["h"] = round(w - 2 * PAD, 1), round(h - 2 * PAD, 1)
            elif "label" in data:  # where a label drawn by the target end is centred (half its width, and a gap)
                data["label_offset"] = round(len(data["label"]) * 0.62 * 11 / FONT_PX * self.font_px / 2 + 12)
            drawn.append(item)
        self._drawn_ids = {el["data"]["id"] for el in els}
        if self.selected not in self._drawn_ids:
            self.selected = None
        cats = sorted({el["data"]["cat"] for el in els if el["data"].get("cat")})
        with self.canvas.hold_sync():
            self._size_canvas()
            self.canvas.highlights = self._highlights()
            self.canvas.elements = drawn
            self.canvas.legend_html = legend_html(cats or None, self.lang, backward=self.mode != "forward",
                                                  present=self.present)
            self._set_toolbar()

    def _size_canvas(self) -> None:
        """Height from the drawing (labels at full size when it fits), width: what the row gives."""
        lay = self.layout
        depth = max((str(e["data"]["group"]).count(".") + 1 for e in self._elements
                     if e["data"].get("kind") == "compound"), default=0)
        height = f"{canvas_height(lay.height, 1.0, depth)}px" if self._fixed_height is None else self._fixed_height
        self.canvas.height = height
        # each level of layer boxes adds its padding and border on both sides (cytoscape's :parent style)
        self.canvas.graph_width = int(max(420, lay.width + 2 * FIT_PADDING + 4 + 24 * depth))
        self.canvas.inspector_height = f"{max(420, int(height[:-2]))}px" if height.endswith("px") else height

    def _highlights(self) -> dict[str, str]:
        """The selection and step-through classes: element id -> classes."""
        want: dict[str, set[str]] = {}
        if self.selected:
            want.setdefault(self.selected, set()).add("selected")
            for el in self._elements:
                d = el["data"]
                if el["group"] == "edges" and self.selected in (d["source"], d["target"]):
                    want.setdefault(d["id"], set()).add("incident")
        if 0 <= self.step_index < len(self.steps):
            for k, s in enumerate(self.steps[: self.step_index + 1]):
                current = k == self.step_index
                want.setdefault(self.rep_of(s.node), set()).add("step-current" if current else "step-done")
                mirror = self.rep_of(s.grad)
                if current and mirror != self.rep_of(s.node):  # the gradient beside its node lights up too
                    want.setdefault(mirror, set()).add("step-mirror")
                if current:
                    for i in s.rule:
                        want.setdefault(self.rep_of(i), set()).add("step-rule")
                    for i in [*s.sums, *s.contributions]:
                        want.setdefault(self.rep_of(i), set()).add("step-sum")
        return {eid: " ".join(sorted(c)) for eid, c in want.items() if eid in self._drawn_ids}

    def _apply_highlights(self) -> None:
        self.canvas.highlights = self._highlights()

    def rep_of(self, node_id: int) -> str:
        """The element id standing for node ``node_id`` now (itself, or its closed group)."""
        if self.expanded is not None:
            for name in group_path(self.graph, self.graph.nodes[node_id]):
                if name not in self.expanded:
                    return f"g:{name}"
        return f"n{node_id}"

    def fit(self) -> None:
        """Ask the browser to fit the graph into its canvas again (as the Fit button does)."""
        self.canvas.fit_seq += 1

    def _on_event(self, change: dict) -> None:
        """What the reader did in the browser (a click, a toolbar button): its changes go back as ONE message."""
        ev = change["new"] or {}
        with self.canvas.hold_sync():
            self._dispatch(ev.get("type"), ev.get("value"))

    def _dispatch(self, kind: Any, value: Any) -> None:
        if kind == "click":
            self.click(str(value))
        elif kind == "step":
            self.step(int(value))
        elif kind == "reset":
            self.reset()
        elif kind == "expand":
            self.toggle_all()
        elif kind == "details":
            self.set_details(bool(value))
        elif kind == "present":
            self.set_present(bool(value))
        elif kind == "mode" and value in MODES:
            self.set_mode(str(value))
        elif kind == "lang" and value in LANGS:
            self.set_lang(str(value))
        elif kind == "wgsl":
            self.show_wgsl()

    # -- interaction ----------------------------------------------------------------------------
    def click(self, element_id: str) -> None:
        """What a click on element ``element_id`` does: inspect a node or a folded edge, open/close a group."""
        if element_id.startswith("e:"):
            self.inspect_edge(element_id)
            return
        kind, key = parse_element_id(element_id)
        if kind == "group":
            members = self.groups.get(key, [])
            if self.expanded is not None and key not in self.expanded:
                self.expanded.add(key)
                self.selected = None
                self.canvas.inspector_html = group_html(self.data, key, members, self.lang, is_open=True)
                self._rebuild()
                return
            # close the group and everything inside it (re-opened, its sub-layers start closed)
            still_open = set(self.groups) if self.expanded is None else self.expanded
            self.expanded = {gname for gname in still_open if gname != key and not gname.startswith(key + ".")}
            self.selected = None
            self.canvas.inspector_html = group_html(self.data, key, members, self.lang, is_open=False)
            self._rebuild()
            return
        self.selected = element_id
        self.canvas.inspector_html = node_html(self.data, key, self.lang)
        self._apply_highlights()

    def inspect_edge(self, edge_id: str) -> None:
        """An edge hiding glue (details off): the inspector explains each hidden node, in flow order."""
        edge = next((e for e in self._elements if e["group"] == "edges" and e["data"]["id"] == edge_id), None)
        folded = edge["data"].get("folded", []) if edge else []
        if not folded:
            return
        self.selected = None
        self.canvas.inspector_html = (f'<div class="asg-folded"><p><i>{esc(t("folded_edge", self.lang))}</i></p></div>'
                                + "<hr>".join(node_html(self.data, i, self.lang) for i in folded))
        self._apply_highlights()

    def set_details(self, on: bool) -> None:
        """Draw every node (on), or fold glue into edge labels (off)."""
        on = bool(on)
        if on == self.details:
            self._set_toolbar()  # the browser's toggle shows the state it asked for: put it back
            return
        self.details = on
        self._rebuild()

    def set_present(self, on: bool) -> None:
        """Presentation mode: 1.6x fonts, thicker edges, high contrast, a large legend (for a projector)."""
        on = bool(on)
        if on == self.present:
            self._set_toolbar()
            return
        self.present = on
        self._set_style()
        self._rebuild()

    def set_mode(self, mode: str) -> None:
        """Show the forward graph, the backward graph (with the forward values it reads), or both."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if mode == self.mode and self._elements:
            return
        self.mode = mode
        self._rebuild()

    def set_lang(self, lang: str) -> None:
        """Switch the inspector, legend and buttons to ``lang`` ("en" or "ru")."""
        if lang not in LANGS:
            raise ValueError(f"lang must be one of {LANGS}, got {lang!r}")
        self.lang = lang
        self._set_toolbar()
        cats = sorted({el["data"]["cat"] for el in self._elements if el["data"].get("cat")})
        self.canvas.legend_html = legend_html(cats or None, lang, backward=self.mode != "forward",
                                              present=self.present)
        if 0 <= self.step_index < len(self.steps):
            self.canvas.status_html = self._step_status(self.step_index)
        self._render_inspector()

    def _render_inspector(self) -> None:
        if 0 <= self.step_index < len(self.steps):
            self.canvas.inspector_html = self.step_html(self.step_index)
        elif self.selected:
            kind, key = parse_element_id(self.selected)
            self.canvas.inspector_html = node_html(self.data, key, self.lang)
        else:
            self.canvas.inspector_html = empty_html(self.lang)

    def expand_all_cost(self) -> tuple[int, int, float]:
        """(nodes, edges, seconds): what drawing every node of the current mode would take."""
        els = build_elements(self.scope, self.mode, None, details=self.details)
        n = sum(1 for e in els if e["group"] == "nodes")
        m = len(els) - n
        return n, m, expand_estimate_s(n, m)

    def toggle_all(self, confirm: bool = False) -> None:
        """Open every layer group, or (when all are open) close them all.

        Opening more than :data:`EXPAND_WARN_AT` nodes first says how many and how long it
        would take; pressing again (or ``confirm=True``) draws them.
        """
        opening = not (self.expanded is None or self.expanded >= set(self.groups))
        if opening and not (confirm or self._expand_asked):
            n, m, secs = self.expand_all_cost()
            if n > EXPAND_WARN_AT:
                self._expand_asked = True
                self.canvas.status_html = (f'<span class="asg-expand-warn" style="color:#a05a00">'
                                     f'{esc(t("expand_warn", self.lang).format(n=f"{n:,}", s=f"{secs:.1f}"))}</span>')
                return
        self._expand_asked = False
        self.canvas.status_html = ""
        self.expanded = set() if not opening else None
        self._rebuild()

    # -- step-through backward -------------------------------------------------------------------
    def step(self, delta: int = 1) -> Step | None:
        """Advance (or go back) one visit of the recorded backward sweep; returns that step."""
        if not self.steps:
            self.canvas.status_html = esc(t("no_pass", self.lang))
            return None
        if self.mode == "forward":
            self.set_mode("both")
        self.step_index = max(-1, min(len(self.steps) - 1, self.step_index + delta))
        if self.step_index < 0:
            self.canvas.status_html = ""
            self._apply_highlights()
            self._render_inspector()
            return None
        s = self.steps[self.step_index]
        self.canvas.status_html = self._step_status(self.step_index)
        self.selected = self.rep_of(s.node)
        self._apply_highlights()
        self.canvas.inspector_html = self.step_html(self.step_index)
        return s

    def _step_status(self, k: int) -> str:
        s = self.steps[k]
        return (f'<span class="asg-step-status">{esc(t("step_title", self.lang))} {k + 1} {esc(t("of", self.lang))} '
                f'{len(self.steps)}: #{s.node} {user_text(self.graph.nodes[s.node].op)}</span>')

    def reset(self) -> None:
        """Clear the step-through and the selection."""
        self.step_index = -1
        self.selected = None
        self.canvas.status_html = ""
        self._apply_highlights()
        self.canvas.inspector_html = empty_html(self.lang)

    def step_html(self, k: int) -> str:
        """Inspector text for step ``k``: how the gradient of the node was summed and passed on."""
        from .values import stats

        g, lang, s = self.graph, self.lang, self.steps[k]
        node = g.nodes[s.node]
        head = (f'<div class="asg-step" data-step="{k + 1}"><div style="font-weight:bold;font-size:14px;color:#d62728">'
                f'{esc(t("step_title", lang))} {k + 1} {esc(t("of", lang))} {len(self.steps)} — '
                f'{esc(t("step_arrived", lang))} {user_text(node.op)} <code>{user_text(node.name)}</code> '
                f'#{node.id}</div>')
        n = len(s.contributions)
        what = (t("step_fanout", lang).format(n=n) if n > 1 else t("step_single", lang))
        rows = []
        for c, snd in zip(s.contributions, s.senders):
            src = f"#{snd} {user_text(g.nodes[snd].op)}" if snd is not None else "?"
            val = ""
            if c in self.data.values:
                st = stats(self.data.values[c])
                if "mean" in st:
                    val = f" — {esc(t('mean', lang))} {st['mean']:.4g}"
            rows.append(f"<li>#{c} {user_text(g.nodes[c].op)} ({esc(t('step_from', lang))} {src}){val}</li>")
        body = (f"<p><code>{user_text(node.name)}</code> {esc(what)}</p><ol>{''.join(rows)}</ol>")
        if n > 1:
            terms = " + ".join(f"c_{{{i + 1}}}" for i in range(n))
            body += f'<div class="asg-math">$$\\frac{{\\partial L}}{{\\partial x}} = {terms}$$</div>'
        if s.rule:
            body += (f"<p>{esc(t('step_rule', lang))}</p><p>"
                     + ", ".join(f"#{i} {user_text(g.nodes[i].op)}" for i in s.rule[:16])
                     + (" …" if len(s.rule) > 16 else "") + "</p>")
        elif node.op in ("input", "parameter", "constant"):
            body += f"<p>{esc(t('step_leaf', lang))}</p>"
        if k == len(self.steps) - 1:
            body += f"<p><b>{esc(t('step_done', lang))}</b></p>"
        return head + body + "</div><hr>" + node_html(self.data, s.node, lang)

    # -- WGSL ---------------------------------------------------------------------------------
    def _probe_wgpu(self) -> None:
        from ..backends import available  # lazy like _wgpu_plan_shader's: only a built view asks

        self.wgsl_available = "wgpu" in available()
        self._set_toolbar()

    def show_wgsl(self) -> str:
        """Show (and return) the WGSL source of the selected node's kernel."""
        if not self.selected or parse_element_id(self.selected)[0] != "node":
            self.canvas.wgsl_html = ""
            return ""
        node_id = parse_element_id(self.selected)[1]
        try:
            src = _wgpu_plan_shader(self.graph, node_id)
        except Exception as e:  # noqa: BLE001 - leaves have no kernel; say so
            self.canvas.wgsl_html = f'<div class="asg-wgsl" style="color:#a05a00">{user_text(e)}</div>'
            return ""
        self.canvas.wgsl_html = (f'<details open class="asg-wgsl"><summary>WGSL #{node_id}</summary>'
                               f'<pre style="font-size:11px;max-height:300px;overflow:auto">{esc(src)}</pre></details>')
        return src

    # -- notebook display ------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        """The widget view, and beside it the picture of what it draws now (PNG + SVG, from the same
        layout): an untrusted or reopened notebook, nbconvert and GitHub show the picture. No
        ``text/html``: JupyterLab shows an untrusted output's first safe type, and sanitized HTML
        would come before the PNG."""
        from .picture import picture_mimebundle

        bundle = self.widget._repr_mimebundle_(**kwargs)
        data = dict(bundle[0] if isinstance(bundle, tuple) else bundle)
        data.pop("text/html", None)
        # a view drawing more than COLLAPSE_AT nodes gets the picture of its layers collapsed: the whole
        # 1,015-node graph as a PNG takes seconds to paint and megabytes to store, and a picture that big
        # is read as its layers anyway
        drawn = sum(1 for e in self._elements if e["group"] == "nodes" and e["data"].get("kind") == "node")
        data.update(picture_mimebundle(self, expanded=set()) if drawn > COLLAPSE_AT else picture_mimebundle(self))
        return data

    def display_outputs(self) -> list[dict[str, Any]]:
        """What a notebook shows for this view: TWO outputs, the picture first, then the widget view.

        One output holding both would not do: a trusted notebook reopened after its kernel died
        draws only the widget's "model not found" error for it (the widget renderer does not fall
        back to another type of the same output). As two outputs, the picture stays readable there,
        and while the widget is live its browser code hides that picture (it knows it by the end of
        its base64 text, ``canvas.picture_tail``: the last bytes of every PNG are the same IEND
        chunk, the bytes before them are this picture's checksums).
        """
        bundle = self._repr_mimebundle_()
        picture = {k: bundle.pop(k) for k in ("image/png", "image/svg+xml")}
        self.canvas.picture_tail = picture["image/png"].strip()[-96:]
        bundle["text/plain"] = ""   # an untrusted notebook shows this output's text: nothing under the picture
        return [picture, bundle]

    def _ipython_display_(self) -> None:
        """IPython's ``display(view)``, and a view ending a cell: the picture, then the widget (display_outputs)."""
        from IPython.display import display

        for data in self.display_outputs():
            display(data, raw=True)

    def _display_(self) -> Any:
        """marimo draws this (its protocol for objects that stand for a widget): the anywidget itself."""
        return self.widget
