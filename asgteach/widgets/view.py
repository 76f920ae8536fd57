"""GraphView: the interactive graph (ipycytoscape), its toolbar and the Node Inspector.

Layout of the widget::

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

The Python side holds all state (mode, open groups, details, selection, step); the browser
only draws. Two quirks of ipycytoscape 1.3.3 shape the code:

* it does not fit the graph into its box on first paint (the box has no size yet when the
  layout runs), so the view asks the browser to resize-and-fit shortly after it is shown
  and whenever *Fit* is pressed (a 1px change of the widget's height triggers exactly
  ``cy.resize(); cy.fit()`` in its frontend);
* element widgets cannot be reused after being taken out of the graph (their "removed"
  flag stays set), so every rebuild makes fresh element widgets and closes the old ones.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping

from .elements import (
    COLLAPSE_DEFAULT, MODES, Scope, build_elements, group_path, groups_of, parse_element_id, scope_of, visible_ids,
)
from .i18n import LANGS, t
from .inspector import InspectorData, empty_html, esc, group_html, node_html
from .layout import FONT_PX, mirror_layout
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
#: "Expand all" over this many nodes asks first: ipycytoscape builds one widget per element.
EXPAND_WARN_AT = 500
#: Measured cost of one drawn element (node or edge) in JupyterLab + Chromium, seconds.
SECONDS_PER_ELEMENT = 0.012


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

    Build it with :func:`asgteach.show`. ``view.widget`` is the ipywidgets box; the view
    displays itself in a notebook (``_ipython_display_``).
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
        import ipycytoscape
        import ipywidgets as w

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
        self._shown = False
        self._expand_asked = False

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
        self._element_widgets: dict[str, Any] = {}
        self._generation = 0
        self._elements: list[dict] = []

        self._height = height or f"{MIN_HEIGHT}px"
        self.cyto = ipycytoscape.CytoscapeWidget(layout=w.Layout(height=self._height, width="100%"))
        self.cyto.set_style(cytoscape_style(self.present, FONT_PX))
        # positions come from .layout (forward left, gradients mirrored right); "preset" draws them as given
        self.cyto.cytoscape_layout = {"name": "preset", "fit": True, "padding": FIT_PADDING, "animate": False}
        self._set_zoom_limits()
        self.cyto.on("node", "click", self._on_click)
        self.cyto.on("edge", "click", self._on_click)
        self.inspector = w.HTMLMath(value=empty_html(self.lang), layout=w.Layout(
            flex="1 1 340px", min_width="300px", max_width="640px", max_height=self._height, overflow="auto",
            padding="0 8px"))
        self.inspector.add_class("asg-inspector-panel")

        self.fit_button = w.Button(description=t("fit", self.lang), layout=w.Layout(width="auto"))
        self.mode_buttons = w.ToggleButtons(options=[(t(m, self.lang), m) for m in MODES], value=self.mode,
                                            style={"button_width": "auto"})
        self.lang_buttons = w.ToggleButtons(options=[(c.upper(), c) for c in LANGS], value=self.lang,
                                            style={"button_width": "auto"})
        self.step_button = w.Button(description=t("step", self.lang), layout=w.Layout(width="auto"),
                                    disabled=not self.steps)
        self.step_back_button = w.Button(description=t("step_back", self.lang), layout=w.Layout(width="auto"),
                                         disabled=not self.steps)
        self.reset_button = w.Button(description=t("reset", self.lang), layout=w.Layout(width="auto"))
        self.expand_button = w.Button(description=t("expand_all", self.lang), layout=w.Layout(width="auto"),
                                      disabled=not self.groups)
        self.details_button = w.ToggleButton(value=self.details, description=t("details", self.lang),
                                             layout=w.Layout(width="auto"))
        self.present_button = w.ToggleButton(value=self.present, description=t("present", self.lang),
                                             layout=w.Layout(width="auto"))
        self.wgsl_button = w.Button(description=t("wgsl", self.lang), layout=w.Layout(width="auto", display="none"))
        self.status = w.HTML(value="")
        for b, cls in ((self.fit_button, "asg-fit"), (self.mode_buttons, "asg-mode"), (self.lang_buttons, "asg-lang"),
                       (self.step_button, "asg-step"), (self.step_back_button, "asg-step-back"),
                       (self.reset_button, "asg-reset"), (self.expand_button, "asg-expand"),
                       (self.details_button, "asg-details"), (self.present_button, "asg-present"),
                       (self.wgsl_button, "asg-wgsl"), (self.status, "asg-status")):
            b.add_class(cls)
        self.fit_button.on_click(lambda _: self.fit())
        self._relabelling = False
        self.mode_buttons.observe(self._on_mode_button, names="value")
        self.lang_buttons.observe(lambda ch: self.set_lang(ch["new"]), names="value")
        self.step_button.on_click(lambda _: self.step(+1))
        self.step_back_button.on_click(lambda _: self.step(-1))
        self.reset_button.on_click(lambda _: self.reset())
        self.expand_button.on_click(lambda _: self.toggle_all())
        self.details_button.observe(lambda ch: self.set_details(ch["new"]), names="value")
        self.present_button.observe(lambda ch: self.set_present(ch["new"]), names="value")
        self.wgsl_button.on_click(lambda _: self.show_wgsl())
        self.legend = w.HTML(value="")
        self.wgsl_out = w.HTML(value="")
        toolbar = w.HBox([self.fit_button, self.mode_buttons, self.lang_buttons, self.step_back_button,
                          self.step_button, self.reset_button, self.expand_button, self.details_button,
                          self.present_button, self.wgsl_button, self.status],
                         layout=w.Layout(flex_flow="row wrap", align_items="center"))
        # The graph takes what it needs to draw at full size (its flex basis) and the whole row
        # when the inspector does not fit beside it: then the inspector wraps below.
        self.graph_box = w.Box([self.cyto], layout=w.Layout(flex="1 1 600px", min_width="0",
                                                            border="1px solid #ddd"))
        # The inspector's text is a flex item: without min-width 0 a long display formula would
        # widen it past its panel instead of scrolling inside its own box (.asg-math).
        css = w.HTML("<style>.asg-inspector-panel .widget-htmlmath-content{min-width:0}</style>",
                     layout=w.Layout(height="0px", margin="0"))
        body = w.Box([self.graph_box, self.inspector], layout=w.Layout(flex_flow="row wrap", width="100%"))
        self.widget = w.VBox([css, toolbar, body, self.legend, self.wgsl_out], layout=w.Layout(width="100%"))
        self.widget.add_class("asg-graphview")
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

    def _set_zoom_limits(self) -> None:
        # the zoom never makes a label smaller than legible; fit never blows a tiny graph up past 2x
        self.cyto.min_zoom = (PRESENT_PX if self.present else LEGIBLE_PX) / self.font_px
        self.cyto.max_zoom = 2.0

    def _rebuild(self) -> None:
        """Replace the drawn elements (fresh widgets; see the module doc) and redo the layout."""
        import ipycytoscape

        self._elements = els = self.elements()
        self.layout = lay = mirror_layout(els, self.font_px)
        old = list(self._element_widgets.values())
        self._element_widgets = {}
        self._generation += 1
        # The frontend removes old elements a tick AFTER adding new ones, so a reused id would
        # collide ("second element with ID"): cytoscape ids carry the generation, data["key"]
        # keeps the stable id ("n12", "g:block") that the rest of the view speaks.
        tag = f"|{self._generation}" if self._generation > 1 else ""
        nodes, edges = [], []
        for el in els:
            data = {**el["data"], "key": el["data"]["id"], "id": el["data"]["id"] + tag}
            for end in ("source", "target", "parent"):
                if end in data:
                    data[end] = data[end] + tag
            if el["group"] == "nodes":
                wdg = ipycytoscape.Node(data=data, classes=el.get("classes", ""))
                at = lay.positions.get(el["data"]["id"])
                if at is not None:
                    wdg.position = {"x": at[0], "y": at[1]}
            else:
                if "label" in data:  # where a label drawn by the target end is centred (half its width, and a gap)
                    data["label_offset"] = round(len(data["label"]) * 0.62 * 11 / FONT_PX * self.font_px / 2 + 12)
                wdg = ipycytoscape.Edge(data=data, classes=el.get("classes", ""))
            self._element_widgets[el["data"]["id"]] = wdg
            (nodes if el["group"] == "nodes" else edges).append(wdg)
        self._size_canvas()
        if old:  # empty the graph first, so the new layout does not make room for the old elements
            with self.cyto.graph.hold_sync():
                self.cyto.graph.nodes, self.cyto.graph.edges = [], []
        with self.cyto.graph.hold_sync():
            self.cyto.graph.nodes = nodes
            self.cyto.graph.edges = edges
        for wdg in old:
            wdg.close()
        cats = sorted({el["data"]["cat"] for el in els if el["data"].get("cat")})
        self.legend.value = legend_html(cats or None, self.lang, backward=self.mode != "forward", present=self.present)
        if self.selected not in self._element_widgets:
            self.selected = None
        self._apply_highlights()
        if self._shown:  # the row may re-flow (inspector beside <-> below): fit once the browser has
            self._fit_later()

    def _set_classes(self, element_id: str, add: set[str], remove: set[str]) -> None:
        wdg = self._element_widgets.get(element_id)
        if wdg is None:
            return
        have = set(wdg.classes.split())
        new = (have - remove) | add
        if new != have:
            wdg.classes = " ".join(sorted(new))

    def _size_canvas(self) -> None:
        """Height from the drawing (labels at full size when it fits), width: what the row gives."""
        lay = self.layout
        if self._fixed_height is None:
            depth = max((str(e["data"]["group"]).count(".") + 1 for e in self._elements
                         if e["data"].get("kind") == "compound"), default=0)
            self._height = f"{canvas_height(lay.height, 1.0, depth)}px"
            self.cyto.layout.height = self._height   # a new height makes the frontend resize and fit
        self.graph_box.layout.flex = f"1 1 {int(max(420, lay.width + 2 * FIT_PADDING + 4))}px"
        self.inspector.layout.max_height = f"{max(420, int(self._height.rstrip('px') or 420))}px" \
            if self._height.endswith("px") else self._height

    _DYNAMIC = {"selected", "incident", "step-current", "step-mirror", "step-rule", "step-sum", "step-done",
                "step-flow"}

    def _apply_highlights(self) -> None:
        """Put the selection and step-through classes on the element widgets."""
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
        for eid in self._element_widgets:
            mine = want.get(eid, set())
            self._set_classes(eid, mine, self._DYNAMIC - mine)

    def rep_of(self, node_id: int) -> str:
        """The element id standing for node ``node_id`` now (itself, or its closed group)."""
        if self.expanded is not None:
            for name in group_path(self.graph, self.graph.nodes[node_id]):
                if name not in self.expanded:
                    return f"g:{name}"
        return f"n{node_id}"

    def fit(self) -> None:
        """Resize the canvas to its box and fit the graph (works around ipycytoscape 1.3.3)."""
        h = self.cyto.layout.height
        self.cyto.layout.height = self._height if h != self._height else f"calc({self._height} + 1px)"

    def _fit_later(self) -> None:
        """After the view is shown, fit a few times while the browser settles its sizes."""
        for delay in (0.4, 1.2, 2.5):
            timer = threading.Timer(delay, self.fit)
            timer.daemon = True
            timer.start()

    # -- interaction ----------------------------------------------------------------------------
    def _on_click(self, event: dict) -> None:
        data = event.get("data", {})
        self.click(str(data.get("key") or str(data.get("id", "")).split("|")[0]))

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
                self.inspector.value = group_html(self.data, key, members, self.lang, is_open=True)
                self._rebuild()
                return
            # close the group and everything inside it (re-opened, its sub-layers start closed)
            still_open = set(self.groups) if self.expanded is None else self.expanded
            self.expanded = {gname for gname in still_open if gname != key and not gname.startswith(key + ".")}
            self.selected = None
            self.inspector.value = group_html(self.data, key, members, self.lang, is_open=False)
            self._rebuild()
            return
        self.selected = element_id
        self.inspector.value = node_html(self.data, key, self.lang)
        self._apply_highlights()

    def inspect_edge(self, edge_id: str) -> None:
        """An edge hiding glue (details off): the inspector explains each hidden node, in flow order."""
        edge = next((e for e in self._elements if e["group"] == "edges" and e["data"]["id"] == edge_id), None)
        folded = edge["data"].get("folded", []) if edge else []
        if not folded:
            return
        self.selected = None
        self.inspector.value = (f'<div class="asg-folded"><p><i>{esc(t("folded_edge", self.lang))}</i></p></div>'
                                + "<hr>".join(node_html(self.data, i, self.lang) for i in folded))
        self._apply_highlights()

    def set_details(self, on: bool) -> None:
        """Draw every node (on), or fold glue into edge labels (off)."""
        on = bool(on)
        if self.details_button.value != on:
            self.details_button.value = on
        if on == self.details:
            return
        self.details = on
        self._rebuild()

    def set_present(self, on: bool) -> None:
        """Presentation mode: 1.6x fonts, thicker edges, high contrast, a large legend (for a projector)."""
        on = bool(on)
        if self.present_button.value != on:
            self.present_button.value = on
        if on == self.present:
            return
        self.present = on
        self.cyto.set_style(cytoscape_style(self.present, FONT_PX))
        self._set_zoom_limits()
        self._rebuild()

    def _on_mode_button(self, change: dict) -> None:
        if not self._relabelling and change["new"] is not None:
            self.set_mode(change["new"])

    def set_mode(self, mode: str) -> None:
        """Show the forward graph, the backward graph (with the forward values it reads), or both."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if mode == self.mode and self._elements:
            return
        self.mode = mode
        if self.mode_buttons.value != mode:
            self.mode_buttons.value = mode
        self._rebuild()

    def set_lang(self, lang: str) -> None:
        """Switch the inspector, legend and buttons to ``lang`` ("en" or "ru")."""
        self.lang = lang
        if self.lang_buttons.value != lang:
            self.lang_buttons.value = lang
        for b, key in ((self.fit_button, "fit"), (self.step_button, "step"), (self.reset_button, "reset"),
                       (self.expand_button, "expand_all"), (self.wgsl_button, "wgsl"),
                       (self.details_button, "details"), (self.present_button, "present")):
            b.description = t(key, lang)
        mode, self._relabelling = self.mode, True
        try:  # new option labels reset the value: do not let that switch the mode
            self.mode_buttons.options = [(t(m, lang), m) for m in MODES]
            self.mode_buttons.value = mode
        finally:
            self._relabelling = False
        cats = sorted({el["data"]["cat"] for el in self._elements if el["data"].get("cat")})
        self.legend.value = legend_html(cats or None, lang, backward=self.mode != "forward", present=self.present)
        if 0 <= self.step_index < len(self.steps):
            self.status.value = self._step_status(self.step_index)
        self._render_inspector()

    def _render_inspector(self) -> None:
        if 0 <= self.step_index < len(self.steps):
            self.inspector.value = self.step_html(self.step_index)
        elif self.selected:
            kind, key = parse_element_id(self.selected)
            self.inspector.value = node_html(self.data, key, self.lang)
        else:
            self.inspector.value = empty_html(self.lang)

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
                self.status.value = (f'<span class="asg-expand-warn" style="color:#a05a00">'
                                     f'{esc(t("expand_warn", self.lang).format(n=f"{n:,}", s=f"{secs:.0f}"))}</span>')
                return
        self._expand_asked = False
        self.status.value = ""
        self.expanded = set() if not opening else None
        self.expand_button.description = t("collapse_all" if self.expanded is None else "expand_all", self.lang)
        self._rebuild()

    # -- step-through backward -------------------------------------------------------------------
    def step(self, delta: int = 1) -> Step | None:
        """Advance (or go back) one visit of the recorded backward sweep; returns that step."""
        if not self.steps:
            self.status.value = esc(t("no_pass", self.lang))
            return None
        if self.mode == "forward":
            self.set_mode("both")
        self.step_index = max(-1, min(len(self.steps) - 1, self.step_index + delta))
        if self.step_index < 0:
            self.status.value = ""
            self._apply_highlights()
            self._render_inspector()
            return None
        s = self.steps[self.step_index]
        self.status.value = self._step_status(self.step_index)
        self.selected = self.rep_of(s.node)
        self._apply_highlights()
        self.inspector.value = self.step_html(self.step_index)
        return s

    def _step_status(self, k: int) -> str:
        s = self.steps[k]
        return (f'<span class="asg-step-status">{esc(t("step_title", self.lang))} {k + 1} {esc(t("of", self.lang))} '
                f'{len(self.steps)}: #{s.node} {user_text(self.graph.nodes[s.node].op)}</span>')

    def reset(self) -> None:
        """Clear the step-through and the selection."""
        self.step_index = -1
        self.selected = None
        self.status.value = ""
        self._apply_highlights()
        self.inspector.value = empty_html(self.lang)

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

        self.wgsl_available = ok = "wgpu" in available()
        self.wgsl_button.layout.display = None if ok else "none"

    def show_wgsl(self) -> str:
        """Show (and return) the WGSL source of the selected node's kernel."""
        if not self.selected or parse_element_id(self.selected)[0] != "node":
            self.wgsl_out.value = ""
            return ""
        node_id = parse_element_id(self.selected)[1]
        try:
            src = _wgpu_plan_shader(self.graph, node_id)
        except Exception as e:  # noqa: BLE001 - leaves have no kernel; say so
            self.wgsl_out.value = f'<div class="asg-wgsl" style="color:#a05a00">{user_text(e)}</div>'
            return ""
        self.wgsl_out.value = (f'<details open class="asg-wgsl"><summary>WGSL #{node_id}</summary>'
                               f'<pre style="font-size:11px;max-height:300px;overflow:auto">{esc(src)}</pre></details>')
        return src

    # -- notebook display ------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        from .static import static_html

        bundle = self.widget._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        data["text/html"] = static_html(self.scope, lang=self.lang, mode=self.mode, expanded=self.expanded)
        self._shown = True
        self._fit_later()
        return data
