// Query review from the keyboard (registered with shortcuts.js): j/k move the current row, x selects
// it, a approves it, r puts the cursor in its reject reason (Enter rejects), e opens its edit form,
// Shift+A / Shift+R approve / reject the selected rows, ? shows the help. "/" (search) is in the markup.
// Rows are swapped in place by htmx, so they are looked up afresh on every key.
(function () {
  "use strict";
  const table = document.getElementById("review-rows");
  const help = document.getElementById("review-help");
  if (help) window.Shortcuts.on("?", () => { help.hidden = !help.hidden; });
  if (!table) return;
  const bulkForm = document.getElementById("bulk-form");
  let current = 0;

  const rows = () => Array.from(table.querySelectorAll("tr.review-row"));
  const currentRow = () => rows()[current] || null;

  function mark(index) {
    const all = rows();
    if (!all.length) return;
    current = Math.max(0, Math.min(all.length - 1, index));
    all.forEach((row, i) => row.classList.toggle("current", i === current));
    all[current].scrollIntoView({block: "nearest"});
  }

  function clickIn(selector) {
    const el = currentRow() && currentRow().querySelector(selector);
    if (!el || el.disabled) return false;
    el.click();
    return true;
  }

  function submitBulk(action) {
    if (!bulkForm) return false;
    if (!table.querySelector("input.select:checked")) {
      window.alert("Select rows first: x selects the current row.");
      return true;
    }
    bulkForm.requestSubmit(document.getElementById(action === "approve" ? "bulk-approve" : "bulk-reject"));
    return true;
  }

  window.Shortcuts.on("j", () => mark(current + 1));
  window.Shortcuts.on("k", () => mark(current - 1));
  window.Shortcuts.on("x", () => {
    const box = currentRow() && currentRow().querySelector("input.select");
    if (!box || box.disabled) return false;
    box.checked = !box.checked;
  });
  window.Shortcuts.on("a", (event) => (event.shiftKey ? submitBulk("approve") : clickIn("button.approve")));
  window.Shortcuts.on("r", (event) => {
    if (event.shiftKey) return submitBulk("reject");
    const reason = currentRow() && currentRow().querySelector("input.reason");
    if (!reason) return false;
    reason.focus();
  });
  window.Shortcuts.on("e", () => clickIn("button.edit"));

  const selectAll = document.getElementById("select-all");
  if (selectAll) {
    selectAll.addEventListener("change", () => {
      table.querySelectorAll("input.select:not(:disabled)").forEach((box) => { box.checked = selectAll.checked; });
    });
  }

  // A swapped-in row is a new element: mark it again; after approving or rejecting, move on.
  document.body.addEventListener("htmx:afterSettle", (event) => {
    const config = event.detail && event.detail.requestConfig;
    const acted = config && config.verb === "post" && config.elt && config.elt.matches("form.act");
    mark(acted ? current + 1 : current);
  });
  mark(0);
})();
