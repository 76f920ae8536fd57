"""The Node Inspector: the HTML that explains one node (or one collapsed layer).

For any node it says, in the chosen language: what the op does, its formula and backward
rule (LaTeX, rendered by the HTMLMath widget's MathJax), why it is used and its pitfalls;
for a parameter, its role in this model (from its layer/role/init metadata); then the
technical facts (id, op, shape, dtype, phase, inputs, the user's source line). When the
view has numbers, also the node's value and gradient (statistics and a heatmap) and the
backward rule worked out on this node's own numbers.

Everything the user typed (node, parameter and layer names, op names of registered ops,
source lines and files, attribute and metadata values) goes through
:func:`~asgteach.usertext.user_text`: HTML-escaped AND kept out of MathJax, so a node
called ``<img src=x onerror=alert(1)>`` or ``$\\href{javascript:alert(1)}{x}$`` is shown as
text, never run or typeset. The only regions MathJax may typeset are our own formulas
(``.asg-math``, ``.asg-step-math``), which come from the explanation tables, never from a name.
"""

from __future__ import annotations

import html
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import explain
from ..graph import Graph, Node, source_line_text
from .elements import category_of, group_path, shape_text
from .i18n import t
from .styles import category_label, colour
from ..usertext import NO_MATH, user_text
from .values import heatmap_img, stats

__all__ = ["InspectorData", "explanation", "node_html", "group_html", "prose", "esc", "empty_html", "user_text"]


def esc(text: Any) -> str:
    """HTML-escape our own words (quotes too). User text goes through :func:`user_text` instead."""
    return html.escape(str(text), quote=True)


def prose(text: str) -> str:
    """Explanation prose -> HTML: escaped, with `backticks` as <code>, never typeset.

    Prose has no maths of its own, and role texts have the user's names filled in
    (``{name}``, ``{layer}``, ``{init}``), with or without backticks around them: the whole
    paragraph is kept away from MathJax (a name holding a backtick cannot escape its
    ``<code>`` into a typeset region).
    """
    escaped = esc(text).replace("$", "&#36;").replace("\\", "&#92;")
    return f'<span class="{NO_MATH}">' + re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped) + "</span>"


def _math(latex: str, display: bool = True) -> str:
    delim = "$$" if display else "$"
    # a long rule (add's two sum_to terms) scrolls inside its own box instead of widening the panel
    return (f'<div class="asg-math" style="overflow-x:auto;overflow-y:hidden;max-width:100%">'
            f'{delim}{esc(latex)}{delim}</div>' if display else f"{delim}{esc(latex)}{delim}")


@dataclass
class InspectorData:
    """What the inspector may draw on besides the graph: values and the gradient map.

    ``values``: node id -> array (forward and backward nodes alike).
    ``grads``: forward node id -> id of the node holding dL/d(that node), from the latest
    recorded ``at.grad`` sweep. ``senders``: (receiver, sender) -> contribution node id.
    """

    graph: Graph
    values: dict[int, np.ndarray] = field(default_factory=dict)
    grads: dict[int, int] = field(default_factory=dict)
    senders: dict[tuple[int, int], int] = field(default_factory=dict)


