// The human repair page: the person's correction of the wrong step, drawn on the frozen screenshot
// (the tap box of the session page, static/js/session.js: click to set the point, drag to move it,
// arrows to nudge; swipe and drag have two handles). The wrong action and the Teacher's attempt are
// drawn by the template beneath it. Ctrl+Enter sends {step, action, cot} to the server, which
// checks it (a bad action comes back as a 400 with the reason) and answers the next repair's URL.
// Keys go through shortcuts.js; the page lists them (?).
(function () {
  "use strict";
  const keys = window.Shortcuts;
  const help = document.getElementById("shortcuts");
  keys.on("?", () => { help.open = !help.open; });
  const dataNode = document.getElementById("repair-data");
  if (!dataNode) return;  // not the claim holder: the page is read-only

  const data = JSON.parse(dataNode.textContent);
  const [W, H] = data.screen;
  const csrf = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"];
  const svg = document.getElementById("overlay");
  const layer = document.getElementById("edit-layer");
  const NS = "http://www.w3.org/2000/svg";
  const BOX = Math.round(Math.max(60, W * 0.09));
  const FIELDS = {
    click: ["point"], double_click: ["point"], type: ["text", "point"], system_button: ["button"],
    swipe: ["direction", "point"], drag: ["point"], long_press: ["point"], open: ["app"],
    set_scroll_widget: ["point", "value"], take_notes: ["text"], wait: ["seconds"],
    terminate: ["status", "answer"], clarify: ["question", "choices"], call_user: ["reason"],
  };
  const POINTED = ["click", "double_click", "long_press", "set_scroll_widget", "type"];
  const TEXTS = ["text", "app", "value", "answer", "question", "reason"];
  const $ = (id) => document.getElementById(id);
  const tagBoxes = Array.from(document.querySelectorAll("textarea[data-tag]"));
  const statusLine = $("status-line");
  const copy = (value) => JSON.parse(JSON.stringify(value));
  const clamp = (p) => [Math.min(W - 1, Math.max(0, Math.round(p[0]))), Math.min(H - 1, Math.max(0, Math.round(p[1])))];
  const centre = () => [Math.round(W / 2), Math.round(H / 2)];

  // A swipe given by its direction is drawn (and sent) by its two ends.
  function editable(a) {
    const out = copy(a);
    if (out.start && out.end) ["direction", "point", "distance"].forEach((k) => delete out[k]);
    delete out.note;
    return out;
  }
  const initial = {action: data.start.action ? editable(data.start.action) : {action: "click", point: centre(), coords: "pixel"},
                   cot: Object.assign({}, data.start.cot || {})};
  let action = copy(initial.action);
  let cot = Object.assign({}, initial.cot);

  function say(text, isError) {
    statusLine.textContent = text;
    statusLine.classList.toggle("error", Boolean(isError));
  }

  // -- the action -----------------------------------------------------------------------------
  function anchor() { return action.point || action.start || centre(); }
  function setType(name) {
    if (name === action.action) return;
    const at = anchor();
    const next = {action: name};
    if (POINTED.includes(name)) { next.point = at; next.coords = "pixel"; }
    if (name === "swipe" || name === "drag") {
      next.start = at; next.end = clamp([at[0], at[1] - H * 0.3]); next.coords = "pixel";
    }
    if (name === "system_button") next.button = "back";
    if (name === "terminate") next.status = "success";
    if (name === "wait") next.seconds = 2;
    TEXTS.forEach((key) => { if (action[key] && FIELDS[name].includes(key)) next[key] = action[key]; });
    action = next;
    render();
  }
  function setPoint(p) {
    if (POINTED.includes(action.action)) { action.point = clamp(p); action.coords = "pixel"; return true; }
    return false;
  }

  // -- drawing: the person's action, over the wrong one and the Teacher's ----------------------
  function el(name, attrs) {
    const node = document.createElementNS(NS, name);
    Object.entries(attrs).forEach(([k, v]) => node.setAttribute(k, v));
    layer.appendChild(node);
    return node;
  }
  function toScreen(event) {
    const box = svg.getBoundingClientRect();
    return clamp([(event.clientX - box.left) * W / box.width, (event.clientY - box.top) * H / box.height]);
  }
  function follow(grab, onMove) {
    // Listen on the window: draw() rebuilds the layer, so the grabbed node goes away.
    const move = (e) => { onMove(toScreen(e)); render(); };
    const up = () => { window.removeEventListener("pointermove", move); window.removeEventListener("pointerup", up); };
    window.addEventListener("pointermove", move);
    window.addEventListener("pointerup", up);
  }
  function draggable(node, at, onMove) {
    node.addEventListener("pointerdown", (event) => {
      event.preventDefault();
      event.stopPropagation();
      const grab = toScreen(event);
      const offset = [at[0] - grab[0], at[1] - grab[1]];  // the box does not jump to the pointer
      follow(grab, (p) => onMove(clamp([p[0] + offset[0], p[1] + offset[1]])));
    });
  }
  function draw() {
    while (layer.firstChild) layer.removeChild(layer.firstChild);
    if (action.start && action.end) {
      el("line", {x1: action.start[0], y1: action.start[1], x2: action.end[0], y2: action.end[1], class: "arrow"});
      const a = el("circle", {cx: action.start[0], cy: action.start[1], r: BOX / 2, class: "handle", "data-testid": "swipe-start"});
      const b = el("circle", {cx: action.end[0], cy: action.end[1], r: BOX / 2, class: "handle", "data-testid": "swipe-end"});
      const ends = () => { delete action.direction; delete action.point; delete action.distance; action.coords = "pixel"; };
      draggable(a, action.start, (p) => { ends(); action.start = p; });
      draggable(b, action.end, (p) => { ends(); action.end = p; });
    } else if (action.point) {
      const [x, y] = action.point;
      const box = el("rect", {x: x - BOX / 2, y: y - BOX / 2, width: BOX, height: BOX, rx: 10, class: "tapbox", "data-testid": "tap-box"});
      el("line", {x1: x - 12, y1: y, x2: x + 12, y2: y, class: "cross"});
      el("line", {x1: x, y1: y - 12, x2: x, y2: y + 12, class: "cross"});
      draggable(box, [x, y], (p) => { action.point = p; action.coords = "pixel"; });
    }
  }
  // Click (or press and drag) on the screen: the point goes there; for a swipe or drag the press
  // is the start and the release the end.
  svg.addEventListener("pointerdown", (event) => {
    event.preventDefault();
    const p = toScreen(event);
    if (action.action === "swipe" || action.action === "drag") {
      delete action.direction; delete action.point; delete action.distance;
      action.start = p; action.end = p; action.coords = "pixel";
      render();
      follow(p, (q) => { action.end = q; });
    } else if (setPoint(p)) {
      render();
      follow(p, (q) => { setPoint(q); });
    }
  });

  // -- the form -------------------------------------------------------------------------------
  function render() {
    $("action-type").value = action.action;
    const fields = FIELDS[action.action] || [];
    document.querySelectorAll("[data-field]").forEach((label) => { label.hidden = !fields.includes(label.dataset.field); });
    $("f-point").value = action.start && action.end ? `${action.start} → ${action.end}` : (action.point ? `${action.point[0]}, ${action.point[1]}` : "");
    TEXTS.forEach((key) => { if (document.activeElement !== $("f-" + key)) $("f-" + key).value = action[key] || ""; });
    $("f-button").value = action.button || "back";
    $("f-direction").value = "";
    $("f-status").value = action.status || "success";
    $("f-seconds").value = action.seconds != null ? action.seconds : "";
    if (document.activeElement !== $("f-choices")) $("f-choices").value = (action.choices || []).join(", ");
    tagBoxes.forEach((box) => { if (document.activeElement !== box) box.value = cot[box.dataset.tag] || ""; });
    draw();
  }
  function bindFields() {
    $("action-type").addEventListener("change", (e) => setType(e.target.value));
    TEXTS.forEach((key) => $("f-" + key).addEventListener("input", (e) => {
      if (e.target.value) action[key] = e.target.value; else delete action[key];
    }));
    $("f-button").addEventListener("change", (e) => { action.button = e.target.value; });
    $("f-status").addEventListener("change", (e) => { action.status = e.target.value; });
    // A direction is a helper: it places the end 40% of the screen away from the start.
    $("f-direction").addEventListener("change", (e) => {
      const d = {up: [0, -1], down: [0, 1], left: [-1, 0], right: [1, 0]}[e.target.value];
      if (!d) return;
      const start = action.start || action.point || centre();
      action.start = start; action.end = clamp([start[0] + d[0] * 0.4 * W, start[1] + d[1] * 0.4 * H]);
      delete action.point; delete action.direction; delete action.distance; action.coords = "pixel";
      render();
    });
    $("f-seconds").addEventListener("input", (e) => { action.seconds = Number(e.target.value || 0); });
    $("f-choices").addEventListener("input", (e) => {
      const list = e.target.value.split(",").map((s) => s.trim()).filter(Boolean);
      if (list.length) action.choices = list; else delete action.choices;
    });
    tagBoxes.forEach((box) => box.addEventListener("input", () => { cot[box.dataset.tag] = box.value; }));
    $("submit").addEventListener("click", () => submit());
    if ($("accept-teacher")) $("accept-teacher").addEventListener("click", acceptTeacher);
  }

  function acceptTeacher() {
    if (!data.teacher) { say("The Teacher made no attempt here.", true); return; }
    action = editable(data.teacher.action);
    cot = Object.assign({}, data.teacher.cot);
    render();
    say("The Teacher's attempt is in the editor: check it, change what is wrong, Ctrl+Enter.");
  }

  // -- sending --------------------------------------------------------------------------------
  let sending = false;
  async function submit() {
    if (sending) return;
    sending = true;
    $("submit").disabled = true;
    tagBoxes.forEach((box) => { cot[box.dataset.tag] = box.value; });
    say("Saving…");
    try {
      const response = await fetch(data.urls.submit, {
        method: "POST", credentials: "same-origin",
        headers: {"Content-Type": "application/json", "X-CSRFToken": csrf},
        body: JSON.stringify({step: data.step, action, cot, then: "next"}),
      });
      const answer = await response.json().catch(() => ({ok: false, error: `the server answered ${response.status}`}));
      if (!answer.ok) { say(answer.error || `the server answered ${response.status}`, true); return; }
      window.location.assign(answer.next);
    } catch (error) {
      say("The server did not answer: " + error, true);
    } finally {
      sending = false;
      $("submit").disabled = false;
    }
  }

  // -- keys -----------------------------------------------------------------------------------
  keys.on("Enter", () => { submit(); }, {allowInFields: true, ctrl: true});
  keys.on("t", acceptTeacher);
  Object.entries(data.keys).forEach(([key, name]) => keys.on(key, () => { setType(name); say(`Action: ${name}`); }));
  keys.on("f", () => {
    const label = Array.from(document.querySelectorAll("[data-field]")).find((l) => !l.hidden && l.dataset.field !== "point");
    if (!label) return false;
    label.querySelector("input, select").focus();
  });
  // R: the first required tag still empty (Observation, Plan, Decision), else the first tag.
  const REQUIRED = ["Observation", "Plan", "Decision"];
  keys.on("r", () => {
    (tagBoxes.find((b) => REQUIRED.includes(b.dataset.tag) && !b.value.trim()) || tagBoxes[0]).focus();
  });
  keys.on("Escape", () => {
    action = copy(initial.action); cot = Object.assign({}, initial.cot);
    render(); say("Back to how the page began.");
  });
  const NUDGES = {ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1]};
  Object.entries(NUDGES).forEach(([key, nudge]) => keys.on(key, (event) => {
    const step = event.shiftKey ? 25 : 5;
    if (action.point && !(action.start && action.end)) {
      action.point = clamp([action.point[0] + nudge[0] * step, action.point[1] + nudge[1] * step]);
    } else if (action.start && action.end) {
      action.end = clamp([action.end[0] + nudge[0] * step, action.end[1] + nudge[1] * step]);
    } else {
      return false;  // nothing to move: let the page scroll
    }
    action.coords = "pixel";
    render();
  }));

  bindFields();
  render();
  say(data.teacher ? "T takes the Teacher's attempt; or set the action yourself. Ctrl+Enter submits."
                   : "Set the action on the screen and the reasoning; Ctrl+Enter submits.");
})();
