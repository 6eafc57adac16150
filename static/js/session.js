// The semi-automatic session: draws the policy's proposal over the phone screen (tap box, swipe
// arrow, text), lets the annotator drag, retype, change the action or act by hand, and sends the
// verified action to the server, which runs it through the executor and its safety audit.
// Every action and control has a key (listed on the page). The lease is kept by a heartbeat.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("session-data").textContent);
  const [W, H] = data.screen;
  const csrf = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"];
  const svg = document.getElementById("overlay");
  const NS = "http://www.w3.org/2000/svg";
  const BOX = Math.round(Math.max(60, W * 0.09));
  const FIELDS = {
    click: ["point"], double_click: ["point"], type: ["text", "point"], system_button: ["button"],
    swipe: ["direction"], drag: [], long_press: ["point"], open: ["app"], set_scroll_widget: ["point", "value"],
    take_notes: ["text"], wait: ["seconds"], terminate: ["status", "answer"], clarify: ["question", "choices", "reply"],
    call_user: ["reason"],
  };
  const KEYS = {c: "click", d: "double_click", t: "type", b: "system_button", s: "swipe", g: "drag",
    l: "long_press", o: "open", v: "set_scroll_widget", n: "take_notes", w: "wait", e: "terminate",
    q: "clarify", u: "call_user"};
  const POINTED = ["point", "start", "end"];
  const $ = (id) => document.getElementById(id);
  const tagBoxes = Array.from(document.querySelectorAll("textarea[data-tag]"));
  const statusLine = $("status-line");
  window.sessionNavigating = false;

  function toPixels(p, coords) {
    if (!Array.isArray(p)) return null;
    if (coords === "fraction") return [Math.round(p[0] * W), Math.round(p[1] * H)];
    if (coords === "thousandths") return [Math.round(p[0] * W / 1000), Math.round(p[1] * H / 1000)];
    return [Math.round(p[0]), Math.round(p[1])];
  }

  function pixelCopy(action) {
    const copy = JSON.parse(JSON.stringify(action));
    POINTED.forEach((key) => { if (copy[key]) copy[key] = toPixels(copy[key], action.coords || "pixel"); });
    if (POINTED.some((key) => copy[key])) copy.coords = "pixel";
    return copy;
  }

  const original = data.proposal ? pixelCopy(data.proposal) : {action: "click", point: [Math.round(W / 2), Math.round(H / 2)], coords: "pixel"};
  const originalCot = Object.assign({}, data.cot || {});
  let action = JSON.parse(JSON.stringify(original));
  let cot = Object.assign({}, originalCot);
  let byHand = false;
  const undoStack = [];

  function snapshot() {
    undoStack.push(JSON.stringify({action, cot}));
    if (undoStack.length > 200) undoStack.shift();
  }
  function undo() {
    const last = undoStack.pop();
    if (!last) { say("Nothing to undo."); return; }
    ({action, cot} = JSON.parse(last));
    render();
    say("Undone.");
  }
  function say(text, isError) {
    statusLine.textContent = text;
    statusLine.classList.toggle("error", Boolean(isError));
  }

  // -- the action's geometry -------------------------------------------------------------------
  function centre() { return [Math.round(W / 2), Math.round(H / 2)]; }
  function swipeEnds() {
    if (action.start && action.end) return [action.start, action.end];
    const start = action.point || centre();
    const distance = action.distance || 0.4;
    const d = {up: [0, -1], down: [0, 1], left: [-1, 0], right: [1, 0]}[action.direction || "up"];
    return [start, [Math.round(start[0] + d[0] * distance * W), Math.round(start[1] + d[1] * distance * H)]];
  }
  function setType(name) {
    if (name === action.action) return;
    snapshot();
    const anchor = action.point || action.start || centre();
    const next = {action: name};
    if (["click", "double_click", "long_press", "set_scroll_widget", "type"].includes(name)) { next.point = anchor; next.coords = "pixel"; }
    if (name === "swipe") { next.direction = "up"; next.point = anchor; next.coords = "pixel"; }
    if (name === "drag") { next.start = anchor; next.end = [anchor[0], Math.max(0, anchor[1] - Math.round(H * 0.2))]; next.coords = "pixel"; }
    if (name === "system_button") next.button = "back";
    if (name === "terminate") next.status = "success";
    if (name === "wait") next.seconds = 2;
    ["text", "app", "value", "question", "reason", "answer"].forEach((key) => {
      if (action[key] && (FIELDS[name] || []).includes(key)) next[key] = action[key];
    });
    action = next;
    render();
  }

  // -- drawing --------------------------------------------------------------------------------
  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    Object.entries(attrs).forEach(([k, v]) => node.setAttribute(k, v));
    (parent || svg).appendChild(node);
    return node;
  }
  function toScreen(event) {
    const box = svg.getBoundingClientRect();
    return [Math.round(Math.min(W - 1, Math.max(0, (event.clientX - box.left) * W / box.width))),
            Math.round(Math.min(H - 1, Math.max(0, (event.clientY - box.top) * H / box.height)))];
  }
  function draggable(node, anchor, onMove) {
    // Listen on the window: draw() rebuilds the overlay, so the grabbed node itself goes away.
    node.addEventListener("pointerdown", (event) => {
      if (byHand) return;
      event.preventDefault();
      event.stopPropagation();
      snapshot();
      const grab = toScreen(event);
      const offset = [anchor[0] - grab[0], anchor[1] - grab[1]];  // the box does not jump to the pointer
      const move = (e) => {
        const p = toScreen(e);
        onMove([Math.min(W - 1, Math.max(0, p[0] + offset[0])), Math.min(H - 1, Math.max(0, p[1] + offset[1]))]);
        render();
      };
      const up = () => {
        window.removeEventListener("pointermove", move);
        window.removeEventListener("pointerup", up);
        say("Moved; Enter executes.");
      };
      window.addEventListener("pointermove", move);
      window.addEventListener("pointerup", up);
    });
  }
  function draw() {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    el("defs", {}).innerHTML = '<marker id="arrow" viewBox="0 0 10 10" refX="5" refY="5" markerWidth="4" markerHeight="4" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#2457c5"/></marker>';
    const name = action.action;
    if (["swipe", "drag"].includes(name)) {
      const [start, end] = swipeEnds();
      el("line", {x1: start[0], y1: start[1], x2: end[0], y2: end[1], class: "arrow", "marker-end": "url(#arrow)"});
      const a = el("circle", {cx: start[0], cy: start[1], r: BOX / 2, class: "handle", "data-testid": "swipe-start"});
      const b = el("circle", {cx: end[0], cy: end[1], r: BOX / 2, class: "handle", "data-testid": "swipe-end"});
      const fix = () => { const [s, e] = swipeEnds(); action.start = s; action.end = e; delete action.direction; delete action.point; delete action.distance; action.coords = "pixel"; };
      draggable(a, start, (p) => { fix(); action.start = p; });
      draggable(b, end, (p) => { fix(); action.end = p; });
    } else if (action.point) {
      const [x, y] = action.point;
      const box = el("rect", {x: x - BOX / 2, y: y - BOX / 2, width: BOX, height: BOX, rx: 10, class: "tapbox", "data-testid": "tap-box"});
      el("line", {x1: x - 12, y1: y, x2: x + 12, y2: y, class: "cross"});
      el("line", {x1: x, y1: y - 12, x2: x, y2: y + 12, class: "cross"});
      draggable(box, [x, y], (p) => { action.point = p; action.coords = "pixel"; });
    }
    const label = name + (action.text ? `: "${action.text}"` : action.button ? `: ${action.button}` : action.app ? `: ${action.app}` :
      action.value ? `: ${action.value}` : action.status ? `: ${action.status}` : "");
    const anchor = action.point || (action.start) || [W * 0.05, H * 0.06];
    const text = el("text", {x: Math.min(anchor[0], W * 0.55), y: Math.max(anchor[1] - BOX * 0.7, 40), class: "label"});
    text.textContent = label;
  }

  // -- the form ---------------------------------------------------------------------------------
  function render() {
    $("action-type").value = action.action;
    const fields = FIELDS[action.action] || [];
    document.querySelectorAll("[data-field]").forEach((label) => { label.hidden = !fields.includes(label.dataset.field); });
    const p = action.point || (action.start && action.end ? null : null);
    $("f-point").value = p ? `${p[0]}, ${p[1]}` : (action.start ? `${action.start} → ${action.end}` : "");
    if (action.start && action.end) $("f-point").closest("label").hidden = false;
    ["text", "app", "value", "answer", "question", "reason"].forEach((key) => { $("f-" + key).value = action[key] || ""; });
    $("f-button").value = action.button || "back";
    $("f-direction").value = action.direction || "up";
    $("f-status").value = action.status || "success";
    $("f-seconds").value = action.seconds != null ? action.seconds : "";
    $("f-choices").value = (action.choices || []).join(", ");
    tagBoxes.forEach((box) => { if (document.activeElement !== box) box.value = cot[box.dataset.tag] || ""; });
    draw();
  }

  function bindFields() {
    $("action-type").addEventListener("change", (e) => setType(e.target.value));
    const simple = {text: "text", app: "app", value: "value", answer: "answer", question: "question", reason: "reason"};
    Object.entries(simple).forEach(([id, key]) => {
      const input = $("f-" + id);
      input.addEventListener("focus", snapshot);
      input.addEventListener("input", () => { if (input.value) action[key] = input.value; else delete action[key]; draw(); });
    });
    [["f-button", "button"], ["f-status", "status"]].forEach(([id, key]) => {
      $(id).addEventListener("change", (e) => { snapshot(); action[key] = e.target.value; draw(); });
    });
    $("f-direction").addEventListener("change", (e) => {
      snapshot(); action.direction = e.target.value; delete action.start; delete action.end; render();
    });
    $("f-seconds").addEventListener("input", (e) => { action.seconds = Number(e.target.value || 0); });
    $("f-choices").addEventListener("input", (e) => {
      const list = e.target.value.split(",").map((s) => s.trim()).filter(Boolean);
      if (list.length) action.choices = list; else delete action.choices;
    });
    tagBoxes.forEach((box) => {
      box.addEventListener("focus", snapshot);
      box.addEventListener("input", () => { cot[box.dataset.tag] = box.value; });
    });
    $("confirm").addEventListener("click", () => confirm());
    $("undo").addEventListener("click", undo);
    $("hand").addEventListener("click", toggleHand);
  }

  // -- acting by hand on the screen -------------------------------------------------------------
  function toggleHand() {
    byHand = !byHand;
    $("hand-mode").hidden = !byHand;
    svg.classList.toggle("by-hand", byHand);
    say(byHand ? "By hand: tap or swipe on the screen; it runs at once." : "Back to verifying the proposal.");
  }
  svg.addEventListener("pointerdown", (event) => {
    if (!byHand) return;
    const start = toScreen(event);
    svg.setPointerCapture(event.pointerId);
    const up = (e) => {
      svg.removeEventListener("pointerup", up);
      const end = toScreen(e);
      const moved = Math.hypot(end[0] - start[0], end[1] - start[1]);
      snapshot();
      action = moved < 15 ? {action: "click", point: start, coords: "pixel"} : {action: "swipe", start, end, coords: "pixel"};
      render();
      confirm(true);
    };
    svg.addEventListener("pointerup", up);
  });

  // -- talking to the server --------------------------------------------------------------------
  function post(url, body) {
    return fetch(url, {method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRFToken": csrf}, body: JSON.stringify(body || {})});
  }
  let sending = false;
  async function confirm(handMade) {
    if (sending) return;
    sending = true;
    $("confirm").disabled = true;
    say("Executing…");
    tagBoxes.forEach((box) => { cot[box.dataset.tag] = box.value; });
    try {
      // A clarify is answered by the annotator, who plays the user; the session then goes on.
      const reply = action.action === "clarify" ? $("f-reply").value.trim() : "";
      const response = await post(data.urls.execute, {step: data.step, action, cot, reply, by_hand: Boolean(handMade)});
      const answer = await response.json();
      if (!answer.ok) { say(answer.error, true); return; }
      if (!answer.finished) {
        say("Reading the phone and asking the policy…");
        await fetch(data.urls.prepare, {method: "POST", credentials: "same-origin",
          headers: {"X-CSRFToken": csrf, "X-Requested-With": "fetch"}});
      }
      window.sessionNavigating = true;  // our own reload is not "leaving the page"
      window.location.reload();
    } catch (error) {
      say("The server did not answer: " + error, true);
    } finally {
      sending = false;
      $("confirm").disabled = false;
    }
  }
  setInterval(async () => {
    try {
      const answer = await (await post(data.urls.heartbeat)).json();
      $("lease-lost").hidden = answer.lease || answer.status !== "running";
    } catch (error) { /* the next beat retries */ }
  }, 10000);
  window.addEventListener("pagehide", () => {
    if (window.sessionNavigating) return;
    const form = new FormData();
    form.append("csrfmiddlewaretoken", csrf);
    navigator.sendBeacon(data.urls.leave, form);
  });
  document.querySelectorAll("form").forEach((form) => form.addEventListener("submit", () => { window.sessionNavigating = true; }));

  // -- keys (through shortcuts.js; the page lists them) --------------------------------------------
  const keys = window.Shortcuts;
  // Enter confirms; while typing it confirms only from the action's own inputs (f-*), so Enter in
  // the reasoning still makes a new line. Ctrl+Enter confirms from anywhere.
  keys.on("Enter", (event, field) => {
    if (field && !(field.tagName === "INPUT" && field.id.startsWith("f-"))) return false;
    confirm();
  }, {allowInFields: true});
  keys.on("Enter", () => { confirm(); }, {allowInFields: true, ctrl: true});
  keys.on("z", undo);
  keys.on("z", undo, {ctrl: true});  // not in fields: there Ctrl+Z undoes the typing
  keys.on("Escape", () => {
    snapshot(); action = JSON.parse(JSON.stringify(original)); cot = Object.assign({}, originalCot);
    render(); say("Back to the proposal.");
  });
  keys.on("h", toggleHand);
  keys.on("r", () => { (tagBoxes.find((b) => b.dataset.tag === "Decision") || tagBoxes[0]).focus(); });
  keys.on("?", () => { $("shortcuts").open = !$("shortcuts").open; });
  Object.entries(KEYS).forEach(([key, name]) => keys.on(key, () => { setType(name); say(`Action: ${name}`); }));
  const NUDGES = {ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1]};
  Object.entries(NUDGES).forEach(([key, nudge]) => keys.on(key, (event) => {
    if (!action.point) return false;  // nothing to move: let the page scroll
    snapshot();
    const step = event.shiftKey ? 25 : 5;
    action.point = [Math.min(W - 1, Math.max(0, action.point[0] + nudge[0] * step)), Math.min(H - 1, Math.max(0, action.point[1] + nudge[1] * step))];
    action.coords = "pixel";
    render();
  }));

  bindFields();
  render();
  if (!data.proposal) say("No proposal: choose the action yourself.");
})();
