// The graph view's browser side (an anywidget ES module): it draws what Python sends and
// reports clicks. Python (asgteach/widgets/view.py) holds every piece of state: the elements
// with their positions (one traitlet, one message per graph), the stylesheet, the highlight
// classes, the inspector's HTML, the toolbar's words. This file only:
//
//   * draws the elements with cytoscape.js at the positions given ("preset": no layout here),
//     fits them into the canvas without ever zooming below the legible minimum (a bigger graph
//     pans, top first), and refits when the canvas changes size or Python asks (fit_seq);
//   * puts the highlight classes (selection, step-through) on the drawn elements;
//   * shows the inspector's HTML and typesets its formula boxes (.asg-math, our own LaTeX from
//     the explanation tables; user text never is) with KaTeX as MathML: no fonts, no CDN;
//   * draws the toolbar from Python's words and sends every click as one `event` change.
//
// Built into asgteach/widgets/bundle/graphview.js by js/build.mjs (npm ci && npm run build).

import cytoscape from "cytoscape";
import katex from "katex";

const CSS = `
.asg-graphview { display: flex; flex-direction: column; width: 100%; box-sizing: border-box;
  font-family: var(--jp-ui-font-family, system-ui, sans-serif); font-size: 13px; color: #111; }
.asg-graphview .asg-toolbar { display: flex; flex-flow: row wrap; align-items: center; gap: 4px; margin: 2px 0 6px; }
.asg-graphview .asg-group-buttons { display: inline-flex; }
.asg-graphview button { font: inherit; padding: 3px 9px; border: 1px solid #9a9a9a; background: #f3f3f3;
  color: #111; border-radius: 3px; cursor: pointer; }
.asg-graphview .asg-group-buttons button { border-radius: 0; margin-left: -1px; }
.asg-graphview .asg-group-buttons button:first-child { border-radius: 3px 0 0 3px; margin-left: 0; }
.asg-graphview .asg-group-buttons button:last-child { border-radius: 0 3px 3px 0; }
.asg-graphview button.asg-on { background: #2f5d8a; color: #fff; border-color: #2f5d8a; }
.asg-graphview button:disabled { opacity: 0.45; cursor: default; }
.asg-graphview .asg-body { display: flex; flex-flow: row wrap; width: 100%; gap: 6px; }
.asg-graphview .asg-graph-box { flex: 1 1 600px; min-width: 0; border: 1px solid #ddd; position: relative; }
.asg-graphview .asg-canvas { width: 100%; position: relative; }
.asg-graphview .asg-legend svg { display: inline-block; vertical-align: middle; }
.asg-graphview .asg-inspector-panel { flex: 1 1 340px; min-width: 300px; max-width: 640px; overflow: auto;
  padding: 0 8px; box-sizing: border-box; line-height: 1.45; }
.asg-graphview .asg-inspector-panel .asg-math { overflow-x: auto; overflow-y: hidden; max-width: 100%; }
.asg-graphview .asg-inspector-panel math { font-size: 1.15em; }
.asg-graphview .asg-inspector-panel code { font-size: 12px; }
.asg-graphview .asg-status { margin-left: 6px; }
.asg-graphview.asg-presenting { font-size: 18px; }
.asg-graphview.asg-presenting .asg-inspector-panel code { font-size: 16px; }
`;

/** Typeset our own formula boxes: "$$...$$" (display) or "$...$" inside .asg-math, nothing else. */
function typeset(root) {
  for (const box of root.querySelectorAll(".asg-math")) {
    const src = box.textContent.trim();
    const display = src.startsWith("$$") && src.endsWith("$$") && src.length >= 4;
    const inline = !display && src.startsWith("$") && src.endsWith("$") && src.length >= 2;
    if (!display && !inline) continue;
    const tex = display ? src.slice(2, -2) : src.slice(1, -1);
    box.innerHTML = katex.renderToString(tex, {
      displayMode: display, output: "mathml", throwOnError: false, strict: "ignore", trust: false,
    });
  }
}

