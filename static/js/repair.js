// The human repair page: the person's correction of the wrong step, drawn on the frozen screenshot
// by the action editor of the session page (static/js/action_editor.js: the tap box; click to set
// the point, drag to move it, arrows to nudge; swipe and drag have two handles). The wrong action
// and the Teacher's attempt are drawn by the template beneath it. Ctrl+Enter sends {step, action,
// cot} to the server, which checks it (a bad action comes back as a 400 with the reason) and
// answers the next repair's URL. Keys go through shortcuts.js; the page lists them (?).
(function () {
  "use strict";
  const keys = window.Shortcuts;
  const help = document.getElementById("shortcuts");
  keys.on("?", () => { help.open = !help.open; });
  const dataNode = document.getElementById("repair-data");
  if (!dataNode) return;  // not the claim holder: the page is read-only

  const data = JSON.parse(dataNode.textContent);
  const svg = document.getElementById("overlay");
  const {POINTED} = window.ActionEditor;
  const $ = (id) => document.getElementById(id);
  const copy = (value) => JSON.parse(JSON.stringify(value));

  // A swipe given by its direction is drawn (and sent) by its two ends.
  function editable(a) {
    const out = copy(a);
    if (out.start && out.end) ["direction", "point", "distance"].forEach((k) => delete out[k]);
    delete out.note;
    return out;
  }
  const editor = window.ActionEditor.create({
    screen: data.screen, svg, layer: document.getElementById("edit-layer"),
    initial: {action: data.start.action ? editable(data.start.action) : null, cot: data.start.cot},
    keys: data.keys, reach: 0.3, nudgeEnds: true,
  });
  const say = editor.say;
  $("submit").addEventListener("click", () => submit());
  if ($("accept-teacher")) $("accept-teacher").addEventListener("click", acceptTeacher);

  // Click (or press and drag) on the screen: the point goes there; for a swipe or drag the press
  // is the start and the release the end.
  function setPoint(p) {
    const action = editor.action;
    if (POINTED.includes(action.action)) { action.point = editor.clamp(p); action.coords = "pixel"; return true; }
    return false;
  }
  svg.addEventListener("pointerdown", (event) => {
    event.preventDefault();
    const p = editor.toScreen(event);
    const action = editor.action;
    if (action.action === "swipe" || action.action === "drag") {
      delete action.direction; delete action.point; delete action.distance;
      action.start = p; action.end = p; action.coords = "pixel";
      editor.render();
      editor.follow((q) => { editor.action.end = q; });
    } else if (setPoint(p)) {
      editor.render();
      editor.follow((q) => { setPoint(q); });
    }
  });

  function acceptTeacher() {
    if (!data.teacher) { say("The Teacher made no attempt here.", true); return; }
    editor.action = editable(data.teacher.action);
    editor.cot = Object.assign({}, data.teacher.cot);
    editor.render();
    say("The Teacher's attempt is in the editor: check it, change what is wrong, Ctrl+Enter.");
  }

  // -- sending --------------------------------------------------------------------------------
  function submit() {
    return editor.send($("submit"), "Saving…", async () => {
      const response = await editor.post(data.urls.submit, {step: data.step, action: editor.action, cot: editor.cot, then: "next"});
      const answer = await response.json().catch(() => ({ok: false, error: `the server answered ${response.status}`}));
      if (!answer.ok) { say(answer.error || `the server answered ${response.status}`, true); return; }
      window.location.assign(answer.next);
    });
  }

  // -- keys (the type keys, arrows and Esc are the editor's) -----------------------------------
  keys.on("Enter", () => { submit(); }, {allowInFields: true, ctrl: true});
  keys.on("t", acceptTeacher);
  keys.on("f", () => {
    const label = Array.from(document.querySelectorAll("[data-field]")).find((l) => !l.hidden && l.dataset.field !== "point");
    if (!label) return false;
    label.querySelector("input, select").focus();
  });
  // R: the first required tag still empty (Observation, Plan, Decision), else the first tag.
  const REQUIRED = ["Observation", "Plan", "Decision"];
  keys.on("r", () => {
    const boxes = editor.tagBoxes;
    (boxes.find((b) => REQUIRED.includes(b.dataset.tag) && !b.value.trim()) || boxes[0]).focus();
  });

  say(data.teacher ? "T takes the Teacher's attempt; or set the action yourself. Ctrl+Enter submits."
                   : "Set the action on the screen and the reasoning; Ctrl+Enter submits.");
})();
