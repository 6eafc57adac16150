// Keyboard shortcuts for every page, through ONE document-level keydown listener.
//
// Simple keys live in the markup: data-shortcut="n" (a single key, case-insensitive, or a name
// such as Enter, Escape, ArrowLeft, ?; "Ctrl+" in front asks for Ctrl or Cmd) on
//   - a <form>: it is submitted with requestSubmit(), so its submit listeners and validation run;
//   - a button or link: it is clicked;
//   - an input, textarea or select (or any element with data-shortcut-action="focus"): it is focused.
// Hidden and disabled targets are skipped; the first usable one wins.
//
// Keys that need logic are registered by the page's script:
//   Shortcuts.on("ArrowLeft", (event, field) => { ... }, {allowInFields: false, ctrl: false});
// A handler that returns false declines the key (the browser's default then happens). Registered
// handlers are tried before the markup, in the order they were registered.
//
// While typing in a field keys are left alone, except Escape, which leaves the field, and handlers
// registered with allowInFields. Ctrl/Cmd/Alt combinations only reach bindings that ask for Ctrl.
// A focused live screen (canvas[data-screen], see screen.js) handles its own keys: they go to the phone.
(function () {
  "use strict";
  const FIELDS = "input, textarea, select, [contenteditable]";
  const ALIASES = {esc: "escape", space: " ", left: "arrowleft", right: "arrowright", up: "arrowup", down: "arrowdown"};
  const handlers = [];

  // "Ctrl+Z" -> {key: "z", ctrl: true}; key names compare in lower case, so "N" and "n" are one key.
  function parse(spec) {
    let key = String(spec);
    let ctrl = false;
    const match = /^(ctrl|control|cmd|meta)\+(.+)$/i.exec(key);
    if (match) { ctrl = true; key = match[2]; }
    key = key.toLowerCase();
    return {key: ALIASES[key] || key, ctrl};
  }

  function on(spec, handler, options) {
    const parsed = parse(spec);
    const entry = {key: parsed.key, ctrl: Boolean(parsed.ctrl || (options && options.ctrl)),
                   allowInFields: Boolean(options && options.allowInFields), handler};
    handlers.push(entry);
    return () => { const i = handlers.indexOf(entry); if (i >= 0) handlers.splice(i, 1); };
  }

  function modifiersMatch(event, wantsCtrl) {
    if (event.altKey) return false;
    return wantsCtrl ? (event.ctrlKey || event.metaKey) : !(event.ctrlKey || event.metaKey);
  }

  function usable(el) {
    if (el.disabled || el.closest("[hidden], fieldset[disabled]")) return false;
    if (el.getClientRects().length === 0) return false;  // display:none somewhere above
    if (el.tagName === "FORM") {
      // A form whose only submit buttons are disabled is not to be sent by a key either.
      const submits = Array.from(el.querySelectorAll("button:not([type=button]):not([type=reset]), input[type=submit]"));
      if (submits.length && submits.every((b) => b.disabled)) return false;
    }
    return true;
  }

  function activate(el) {
    const tag = el.tagName;
    if (el.dataset.shortcutAction === "focus" || ["INPUT", "TEXTAREA", "SELECT"].includes(tag)) el.focus();
    else if (tag === "FORM") el.requestSubmit();
    else el.click();
  }

  function markupTarget(key, ctrl) {
    for (const el of document.querySelectorAll("[data-shortcut]")) {
      const spec = parse(el.dataset.shortcut);
      if (spec.key === key && spec.ctrl === ctrl && usable(el)) return el;
    }
    return null;
  }

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.isComposing) return;
    const target = event.target instanceof Element ? event.target : null;
    if (target && target.closest("canvas[data-screen]")) return;
    const key = parse(event.key).key;
    const field = target ? target.closest(FIELDS) : null;
    const ctrl = event.ctrlKey || event.metaKey;

    for (const entry of handlers) {
      if (entry.key !== key || !modifiersMatch(event, entry.ctrl)) continue;
      if (field && !entry.allowInFields) continue;
      if (entry.handler(event, field) === false) continue;
      event.preventDefault();
      return;
    }
    if (field) {
      if (key === "escape") field.blur();
      return;
    }
    if (event.altKey || event.repeat) return;  // a held key clicks once
    const el = markupTarget(key, ctrl);
    if (!el) return;
    event.preventDefault();  // e.g. X focuses a field: the "x" must not be typed into it
    activate(el);
  });

  window.Shortcuts = {on};
})();
