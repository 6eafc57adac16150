// The GEM page: draws the graph from /gem/graph.json with cytoscape, shows a clicked page
// (screenshot, inputs, outputs) and highlights the shortest path between two pages (/gem/path.json).
// The map keeps its shape between loads: node positions are kept per graph in localStorage (a
// dragged node stays where it was put), and a first layout starts from positions seeded by the node
// ids, so the same graph is drawn the same way on any browser.
(function () {
  "use strict";
  const box = document.getElementById("gem-graph");
  if (!box || typeof cytoscape !== "function") return;
  const fromSelect = document.getElementById("gem-from");
  const toSelect = document.getElementById("gem-to");
  const pathList = document.getElementById("gem-path");
  const detail = document.getElementById("gem-page-detail");
  const note = document.getElementById("gem-note");
  const KIND_COLOURS = {page: "#3b6fd8", dialog: "#8e44ad", launcher: "#2e8b57", recents: "#2e8b57",
                        share_sheet: "#2e8b57"};
  const VIA_COLOURS = {tap: "#8a8f98", back: "#8a8f98", launch: "#2a7de1", home: "#2a7de1",
                       recents: "#2a7de1", share: "#e67e22", clipboard: "#e67e22"};
  let cy = null;
  let nodesById = {};
  let layoutKey = "";

  function storedPositions() {
    try { return JSON.parse(window.localStorage.getItem(layoutKey) || "{}") || {}; } catch (error) { return {}; }
  }

  function savePositions() {
    if (!cy) return;
    const positions = {};
    cy.nodes().forEach((node) => { positions[node.id()] = node.position(); });
    try { window.localStorage.setItem(layoutKey, JSON.stringify(positions)); } catch (error) { /* private mode */ }
  }

  // A position from the node's id alone (not Math.random), so a layout starting from it is repeatable.
  function seeded(id) {
    let hash = 2166136261;
    for (const ch of String(id)) hash = Math.imul(hash ^ ch.charCodeAt(0), 16777619) >>> 0;
    return {x: hash % 997, y: Math.floor(hash / 997) % 991};
  }

  function text(tag, content, attrs) {
    const element = document.createElement(tag);
    if (content !== undefined) element.textContent = content;
    Object.entries(attrs || {}).forEach(([key, value]) => element.setAttribute(key, value));
    return element;
  }

  function list(title, items) {
    const wrap = text("div");
    wrap.appendChild(text("strong", title));
    const ul = text("ul");
    (items.length ? items : ["none"]).forEach((item) => ul.appendChild(text("li", item)));
    wrap.appendChild(ul);
    return wrap;
  }

  function showPage(node) {
    detail.replaceChildren();
    detail.appendChild(text("h3", node.label));
    detail.appendChild(text("p", `${node.app} · ${node.kind}${node.is_start ? " · start page" : ""} · depth ${node.depth}`
                                   + (node.activity ? ` · ${node.activity}` : ""), {class: "hint"}));
    if (node.screenshot) detail.appendChild(text("img", undefined, {src: node.screenshot, alt: `screenshot of ${node.label}`}));
    else detail.appendChild(text("p", "No screenshot stored.", {class: "hint"}));
    if (node.description) detail.appendChild(text("p", node.description));
    detail.appendChild(list("Inputs (what it consumes)", node.inputs));
    detail.appendChild(list("Outputs (what it yields)", node.outputs));
  }

  function fillSelects(nodes) {
    [fromSelect, toSelect].forEach((select) => {
      select.replaceChildren();
      nodes.forEach((node) => select.appendChild(text("option", `${node.label} (${node.app}, #${node.id})`, {value: node.id})));
    });
    if (nodes.length > 1) toSelect.selectedIndex = nodes.length - 1;
  }

  function elements(data) {
    const out = [];
    data.nodes.forEach((node) => {
      nodesById[node.id] = node;
      out.push({group: "nodes", data: {id: String(node.id), label: node.label, kind: node.kind, start: node.is_start},
                position: seeded(node.id)});
    });
    data.edges.forEach((edge) => {
      out.push({group: "edges", data: {id: `e${edge.id}`, source: String(edge.source), target: String(edge.target),
                                       via: edge.via, usable: edge.usable, reason: edge.reason || "",
                                       until: edge.unreachable_until || ""}});
    });
    return out;
  }

  function draw(data) {
    nodesById = {};
    note.textContent = data.note || `${data.nodes.length} pages, ${data.edges.length} edges.`;
    fillSelects(data.nodes);
    const roots = data.nodes.filter((n) => n.is_start || n.kind === "launcher").map((n) => `#${n.id}`);
    layoutKey = `gem-layout:${data.app}`;
    const kept = storedPositions();
    const allKept = data.nodes.length > 0 && data.nodes.every((n) => kept[String(n.id)]);
    let layout;
    if (allKept) layout = {name: "preset", positions: (node) => kept[node.id()], fit: true, padding: 20};
    else if (roots.length && data.app !== "cross") {
      layout = {name: "breadthfirst", directed: true, roots: roots, spacingFactor: 1.1, padding: 20};
    } else layout = {name: "cose", animate: false, randomize: false, padding: 20, nodeRepulsion: () => 9000};
    cy = cytoscape({
      container: box,
      elements: elements(data),
      wheelSensitivity: 0.2,
      style: [
        {selector: "node", style: {"label": "data(label)", "font-size": 10, "text-wrap": "ellipsis",
                                   "text-max-width": 110, "text-valign": "bottom", "width": 22, "height": 22,
                                   "background-color": (n) => KIND_COLOURS[n.data("kind")] || "#3b6fd8"}},
        {selector: "node[?start]", style: {"border-width": 4, "border-color": "#1b2a4a"}},
        {selector: "edge", style: {"curve-style": "bezier", "target-arrow-shape": "triangle", "width": 1.5,
                                   "line-color": (e) => VIA_COLOURS[e.data("via")] || "#8a8f98",
                                   "target-arrow-color": (e) => VIA_COLOURS[e.data("via")] || "#8a8f98"}},
        {selector: "edge[via = 'back']", style: {"line-style": "dotted"}},
        {selector: "edge[!usable]", style: {"line-style": "dashed", "line-color": "#c0392b",
                                            "target-arrow-color": "#c0392b", "width": 2.5}},
        {selector: ".on-path", style: {"line-color": "#f1c40f", "target-arrow-color": "#f1c40f", "width": 5,
                                       "background-color": "#f1c40f", "z-index": 10}},
        {selector: "node:selected", style: {"border-width": 3, "border-color": "#f39c12"}},
      ],
      layout: {name: "preset"},
    });
    // The first drawing of this graph is the one kept; a node dragged later is kept where it was put.
    cy.layout(Object.assign(layout, {stop: () => { if (!allKept) savePositions(); }})).run();
    cy.on("dragfree", "node", savePositions);
    window.gemCy = cy;  // for a look from the console (and the browser test)
    cy.on("tap", "node", (event) => {
      const node = nodesById[event.target.id()];
      showPage(node);
      if (event.originalEvent && event.originalEvent.shiftKey) {
        toSelect.value = String(node.id);
        findPath();
      } else {
        fromSelect.value = String(node.id);
      }
    });
    cy.on("mouseover", "edge", (event) => {
      const edge = event.target.data();
      const until = edge.until ? new Date(edge.until).toLocaleString([], {dateStyle: "medium", timeStyle: "short"}) : "";
      box.title = edge.usable ? `via ${edge.via}` : `unreachable until ${until || "re-checked"}: ${edge.reason}`;
    });
    cy.on("mouseout", "edge", () => { box.title = ""; });
  }

  function findPath() {
    const url = `${box.dataset.pathUrl}?source=${encodeURIComponent(fromSelect.value)}&target=${encodeURIComponent(toSelect.value)}`;
    fetch(url, {credentials: "same-origin"}).then((response) => response.json()).then((answer) => {
      pathList.replaceChildren();
      if (cy) cy.elements().removeClass("on-path");
      if (!answer.path) {
        pathList.appendChild(text("li", answer.reason || "no path", {class: "error"}));
        return;
      }
      if (!answer.path.length) pathList.appendChild(text("li", "Already there: the same page."));
      answer.steps.forEach((step) => pathList.appendChild(text("li", `${step.from} → ${step.to}: ${step.text}`)));
      if (cy) {
        answer.nodes.forEach((id) => cy.getElementById(String(id)).addClass("on-path"));
        answer.path.forEach((id) => cy.getElementById(`e${id}`).addClass("on-path"));
      }
    }).catch((error) => {
      pathList.replaceChildren(text("li", `The path finder failed: ${error}`, {class: "error"}));
    });
  }

  document.getElementById("gem-find").addEventListener("click", findPath);
  fetch(box.dataset.graphUrl, {credentials: "same-origin"})
    .then((response) => { if (!response.ok) throw new Error(`HTTP ${response.status}`); return response.json(); })
    .then(draw)
    .catch((error) => { note.textContent = `The graph could not be loaded: ${error}`; });
})();