def explanation(node: Node | str, lang: str) -> tuple[Any, str | None]:
    """``(record, note)``: the explain record (or None) and a note when it is missing or English-only."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rec = explain.explain(node, lang)
    except KeyError:  # no record for this op, not even in English
        return None, t("no_explanation", lang)
    note = t("no_explanation", lang) + " (English)" if caught and getattr(rec, "lang", lang) != lang[:2] else None
    return rec, note


def _section(title: str, body: str, cls: str) -> str:
    return (f'<div class="asg-sec {cls}"><div class="asg-h" style="font-weight:bold;margin-top:8px">'
            f'{esc(title)}</div>{body}</div>')


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _stats_html(a: np.ndarray, title: str, lang: str) -> str:
    s = stats(a)
    parts = [f"{t('shape', lang)} {esc(shape_text(s['shape']))}"]
    if "min" in s:
        if a.size == 1:
            parts.append(f"= <b>{esc(_fmt(float(np.asarray(a, dtype=np.float64).reshape(-1)[0])))}</b>")
        else:
            parts.append(" · ".join(f"{t(k, lang)} {esc(_fmt(s[k]))}" for k in ("min", "mean", "max")))
    if s.get("nonfinite"):
        parts.append(f'<span style="color:#c0392b">{s["nonfinite"]} {t("nonfinite", lang)}</span>')
    return (f'<div class="asg-stats"><b>{esc(title)}</b>: {" · ".join(parts)}</div>'
            f'{heatmap_img(a, title) if a.size > 1 else ""}')


def _entry(a: np.ndarray, idx: tuple[int, ...]) -> float:
    return float(np.asarray(a, dtype=np.float64)[idx]) if a.ndim else float(a)


def _local_html(data: InspectorData, node: Node, lang: str) -> str:
    """The backward rule with numbers: g at one entry, and what each input receives there."""
    g_id = data.grads.get(node.id)
    if g_id is None or g_id not in data.values or node.op in ("input", "parameter", "constant"):
        return ""
    g = np.asarray(data.values[g_id])
    idx = (0,) * g.ndim
    rows = [f"<li>{t('entry', lang)} {esc(list(idx))}: g = ∂L/∂y = <b>{esc(_fmt(_entry(g, idx)))}</b>"]
    if node.id in data.values:
        rows[0] += f", y = {esc(_fmt(_entry(np.asarray(data.values[node.id]), idx)))}"
    rows[0] += "</li>"
    for k, i in enumerate(node.inputs):
        c_id = data.senders.get((i, node.id))
        if c_id is None or c_id not in data.values:
            continue
        c = np.asarray(data.values[c_id])
        inp = data.graph.nodes[i]
        j = idx if c.shape == g.shape else (0,) * c.ndim
        line = (f"<li>x<sub>{k}</sub> = {user_text(inp.name)} #{i}"
                + (f" = {esc(_fmt(_entry(np.asarray(data.values[i]), j)))}" if i in data.values
                   and np.asarray(data.values[i]).shape == c.shape else "")
                + f" {t('receives', lang)} <b>{esc(_fmt(_entry(c, j)))}</b>")
        if c.shape == g.shape and len(node.inputs) == 1 and _entry(g, idx) != 0:
            line += f"; {t('local_slope', lang)} = <b>{esc(_fmt(_entry(c, j) / _entry(g, idx)))}</b>"
        rows.append(line + "</li>")
        rows.append("<li style='list-style:none'>" + _stats_html(c, f"∂L/∂x{k}", lang) + "</li>")
    return _section(t("local", lang), f"<ul>{''.join(rows)}</ul>", "asg-local")


def _backward_note(data: InspectorData, node: Node, lang: str) -> str:
    g = data.graph
    bits = []
    for key, word in (("vjp_of", "part_of_rule"), ("accumulates", "sums_for"), ("seed_of", "seed_for")):
        target = node.meta.get(key)
        if isinstance(target, int) and 0 <= target < len(g.nodes):
            tn = g.nodes[target]
            bits.append(f"{esc(t(word, lang))} <b>{user_text(tn.op)}</b> <code>{user_text(tn.name)}</code> #{target}")
    target = node.meta.get("grad_of")
    if isinstance(target, int) and 0 <= target < len(g.nodes):
        bits.append(f"{esc(t('grad_result', lang))}<code>{user_text(g.nodes[target].name)}</code> (#{target})")
    return "".join(f'<div class="asg-bnote">{b}</div>' for b in bits)


def _technical(data: InspectorData, node: Node, lang: str) -> str:
    g = data.graph
    consumers = [n.id for n in g.nodes[node.id + 1:] if node.id in n.inputs]
    rows = [
        (t("id", lang), f"#{node.id}"), (t("op", lang), user_text(node.op)),
        (t("name", lang), f"<code>{user_text(node.name)}</code>"),
        (t("shape", lang), esc(shape_text(node.shape))), (t("dtype", lang), esc(node.dtype)),
        (t("phase", lang), esc(node.phase)),
        (t("inputs", lang), ", ".join(f"#{i} {user_text(g.nodes[i].op)} <code>{user_text(g.nodes[i].name)}</code> "
                                      f"{esc(shape_text(g.nodes[i].shape))}" for i in node.inputs) or "—"),
        (t("consumers", lang), ", ".join(f"#{i} {user_text(g.nodes[i].op)}" for i in consumers[:12])
         + (" …" if len(consumers) > 12 else "") or "—"),
    ]
    if node.attrs:
        rows.append((t("attrs", lang), user_text(", ".join(f"{k}={v}" for k, v in node.attrs.items()))))
    line = source_line_text(node.source)
    where = f"<code>{user_text(node.source)}</code>" + (f"<br><code>{user_text(line)}</code>" if line else "")
    rows.append((t("source", lang), where))
    meta = {k: v for k, v in node.meta.items() if v not in (None, {}, "")}
    if meta:
        rows.append((t("meta", lang), user_text(", ".join(f"{k}={v}" for k, v in meta.items()))))
    body = "".join(f"<tr><td style='color:#666;padding-right:8px;vertical-align:top'>{esc(k)}</td><td>{v}</td></tr>"
                   for k, v in rows)
    return (f'<details class="asg-tech"><summary>{esc(t("technical", lang))}</summary>'
            f'<table style="font-size:11px">{body}</table></details>')


def _supplied_html(data: InspectorData, node: Node, lang: str) -> str:
    """What the runner feeds an input by itself (``node.supplied``): a dropout mask, a training flag, a running
    statistic, in the words of the mode that decides it."""
    sup = node.supplied
    text = t(f"supplied_{sup.kind}", lang).replace("{p}", f"{sup.p:g}").replace("{fill}", f"{sup.fill:g}")
    nxt = sup.next if sup.next is not None and 0 <= sup.next < len(data.graph.nodes) else None
    text = text.replace("{next}", str(nxt) if nxt is not None else "?")
    body = f"<p>{esc(text)}</p>"
    if nxt is not None:
        n = data.graph.nodes[nxt]
        name = f" <code>{user_text(n.name)}</code>" if n.name != n.op else ""
        body += f"<p>#{nxt} <b>{user_text(n.op)}</b>{name}</p>"
    if sup.refuse:
        body += f'<p style="color:#a05a00">{esc(t("supplied_refuse", lang))} {user_text(sup.refuse)}</p>'
    return body


def _chip(cat: str, lang: str) -> str:
    return (f'<span class="asg-cat" style="background:{colour(cat)};border:1px solid #666;border-radius:3px;'
            f'padding:0 5px;font-size:11px">{esc(category_label(cat, lang))}</span>')


def node_html(data: InspectorData, node_id: int, lang: str = "en") -> str:
    """The inspector page for node ``node_id``."""
    node = data.graph.nodes[node_id]
    rec, note = explanation(node, lang)
    lab = explain.labels(lang)
    cat = category_of(node)
    # no record: a user-registered op, whose name is user text
    title = esc(rec.headline) if rec is not None else user_text(node.op)
    out = [f'<div class="asg-inspector" data-node="{node.id}" data-lang="{esc(lang)}">',
           f'<div class="asg-title" style="font-weight:bold;font-size:14px">{_chip(cat, lang)} {title}</div>',
           f'<div class="asg-name"><code>{user_text(node.name)}</code> #{node.id} · {esc(shape_text(node.shape))}'
           f' · {esc(t(node.phase, lang))}</div>']
    if node.phase == "backward":
        out.append(_backward_note(data, node, lang))
    if note:
        out.append(f'<div class="asg-note" style="color:#a05a00">{esc(note)}</div>')
    if rec is not None:
        out.append(_section(lab.get("what", "What"), f"<p>{prose(rec.what)}</p>", "asg-what"))
        out.append(_section(lab.get("formula", "Formula"), _math(rec.formula), "asg-formula"))
        notation = lab.get("notation", "")
        out.append(_section(lab.get("vjp", "Backward rule"), _math(rec.vjp)
                            + (f'<div style="font-size:11px;color:#555">{prose(notation)}</div>' if notation else ""),
                            "asg-vjp"))
        out.append(_section(lab.get("why", "Why"), f"<p>{prose(rec.why)}</p>", "asg-why"))
        if getattr(rec, "pitfalls", ""):
            out.append(f'<details class="asg-pitfalls"><summary>{esc(lab.get("pitfalls", "Pitfalls"))}</summary>'
                       f"<p>{prose(rec.pitfalls)}</p></details>")
        role = getattr(rec, "role", None)
        if role is not None:
            body = f"<p><b>{prose(role.headline)}</b></p><p>{prose(role.what)}</p>"
            if role.formula:
                body += _math(role.formula)
            body += f"<p>{prose(role.why)}</p>"
            if role.init is not None:
                body += f"<p><i>{esc(lab.get('init', 'Initialisation'))}</i>: {prose(role.init.summary)}</p>"
            out.append(_section(lab.get("role", "Role"), body, "asg-role"))
    if node.supplied is not None:
        out.append(_section(t("supplied", lang), _supplied_html(data, node, lang), "asg-supplied"))
    if data.values:
        vals = []
        if node.id in data.values:
            vals.append(_stats_html(np.asarray(data.values[node.id]), t("value", lang), lang))
        gid = data.grads.get(node.id)
        if gid is not None and gid in data.values:
            vals.append(_stats_html(np.asarray(data.values[gid]), t("gradient", lang), lang))
        if vals:
            out.append(_section(t("values", lang), "".join(vals), "asg-values"))
        out.append(_local_html(data, node, lang))
    out.append(_technical(data, node, lang))
    out.append("</div>")
    return "".join(out)


def group_html(data: InspectorData, group: str, member_ids: list[int], lang: str = "en", is_open: bool = False) -> str:
    """The inspector page for a layer group (collapsed or open)."""
    g = data.graph
    ops: dict[str, int] = {}
    for i in member_ids:
        ops[g.nodes[i].op] = ops.get(g.nodes[i].op, 0) + 1
    params = [g.nodes[i] for i in member_ids if g.nodes[i].op == "parameter" and group_path(g, g.nodes[i])]
    rows = "".join(f"<li><code>{user_text(p.name)}</code> {esc(shape_text(p.shape))} "
                   f"({user_text(p.meta.get('role') or '')}, init={user_text(p.meta.get('init'))})</li>"
                   for p in params[:20])
    counts = ", ".join(f"{user_text(op)}×{n}" for op, n in sorted(ops.items(), key=lambda kv: -kv[1]))
    kinds = {p.meta.get("layer_kind") for p in params if p.meta.get("layer_kind")}
    kind = f" ({user_text(', '.join(sorted(str(k) for k in kinds)))})" if kinds else ""
    hint = t("click_collapse", lang) if is_open else t("click_expand", lang)
    return (f'<div class="asg-inspector asg-group" data-group="{esc(group)}" data-lang="{esc(lang)}">'
            f'<div class="asg-title" style="font-weight:bold;font-size:14px">{esc(t("group", lang))} '
            f'<code>{user_text(group)}</code>{kind}</div>'
            f'<p>{len(member_ids)} {esc(t("nodes_in_group", lang))}: {counts}</p>'
            + (f"<ul>{rows}</ul>" if rows else "") + f"<p><i>{esc(hint)}</i></p></div>")


def empty_html(lang: str = "en") -> str:
    """What the inspector says before anything is clicked."""
    return f'<div class="asg-inspector asg-empty" data-lang="{esc(lang)}"><p>{esc(t("click_hint", lang))}</p></div>'
