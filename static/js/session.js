// The semi-automatic session: draws the policy's proposal over the phone screen (tap box, swipe
// arrow, text), lets the annotator drag, retype, change the action or act by hand, and sends the
// verified action to the server, which runs it through the executor and its safety audit.
// Every action and control has a key (listed on the page). The lease is kept by a heartbeat.
// The editor itself (drawing, the form, the type keys, arrows and Esc) is action_editor.js.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("session-data").textContent);
  const [W, H] = data.screen;
  const svg = document.getElementById("overlay");
  const KEYS = {c: "click", d: "double_click", t: "type", b: "system_button", s: "swipe", g: "drag",
    l: "long_press", o: "open", v: "set_scroll_widget", n: "take_notes", w: "wait", e: "terminate",
    q: "clarify", u: "call_user"};
  const POINTS = ["point", "start", "end"];
  const $ = (id) => document.getElementById(id);
  window.sessionNavigating = false;

  function toPixels(p, coords) {
    if (!Array.isArray(p)) return null;
    if (coords === "fraction") return [Math.round(p[0] * W), Math.round(p[1] * H)];
    if (coords === "thousandths") return [Math.round(p[0] * W / 1000), Math.round(p[1] * H / 1000)];
    return [Math.round(p[0]), Math.round(p[1])];
  }

  function pixelCopy(action) {
    const copy = JSON.parse(JSON.stringify(action));
    POINTS.forEach((key) => { if (copy[key]) copy[key] = toPixels(copy[key], action.coords || "pixel"); });
    if (POINTS.some((key) => copy[key])) copy.coords = "pixel";
    return copy;
  }

  let byHand = false;
  const editor = window.ActionEditor.create({
    screen: data.screen, svg, initial: {action: data.proposal ? pixelCopy(data.proposal) : null, cot: data.cot},
    keys: KEYS, swipeByDirection: true, reach: 0.2, arrowHead: true, label: true,
    canDrag: () => !byHand, movedMessage: "Moved; Enter executes.", resetMessage: "Back to the proposal.",
  });
  const say = editor.say;
  $("confirm").addEventListener("click", () => confirm());
  $("undo").addEventListener("click", editor.undo);
  $("hand").addEventListener("click", toggleHand);

  // -- acting by hand on the screen -------------------------------------------------------------
  function toggleHand() {
    byHand = !byHand;
    $("hand-mode").hidden = !byHand;
    svg.classList.toggle("by-hand", byHand);
    say(byHand ? "By hand: tap or swipe on the screen; it runs at once." : "Back to verifying the proposal.");
  }
  svg.addEventListener("pointerdown", (event) => {
    if (!byHand) return;
    const start = editor.toScreen(event);
    svg.setPointerCapture(event.pointerId);
    const up = (e) => {
      svg.removeEventListener("pointerup", up);
      const end = editor.toScreen(e);
      const moved = Math.hypot(end[0] - start[0], end[1] - start[1]);
      editor.snapshot();
      editor.action = moved < 15 ? {action: "click", point: start, coords: "pixel"} : {action: "swipe", start, end, coords: "pixel"};
      editor.render();
      confirm(true);
    };
    svg.addEventListener("pointerup", up);
  });

  // -- an ending that is not a success is the annotator's to state --------------------------------
  // The same rule as the server's (flywheel/rules/stated_outcome.py, which refuses such an ending
  // unstated): terminate with failure, a call_user the task does not ask for, or success declared
  // where the task expects the user to take over.
  function endingNeedsStatement(action) {
    const expected = data.expected_handoff || "";
    if (action.action === "terminate") return action.status !== "success" || Boolean(expected);
    if (action.action === "call_user") return expected !== "call_user";
    return false;
  }
  function endingWords(action) {
    if (action.action === "call_user") return "call_user hands the task to the user, which this task does not ask for.";
    if (action.status === "success") return `terminate with success, where this task expects ${data.expected_handoff}.`;
    return "terminate with status failure.";
  }
  const dialog = $("ending-confirm");
  let answerEnding = null;  // resolves the open dialog's promise
  function syncReason() {
    const infeasible = $("ending-infeasible").checked;
    $("ending-reason").disabled = !infeasible;
    $("ending-reason-label").classList.toggle("hint", !infeasible);
  }
  function closeEnding(statement) {
    if (!answerEnding) return;
    const resolve = answerEnding;
    answerEnding = null;
    dialog.close();
    resolve(statement);
  }
  function stated() {
    const infeasible = $("ending-infeasible").checked;
    return {stated_outcome: infeasible ? "infeasible" : "failure",
            stated_reason: infeasible ? $("ending-reason").value.trim() : ""};
  }
  function askEnding(action) {
    $("ending-what").textContent = "You are executing " + endingWords(action);
    $("ending-failure").checked = true;
    $("ending-reason").value = "";
    syncReason();
    dialog.showModal();
    $("ending-failure").focus();
    return new Promise((resolve) => { answerEnding = resolve; });
  }
  ["ending-failure", "ending-infeasible"].forEach((id) => $(id).addEventListener("change", syncReason));
  $("ending-ok").addEventListener("click", () => closeEnding(stated()));
  $("ending-cancel").addEventListener("click", () => closeEnding(null));
  dialog.addEventListener("cancel", (event) => { event.preventDefault(); closeEnding(null); });
  // The dialog's own keys, before the page's (shortcuts.js skips a key whose default is prevented):
  // Enter confirms, Esc goes back to the action, F and I choose (not while typing the reason).
  // No other key reaches the page's shortcuts while the dialog is open.
  dialog.addEventListener("keydown", (event) => {
    event.stopPropagation();
    const typing = event.target === $("ending-reason");
    const key = event.key.toLowerCase();
    if (key === "enter" && event.target === $("ending-cancel")) return;  // the focused button's own click
    if (key === "enter") closeEnding(stated());
    else if (key === "escape") closeEnding(null);
    else if (!typing && (key === "f" || key === "i")) {
      $(key === "f" ? "ending-failure" : "ending-infeasible").checked = true;
      syncReason();
      if (key === "i") $("ending-reason").focus();
    } else return;
    event.preventDefault();
  });

  // -- talking to the server --------------------------------------------------------------------
  async function confirm(handMade) {
    if (answerEnding) return;  // the ending's confirmation is open: it answers first
    let statement = {};
    if (endingNeedsStatement(editor.action)) {
      statement = await askEnding(editor.action);
      if (!statement) { say("Not executed: change the action, or confirm how the task ended."); return; }
    }
    return editor.send($("confirm"), "Executing…", async () => {
      // A clarify is answered by the annotator, who plays the user; the session then goes on.
      const action = editor.action;
      const reply = action.action === "clarify" ? $("f-reply").value.trim() : "";
      const response = await editor.post(data.urls.execute, Object.assign(
        {step: data.step, action, cot: editor.cot, reply, by_hand: Boolean(handMade)}, statement));
      const answer = await response.json();
      if (!answer.ok) { say(answer.error, true); return; }
      if (!answer.finished) {
        say("Reading the phone and asking the policy…");
        await fetch(data.urls.prepare, {method: "POST", credentials: "same-origin",
          headers: {"X-CSRFToken": editor.csrf, "X-Requested-With": "fetch"}});
      }
      window.sessionNavigating = true;  // our own reload is not "leaving the page"
      window.location.reload();
    });
  }
  setInterval(async () => {
    try {
      const answer = await (await editor.post(data.urls.heartbeat)).json();
      $("lease-lost").hidden = answer.lease || answer.status !== "running";
    } catch (error) { /* the next beat retries */ }
  }, 10000);
  window.addEventListener("pagehide", () => {
    if (window.sessionNavigating) return;
    const form = new FormData();
    form.append("csrfmiddlewaretoken", editor.csrf);
    navigator.sendBeacon(data.urls.leave, form);
  });
  document.querySelectorAll("form").forEach((form) => form.addEventListener("submit", () => { window.sessionNavigating = true; }));

  // -- keys (through shortcuts.js; the page lists them); the type keys, arrows and Esc are the editor's
  const keys = window.Shortcuts;
  // Enter confirms; while typing it confirms only from the action's own inputs (f-*), so Enter in
  // the reasoning still makes a new line. Ctrl+Enter confirms from anywhere.
  keys.on("Enter", (event, field) => {
    if (field && !(field.tagName === "INPUT" && field.id.startsWith("f-"))) return false;
    if (!answerEnding) confirm();
  }, {allowInFields: true});
  keys.on("Enter", () => { confirm(); }, {allowInFields: true, ctrl: true});
  keys.on("z", editor.undo);
  keys.on("z", editor.undo, {ctrl: true});  // not in fields: there Ctrl+Z undoes the typing
  keys.on("h", toggleHand);
  keys.on("r", () => { (editor.tagBoxes.find((b) => b.dataset.tag === "Decision") || editor.tagBoxes[0]).focus(); });
  keys.on("?", () => { $("shortcuts").open = !$("shortcuts").open; });

  if (!data.proposal) say("No proposal: choose the action yourself.");
})();
