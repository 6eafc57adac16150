// The action editor shared by the semi-automatic session (session.js) and the human repair page
// (repair.js): one action drawn over a phone screen (the tap box; a swipe or drag by its two
// handles), the form beside it (type, point, text, button, ... and the reasoning's tags), the keys
// that edit it (the type keys, the arrows, Esc) and an undo history. What differs between the two
// pages comes in the options; each page keeps what only it does (sending, acting by hand, clicking
// the screen to place the point) and reads and writes the action through the editor.
//
//   const editor = ActionEditor.create({
//     screen: [W, H],            // the screen in pixels (the overlay's viewBox)
//     initial: {action, cot},    // what Esc goes back to; no action: a click in the middle
//     svg, layer,                // the overlay, and the element drawn into (default: the overlay)
//     keys: {c: "click", ...},   // a key for each action type it sets
//     swipeByDirection: false,   // a new swipe is {direction: "up", point} and Direction sets the
//                                // direction; else a swipe is its two ends and Direction is a helper
//                                // that places the end 40% of the screen away from the start
//     reach: 0.3,                // a new swipe by its ends or drag: the end this far (of H) above the start
//     nudgeEnds: false,          // the arrows move the end of an action that has ends and no point
//     arrowHead: false,          // an arrow head on a swipe's line
//     label: false,              // the action's name and text drawn by it
//     canDrag: () => true,       // whether a handle can be grabbed now
//     movedMessage: "",          // said when a handle is let go
//     resetMessage: "...",       // said when Esc brings back the initial action
//   });
//   editor.action, editor.cot    read, or write then editor.render()
//   editor.render() / draw() / say(text, isError) / snapshot() (before a change: Z undoes it) / undo()
//   editor.setType(name) / toScreen(pointerEvent) / follow(onMove) (until the pointer is let go)
//   editor.clamp(point) / centre() / post(url, body) (JSON, with the CSRF token)
//   editor.send(button, message, work): one send at a time (the reasoning read from its boxes first);
//     "The server did not answer" when work() throws
//   editor.tagBoxes, editor.csrf, editor.W, editor.H
// Keys go through shortcuts.js (loaded before this file).
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  // The fields each type shows (labels with data-field; a page may lack some, e.g. reply). A swipe
  // or drag given by its two ends also shows its point field ("start → end").
  const FIELDS = {
    click: ["point"], double_click: ["point"], type: ["text", "point"], system_button: ["button"],
    swipe: ["direction"], drag: [], long_press: ["point"], open: ["app"], set_scroll_widget: ["point", "value"],
    take_notes: ["text"], wait: ["seconds"], terminate: ["status", "answer"], clarify: ["question", "choices", "reply"],
    call_user: ["reason"],
  };
  const POINTED = ["click", "double_click", "long_press", "set_scroll_widget", "type"];
  const TEXTS = ["text", "app", "value", "answer", "question", "reason"];
  const DIRECTIONS = {up: [0, -1], down: [0, 1], left: [-1, 0], right: [1, 0]};
  const NUDGES = {ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1]};
  const ARROW_HEAD = '<marker id="arrow" viewBox="0 0 10 10" refX="5" refY="5" markerWidth="4" markerHeight="4" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#2457c5"/></marker>';

  function create(options) {
    const o = Object.assign({
      layer: options.svg, keys: {}, swipeByDirection: false, reach: 0.3, nudgeEnds: false, arrowHead: false,
      label: false, canDrag: () => true, movedMessage: "", resetMessage: "Back to how the page began.",
    }, options);
    const [W, H] = o.screen;
    const svg = o.svg;
    const layer = o.layer;
    const BOX = Math.round(Math.max(60, W * 0.09));
    const csrf = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"];
    const $ = (id) => document.getElementById(id);
    const tagBoxes = Array.from(document.querySelectorAll("textarea[data-tag]"));
    const statusLine = $("status-line");
    const copy = (value) => JSON.parse(JSON.stringify(value));
    const clamp = (p) => [Math.min(W - 1, Math.max(0, Math.round(p[0]))), Math.min(H - 1, Math.max(0, Math.round(p[1])))];
    const centre = () => [Math.round(W / 2), Math.round(H / 2)];

    const initial = {action: o.initial.action || {action: "click", point: centre(), coords: "pixel"},
                     cot: Object.assign({}, o.initial.cot || {})};
    let action = copy(initial.action);
    let cot = Object.assign({}, initial.cot);
    const undoStack = [];

    function say(text, isError) {
      statusLine.textContent = text;
      statusLine.classList.toggle("error", Boolean(isError));
    }
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
    function reset() {
      snapshot();
      action = copy(initial.action);
      cot = Object.assign({}, initial.cot);
      render();
      say(o.resetMessage);
    }

    // -- the action's geometry -----------------------------------------------------------------
    function swipeEnds() {
      if (action.start && action.end) return [action.start, action.end];
      const start = action.point || centre();
      const distance = action.distance || 0.4;
      const d = DIRECTIONS[action.direction || "up"];
      return [start, [Math.round(start[0] + d[0] * distance * W), Math.round(start[1] + d[1] * distance * H)]];
    }
    function setType(name) {
      if (name === action.action) return;
      snapshot();
      const at = action.point || action.start || centre();
      const next = {action: name};
      if (POINTED.includes(name)) { next.point = at; next.coords = "pixel"; }
      if (name === "swipe" && o.swipeByDirection) {
        next.direction = "up"; next.point = at; next.coords = "pixel";
      } else if (name === "swipe" || name === "drag") {
        next.start = at; next.end = clamp([at[0], at[1] - H * o.reach]); next.coords = "pixel";
      }
      if (name === "system_button") next.button = "back";
      if (name === "terminate") next.status = "success";
      if (name === "wait") next.seconds = 2;
      TEXTS.forEach((key) => { if (action[key] && (FIELDS[name] || []).includes(key)) next[key] = action[key]; });
      action = next;
      render();
    }

    // -- drawing --------------------------------------------------------------------------------
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
    function follow(onMove, onUp) {
      // Listen on the window: draw() rebuilds the layer, so the grabbed node itself goes away.
      const move = (e) => { onMove(toScreen(e)); render(); };
      const up = () => {
        window.removeEventListener("pointermove", move);
        window.removeEventListener("pointerup", up);
        if (onUp) onUp();
      };
      window.addEventListener("pointermove", move);
      window.addEventListener("pointerup", up);
    }
    function draggable(node, at, onMove) {
      node.addEventListener("pointerdown", (event) => {
        if (!o.canDrag()) return;
        event.preventDefault();
        event.stopPropagation();
        snapshot();
        const grab = toScreen(event);
        const offset = [at[0] - grab[0], at[1] - grab[1]];  // the box does not jump to the pointer
        follow((p) => onMove(clamp([p[0] + offset[0], p[1] + offset[1]])),
               o.movedMessage ? () => say(o.movedMessage) : null);
      });
    }
    function draw() {
      while (layer.firstChild) layer.removeChild(layer.firstChild);
      if (o.arrowHead) el("defs", {}).innerHTML = ARROW_HEAD;
      const name = action.action;
      if (name === "swipe" || name === "drag") {
        const [start, end] = swipeEnds();
        el("line", Object.assign({x1: start[0], y1: start[1], x2: end[0], y2: end[1], class: "arrow"},
                                 o.arrowHead ? {"marker-end": "url(#arrow)"} : {}));
        const a = el("circle", {cx: start[0], cy: start[1], r: BOX / 2, class: "handle", "data-testid": "swipe-start"});
        const b = el("circle", {cx: end[0], cy: end[1], r: BOX / 2, class: "handle", "data-testid": "swipe-end"});
        const ends = () => {
          const [s, e] = swipeEnds();
          action.start = s; action.end = e;
          delete action.direction; delete action.point; delete action.distance;
          action.coords = "pixel";
        };
        draggable(a, start, (p) => { ends(); action.start = p; });
        draggable(b, end, (p) => { ends(); action.end = p; });
      } else if (action.point) {
        const [x, y] = action.point;
        const box = el("rect", {x: x - BOX / 2, y: y - BOX / 2, width: BOX, height: BOX, rx: 10, class: "tapbox", "data-testid": "tap-box"});
        el("line", {x1: x - 12, y1: y, x2: x + 12, y2: y, class: "cross"});
        el("line", {x1: x, y1: y - 12, x2: x, y2: y + 12, class: "cross"});
        draggable(box, [x, y], (p) => { action.point = p; action.coords = "pixel"; });
      }
      if (o.label) {
        const label = name + (action.text ? `: "${action.text}"` : action.button ? `: ${action.button}` : action.app ? `: ${action.app}` :
          action.value ? `: ${action.value}` : action.status ? `: ${action.status}` : "");
        const anchor = action.point || action.start || [W * 0.05, H * 0.06];
        el("text", {x: Math.min(anchor[0], W * 0.55), y: Math.max(anchor[1] - BOX * 0.7, 40), class: "label"}).textContent = label;
      }
    }

    // -- the form -------------------------------------------------------------------------------
    const unfocused = (node) => document.activeElement !== node;
    function render() {
      $("action-type").value = action.action;
      const fields = FIELDS[action.action] || [];
      document.querySelectorAll("[data-field]").forEach((label) => { label.hidden = !fields.includes(label.dataset.field); });
      if (action.start && action.end) $("f-point").closest("label").hidden = false;
      $("f-point").value = action.point ? `${action.point[0]}, ${action.point[1]}` : (action.start ? `${action.start} → ${action.end}` : "");
      TEXTS.forEach((key) => { if (unfocused($("f-" + key))) $("f-" + key).value = action[key] || ""; });
      $("f-button").value = action.button || "back";
      $("f-direction").value = o.swipeByDirection ? action.direction || "up" : "";
      $("f-status").value = action.status || "success";
      $("f-seconds").value = action.seconds != null ? action.seconds : "";
      if (unfocused($("f-choices"))) $("f-choices").value = (action.choices || []).join(", ");
      tagBoxes.forEach((box) => { if (unfocused(box)) box.value = cot[box.dataset.tag] || ""; });
      draw();
    }
    function bindFields() {
      $("action-type").addEventListener("change", (e) => setType(e.target.value));
      TEXTS.forEach((key) => {
        const input = $("f-" + key);
        input.addEventListener("focus", snapshot);
        input.addEventListener("input", () => { if (input.value) action[key] = input.value; else delete action[key]; draw(); });
      });
      ["button", "status"].forEach((key) => {
        $("f-" + key).addEventListener("change", (e) => { snapshot(); action[key] = e.target.value; draw(); });
      });
      $("f-direction").addEventListener("change", (e) => {
        if (o.swipeByDirection) {
          snapshot(); action.direction = e.target.value; delete action.start; delete action.end; render();
          return;
        }
        // A helper: it places the end 40% of the screen away from the start.
        const d = DIRECTIONS[e.target.value];
        if (!d) return;
        snapshot();
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
      tagBoxes.forEach((box) => {
        box.addEventListener("focus", snapshot);
        box.addEventListener("input", () => { cot[box.dataset.tag] = box.value; });
      });
    }

    // -- talking to the server --------------------------------------------------------------------
    function post(url, body) {
      return fetch(url, {method: "POST", credentials: "same-origin",
        headers: {"Content-Type": "application/json", "X-CSRFToken": csrf}, body: JSON.stringify(body || {})});
    }
    let sending = false;
    async function send(button, message, work) {
      if (sending) return;
      sending = true;
      button.disabled = true;
      tagBoxes.forEach((box) => { cot[box.dataset.tag] = box.value; });
      say(message);
      try {
        await work();
      } catch (error) {
        say("The server did not answer: " + error, true);
      } finally {
        sending = false;
        button.disabled = false;
      }
    }

    // -- keys (through shortcuts.js; the page lists them) ---------------------------------------
    const keys = window.Shortcuts;
    Object.entries(o.keys).forEach(([key, name]) => keys.on(key, () => { setType(name); say(`Action: ${name}`); }));
    keys.on("Escape", reset);
    Object.entries(NUDGES).forEach(([key, nudge]) => keys.on(key, (event) => {
      const step = event.shiftKey ? 25 : 5;
      const moved = (p) => clamp([p[0] + nudge[0] * step, p[1] + nudge[1] * step]);
      if (action.point) {
        snapshot(); action.point = moved(action.point);
      } else if (o.nudgeEnds && action.start && action.end) {
        snapshot(); action.end = moved(action.end);
      } else {
        return false;  // nothing to move: let the page scroll
      }
      action.coords = "pixel";
      render();
    }));

    bindFields();
    render();
    return {
      get action() { return action; }, set action(value) { action = value; },
      get cot() { return cot; }, set cot(value) { cot = value; },
      W, H, csrf, tagBoxes, say, render, draw, snapshot, undo, reset, setType, toScreen, follow, clamp, centre,
      post, send,
    };
  }

  window.ActionEditor = {create, FIELDS, POINTED, TEXTS};
})();