function button(cls, onClick) {
  const b = document.createElement("button");
  b.className = cls;
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

// The picture of this view is displayed as the output just before it, for where no widget runs (an
// untrusted notebook, one reopened after its kernel died). While this live view stands in for it,
// that picture is hidden, and shown again when the view goes. It is the previous output, holding an
// image of ours: a PNG whose data ends with `picture_tail`, or our SVG (class asg-picture). A
// front-end without that output structure gets the PNG looked up by its tail in the whole page.
function isOurPicture(img, tail) {
  const src = (img.getAttribute("src") || "").trimEnd();
  if (src.startsWith("data:image/png")) return Boolean(tail) && src.endsWith(tail);
  return src.startsWith("data:image/svg") && src.includes("asg-picture");
}

function hidePicture(el, tail) {
  const hide = (box) => { box.style.display = "none"; return box; };
  const output = el.closest(".jp-OutputArea-child, .output_area");
  if (output) {
    const prev = output.previousElementSibling;
    const img = prev && prev.querySelector("img");
    const inline = prev && prev.querySelector("svg.asg-picture");
    return prev && ((img && isOurPicture(img, tail)) || inline) && prev.style.display !== "none" ? [hide(prev)] : [];
  }
  return [...document.querySelectorAll('img[src^="data:image/png"]')]
    .filter((img) => isOurPicture(img, tail) && img.style.display !== "none").map(hide);
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "asg-graphview";
  // the view carries its own style: a front-end that renders widgets in a shadow root (marimo)
  // would not see one put into document.head
  const local = document.createElement("style");
  local.textContent = CSS;
  root.appendChild(local);
  el.appendChild(root);

  let seq = 0;
  const send = (type, value) => {
    seq += 1;
    model.set("event", { type, value, seq });
    model.save_changes();
  };

  // --- toolbar -------------------------------------------------------------------------------
  const toolbar = document.createElement("div");
  toolbar.className = "asg-toolbar";
  const fitB = button("asg-fit", () => { fit(); send("fit", null); });
  const modeBox = document.createElement("span");
  modeBox.className = "asg-mode asg-group-buttons";
  const langBox = document.createElement("span");
  langBox.className = "asg-lang asg-group-buttons";
  const backB = button("asg-step-back", () => send("step", -1));
  const stepB = button("asg-step", () => send("step", 1));
  const resetB = button("asg-reset", () => send("reset", null));
  const expandB = button("asg-expand", () => send("expand", null));
  const detailsB = button("asg-details", () => send("details", !model.get("toolbar").details));
  const presentB = button("asg-present", () => send("present", !model.get("toolbar").present));
  const wgslB = button("asg-wgsl", () => send("wgsl", null));
  const status = document.createElement("span");
  status.className = "asg-status";
  toolbar.append(fitB, modeBox, langBox, backB, stepB, resetB, expandB, detailsB, presentB, wgslB, status);

  const body = document.createElement("div");
  body.className = "asg-body";
  const graphBox = document.createElement("div");
  graphBox.className = "asg-graph-box";
  const canvas = document.createElement("div");
  canvas.className = "asg-canvas";
  graphBox.appendChild(canvas);
  const inspector = document.createElement("div");
  inspector.className = "asg-inspector-panel";
  body.append(graphBox, inspector);
  const legend = document.createElement("div");
  legend.className = "asg-legend-box";
  const wgsl = document.createElement("div");
  wgsl.className = "asg-wgsl-box";
  root.append(toolbar, body, legend, wgsl);

  // cytoscape is created once the canvas is in the page: a front-end may render the view into a
  // detached element first, and cytoscape would then take that element's root for a shadow root
  // and ignore every click
  let cy = null;
  function start() {
    cy = cytoscape({
      container: canvas, elements: [], style: model.get("stylesheet"), layout: { name: "preset" },
      minZoom: model.get("min_zoom"), maxZoom: model.get("max_zoom"),
      boxSelectionEnabled: false, autoungrabify: true, autounselectify: true,
      textureOnViewport: true, hideEdgesOnViewport: false, pixelRatio: "auto",
    });
    canvas.asgCy = cy;   // the tests and the benchmark find the instance here
    // cytoscape keeps the canvas's page position from its last resize, and a notebook scrolls in its
    // own panel, not the window: read it afresh when a press or a wheel starts, or the tap lands off
    for (const kind of ["pointerdown", "wheel"]) {
      canvas.addEventListener(kind, () => cy.resize(), { capture: true, passive: true });
    }
    cy.on("tap", "node, edge", (e) => send("click", e.target.id()));
    drawElements();
    ro.observe(canvas);
  }

  /** Fit into the canvas; at the zoom floor the top of the graph (the inputs) shows first. */
  function fit() {
    if (!cy) return;
    cy.resize();
    const pad = model.get("padding");
    const els = cy.nodes();
    if (els.empty() || cy.width() < 10 || cy.height() < 10) return;
    // the nodes' bodies hold their labels (sized by the layout) and the edges run between them, so the
    // nodes' box is the drawing's; measuring every label and edge path costs a second on 1,015 nodes
    const bb = els.boundingBox({ includeLabels: false, includeOverlays: false, includeUnderlays: false });
    const z = Math.min((cy.width() - 2 * pad) / bb.w, (cy.height() - 2 * pad) / bb.h);
    const zoom = Math.max(cy.minZoom(), Math.min(cy.maxZoom(), z));
    const x = bb.w * zoom + 2 * pad <= cy.width() ? (cy.width() - bb.w * zoom) / 2 - bb.x1 * zoom : pad - bb.x1 * zoom;
    const y = bb.h * zoom + 2 * pad <= cy.height() ? (cy.height() - bb.h * zoom) / 2 - bb.y1 * zoom : pad - bb.y1 * zoom;
    cy.viewport({ zoom, pan: { x, y } });
  }

  function drawElements() {
    if (!cy) return;
    cy.batch(() => {
      cy.elements().remove();
      cy.add(model.get("elements"));
    });
    drawHighlights();
    fit();
  }

  let lit = new Map();
  function drawHighlights() {
    if (!cy) return;
    const want = model.get("highlights") || {};
    cy.batch(() => {
      for (const [id, classes] of lit) {
        if (!(id in want)) cy.getElementById(id).removeClass(classes);
      }
      const next = new Map();
      for (const [id, classes] of Object.entries(want)) {
        const e = cy.getElementById(id);
        const old = lit.get(id);
        if (old && old !== classes) e.removeClass(old);
        if (e.nonempty()) e.addClass(classes);
        next.set(id, classes);
      }
      lit = next;
    });
  }

  function drawStyle() {
    if (!cy) return;
    cy.style().fromJson(model.get("stylesheet")).update();
    cy.minZoom(model.get("min_zoom"));
    cy.maxZoom(model.get("max_zoom"));
  }

  function drawSize() {
    canvas.style.height = model.get("height");
    graphBox.style.flex = `1 1 ${model.get("graph_width")}px`;
    inspector.style.maxHeight = model.get("inspector_height");
    fit();
  }

  function drawInspector() {
    inspector.innerHTML = model.get("inspector_html");
    typeset(inspector);
    inspector.scrollTop = 0;
  }

  function drawToolbar() {
    const t = model.get("toolbar");
    const w = t.words;
    fitB.textContent = w.fit;
    for (const [box, options, value, kind] of [[modeBox, t.modes, t.mode, "mode"], [langBox, t.langs, t.lang, "lang"]]) {
      box.replaceChildren(...options.map(([label, key]) => {
        const b = button(key === value ? "asg-on" : "", () => send(kind, key));
        b.textContent = label;
        b.dataset.value = key;
        return b;
      }));
    }
    backB.textContent = w.step_back;
    stepB.textContent = w.step;
    resetB.textContent = w.reset;
    expandB.textContent = t.expand_label;
    detailsB.textContent = w.details;
    presentB.textContent = w.present;
    wgslB.textContent = w.wgsl;
    backB.disabled = stepB.disabled = !t.can_step;
    expandB.disabled = !t.can_expand;
    detailsB.classList.toggle("asg-on", !!t.details);
    presentB.classList.toggle("asg-on", !!t.present);
    wgslB.style.display = t.wgsl ? "" : "none";
    root.classList.toggle("asg-presenting", !!t.present);   // a projector: the text grows with the graph
  }

  const handlers = {
    "change:elements": drawElements,
    "change:highlights": drawHighlights,
    "change:stylesheet change:min_zoom change:max_zoom": () => { drawStyle(); fit(); },
    "change:height change:graph_width change:inspector_height": drawSize,
    "change:inspector_html": drawInspector,
    "change:status_html": () => { status.innerHTML = model.get("status_html"); },
    "change:legend_html": () => { legend.innerHTML = model.get("legend_html"); },
    "change:wgsl_html": () => { wgsl.innerHTML = model.get("wgsl_html"); },
    "change:toolbar": drawToolbar,
    "change:fit_seq": fit,
  };
  for (const [name, fn] of Object.entries(handlers)) model.on(name, fn);

  drawToolbar();
  drawSize();
  drawInspector();
  status.innerHTML = model.get("status_html");
  legend.innerHTML = model.get("legend_html");
  wgsl.innerHTML = model.get("wgsl_html");

  // the canvas has no size until the page lays it out, and its box changes with the cell's width
  let last = [0, 0];
  const ro = new ResizeObserver(() => {
    const size = [canvas.clientWidth, canvas.clientHeight];
    if (size[0] !== last[0] || size[1] !== last[1]) {
      last = size;
      fit();
    }
  });
  let waiting = true;
  const wait = () => {
    if (!waiting) return;
    if (canvas.isConnected) {
      start();
      hidden = hidePicture(el, model.get("picture_tail"));
    } else requestAnimationFrame(wait);
  };
  let hidden = [];
  wait();

  return () => {
    waiting = false;
    for (const box of hidden) box.style.display = "";
    ro.disconnect();
    for (const [name, fn] of Object.entries(handlers)) model.off(name, fn);
    if (cy) cy.destroy();
  };
}

export default { render };
