// The trajectory page's step player: ←/→ move between steps; a step link (#step-N, in the strip,
// the attribution's evidence or a repair) opens that step. Registered with shortcuts.js.
(function () {
  "use strict";
  const player = document.getElementById("player");
  const frames = player ? Array.from(player.querySelectorAll(".frame")) : [];
  const links = player ? Array.from(player.querySelectorAll(".strip a")) : [];
  let current = 0;

  function show(position, scroll) {
    if (!frames.length) return;
    current = Math.max(0, Math.min(frames.length - 1, position));
    frames.forEach((frame, i) => { frame.hidden = i !== current; });
    links.forEach((link, i) => link.classList.toggle("current", i === current));
    document.getElementById("step-number").textContent = frames[current].dataset.step;
    if (scroll) player.scrollIntoView({block: "start"});
  }

  function showStep(index, scroll) {
    const position = frames.findIndex((frame) => frame.dataset.step === String(index));
    if (position >= 0) show(position, scroll);
    return position >= 0;
  }

  // The element box is drawn from its bounds (x1,y1,x2,y2) in screen pixels.
  document.querySelectorAll("rect.hit").forEach((rect) => {
    const [x1, y1, x2, y2] = rect.dataset.bounds.split(",").map(Number);
    rect.setAttribute("width", x2 - x1);
    rect.setAttribute("height", y2 - y1);
  });

  document.querySelectorAll("a[data-step]").forEach((link) => {
    link.addEventListener("click", (event) => {
      if (showStep(link.dataset.step, true)) event.preventDefault();
    });
  });

  if (frames.length) {
    window.Shortcuts.on("ArrowRight", () => show(current + 1));
    window.Shortcuts.on("ArrowLeft", () => show(current - 1));
  }
  function fromHash() {
    const hash = /^#step-(\d+)$/.exec(window.location.hash);
    return Boolean(hash && showStep(hash[1], true));
  }
  window.addEventListener("hashchange", fromHash);
  if (!fromHash()) show(0);
})();
