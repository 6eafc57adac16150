// The function-tree pruning page: select a node (click, j/k or arrows), then approve, rename,
// merge, delete, restore, or move it (drag and drop onto another node, or x to cut and p to paste
// under the selected node). Every change is a POST that answers the whole tree, swapped in by htmx;
// the selection survives the swap. The server checks role, app and the tree's rules (no cycles).
(function () {
  "use strict";
  const tree = document.querySelector("[data-tree]");
  if (!tree || !window.Shortcuts) return;
  const mode = document.getElementById("tree-mode");
  const selectedText = document.getElementById("tree-selected");
  const shot = document.getElementById("tree-shot");
  const help = document.getElementById("tree-help");
  let selectedId = null, cutId = null, mergeId = null;

  const nodes = () => Array.from(tree.querySelectorAll("li.tree-node"));
  const byId = (id) => tree.querySelector(`li.tree-node[data-node-id="${CSS.escape(String(id))}"]`);
  const selected = () => (selectedId ? byId(selectedId) : null);
  const say = (text) => { mode.textContent = text; };

  function showShot(li) {
    const url = li && li.dataset.shot;
    shot.hidden = !url;
    if (url) shot.querySelector("img").src = url;
  }

  function select(li) {
    nodes().forEach((n) => n.classList.remove("selected"));
    if (!li) { selectedId = null; selectedText.textContent = "Nothing selected."; showShot(null); return; }
    selectedId = li.dataset.nodeId;
    li.classList.add("selected");
    li.focus({preventScroll: true});
    li.scrollIntoView({block: "nearest"});
    selectedText.textContent = `${li.dataset.label} — ${li.dataset.path} (${li.dataset.status})`;
    showShot(li);
  }

  function move(step) {
    const list = nodes();
    if (!list.length) return;
    const at = list.indexOf(selected());
    select(list[Math.min(list.length - 1, Math.max(0, at < 0 ? 0 : at + step))]);
  }

  function post(nodeId, action, values) {
    const url = tree.dataset.actionUrl.replace("/nodes/0/ACTION/", `/nodes/${nodeId}/${action}/`);
    return window.htmx.ajax("POST", url, {target: "#tree", swap: "innerHTML", values: values || {},
                                          headers: {"X-CSRFToken": tree.dataset.csrf}});
  }

  function need() {
    const li = selected();
    if (!li) say("Select a node first (click it, or press j).");
    return li;
  }

  function rename() {
    const li = need();
    if (!li) return;
    const label = li.querySelector(":scope > .node-row > .node-label");
    const input = document.createElement("input");
    input.value = li.dataset.label;
    input.setAttribute("aria-label", "New name");
    input.dataset.testid = "rename-input";
    label.replaceWith(input);
    input.focus();
    input.select();
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") { event.preventDefault(); event.stopPropagation(); post(li.dataset.nodeId, "rename", {label: input.value}); }
      if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); input.replaceWith(label); li.focus(); }
    });
  }

  function cancel() {
    if (cutId) byId(cutId)?.classList.remove("cut");
    cutId = mergeId = null;
    say("");
  }

  const actions = {
    approve: () => { const li = need(); if (li) post(li.dataset.nodeId, "approve"); },
    "approve-subtree": () => { const li = need(); if (li) post(li.dataset.nodeId, "approve-subtree"); },
    rename,
    merge: () => {
      const li = need();
      if (!li) return;
      mergeId = li.dataset.nodeId;
      say(`Merge “${li.dataset.label}” into…: pick the node and press Enter (or click it); Esc cancels.`);
    },
    delete: () => { const li = need(); if (li) post(li.dataset.nodeId, "delete"); },
    restore: () => { const li = need(); if (li) post(li.dataset.nodeId, "restore"); },
    cut: () => {
      const li = need();
      if (!li) return;
      cancel();
      cutId = li.dataset.nodeId;
      li.classList.add("cut");
      say(`Cut “${li.dataset.label}”: select its new parent and press p (P: top level); Esc cancels.`);
    },
    paste: (topLevel) => {
      if (!cutId) { say("Cut a node first (x)."); return; }
      const parent = topLevel ? "" : (selected() ? selected().dataset.nodeId : "");
      const moving = cutId;
      cancel();
      post(moving, "reparent", {parent});
    },
  };

  function confirmMerge(target) {
    const source = mergeId;
    mergeId = null;
    say("");
    post(source, "merge", {into: target.dataset.nodeId});
  }

  // Mouse: select, or pick the merge target; the buttons do what their keys do.
  tree.addEventListener("click", (event) => {
    const li = event.target.closest("li.tree-node");
    if (!li || event.target.closest("input")) return;
    if (mergeId && li.dataset.nodeId !== mergeId) { confirmMerge(li); return; }
    select(li);
  });
  tree.addEventListener("mouseover", (event) => { const li = event.target.closest("li.tree-node"); if (li) showShot(li); });
  tree.addEventListener("mouseleave", () => showShot(selected()));
  document.querySelectorAll("[data-tree-do]").forEach((button) => {
    button.addEventListener("click", () => actions[button.dataset.treeDo]());
  });

  // Drag and drop: drop a node on another to move it under it, on the app's row for the top level.
  tree.addEventListener("dragstart", (event) => {
    const li = event.target.closest("li.tree-node");
    if (!li) return;
    event.dataTransfer.setData("text/plain", li.dataset.nodeId);
    event.dataTransfer.effectAllowed = "move";
  });
  const dropTarget = (event) => event.target.closest("li.tree-node, li.tree-root");
  tree.addEventListener("dragover", (event) => {
    const li = dropTarget(event);
    if (!li) return;
    event.preventDefault();
    tree.querySelectorAll(".drop-target").forEach((n) => n !== li && n.classList.remove("drop-target"));
    li.classList.add("drop-target");
  });
  tree.addEventListener("dragleave", (event) => { const li = dropTarget(event); if (li) li.classList.remove("drop-target"); });
  tree.addEventListener("drop", (event) => {
    const li = dropTarget(event);
    if (!li) return;
    event.preventDefault();
    li.classList.remove("drop-target");
    const moving = event.dataTransfer.getData("text/plain");
    if (moving && moving !== li.dataset.nodeId) post(moving, "reparent", {parent: li.dataset.nodeId || ""});
  });

  // After every swap: keep the selection and the cut mark; report refusals that were not swapped.
  tree.addEventListener("htmx:afterSwap", () => {
    const li = selectedId ? byId(selectedId) : null;
    if (li) select(li); else selectedId = null;
    if (cutId) byId(cutId)?.classList.add("cut");
  });
  document.body.addEventListener("htmx:responseError", (event) => {
    say(event.detail.xhr.status === 403 ? "Your role may not do that (approving is for managers)."
                                        : `The server refused (HTTP ${event.detail.xhr.status}).`);
  });

  Shortcuts.on("j", () => move(1));
  Shortcuts.on("ArrowDown", () => move(1));
  Shortcuts.on("k", () => move(-1));
  Shortcuts.on("ArrowUp", () => move(-1));
  Shortcuts.on("a", (event) => (event.shiftKey ? actions["approve-subtree"]() : actions.approve()));
  Shortcuts.on("r", () => actions.rename());
  Shortcuts.on("m", () => actions.merge());
  Shortcuts.on("d", () => actions.delete());
  Shortcuts.on("u", () => actions.restore());
  Shortcuts.on("x", () => actions.cut());
  Shortcuts.on("p", (event) => actions.paste(event.shiftKey));
  Shortcuts.on("Enter", () => {
    if (!mergeId) return false;
    const li = selected();
    if (!li || li.dataset.nodeId === mergeId) { say("Pick another node to merge into."); return true; }
    confirmMerge(li);
    return true;
  });
  Shortcuts.on("Escape", () => { if (!cutId && !mergeId) return false; cancel(); return true; });
  Shortcuts.on("?", () => { help.open = !help.open; });
})();
