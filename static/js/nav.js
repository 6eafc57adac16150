// The top menu: its groups are <details> (they open by click, Enter or Space without this file);
// this adds what <details> lacks for a menu: one group open at a time, closed by Esc, by a click
// elsewhere or by focus leaving it; the Menu button that shows the folded menu below 1,280 px;
// and the group of the page you are on marked.
(function () {
  "use strict";
  const bar = document.querySelector(".topbar");
  const nav = bar && bar.querySelector("nav");
  if (!nav) return;
  const groups = Array.from(nav.querySelectorAll("details.navgroup"));
  const toggle = bar.querySelector(".menu-toggle");

  function closeGroups(except) {
    groups.forEach((group) => { if (group !== except) group.open = false; });
  }

  groups.forEach((group) => {
    group.addEventListener("toggle", () => { if (group.open) closeGroups(group); });
    group.addEventListener("focusout", (event) => {
      if (!group.contains(event.relatedTarget) && event.relatedTarget) group.open = false;
    });
  });

  function setFolded(open) {
    bar.classList.toggle("menu-open", open);
    if (toggle) toggle.setAttribute("aria-expanded", String(open));
  }
  if (toggle) toggle.addEventListener("click", () => setFolded(!bar.classList.contains("menu-open")));

  document.addEventListener("click", (event) => {
    if (!nav.contains(event.target)) closeGroups(null);
    if (!bar.contains(event.target)) setFolded(false);
  });

  // Capture phase: a menu's Esc is handled before the page's shortcuts (shortcuts.js skips a key
  // whose default was prevented), so closing a menu never also releases a trajectory.
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    const open = groups.find((group) => group.open);
    if (open) {
      open.open = false;
      open.querySelector("summary").focus();
      event.preventDefault();
    } else if (bar.classList.contains("menu-open")) {
      setFolded(false);
      if (toggle) toggle.focus();
      event.preventDefault();
    }
  }, true);

  // The link of the page you are on (the longest matching path), and its group.
  let current = null;
  nav.querySelectorAll("a[href]").forEach((link) => {
    const path = link.pathname;
    if (path.length > 1 && location.pathname.startsWith(path) && (!current || path.length > current.pathname.length)) {
      current = link;
    }
  });
  if (current) {
    current.setAttribute("aria-current", "page");
    const group = current.closest("details.navgroup");
    if (group) group.classList.add("current");
  }
})();
