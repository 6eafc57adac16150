// Step player for adjudication: ←/→ move between steps (registered with shortcuts.js).
// The other keys are in the markup (data-shortcut): 1/2/3 decide, N focuses the note,
// Esc releases the claim.
(function () {
  "use strict";
  const player = document.getElementById("player");
  const frames = player ? Array.from(player.querySelectorAll(".frame")) : [];
  let current = 0;

  function show(index) {
    if (!frames.length) return;
    current = Math.max(0, Math.min(frames.length - 1, index));
    frames.forEach((frame, i) => { frame.hidden = i !== current; });
    document.getElementById("step-number").textContent = current + 1;
  }

  // The element box is drawn from its bounds (x1,y1,x2,y2) in screen pixels.
  document.querySelectorAll("rect.hit").forEach((rect) => {
    const [x1, y1, x2, y2] = rect.dataset.bounds.split(",").map(Number);
    rect.setAttribute("width", x2 - x1);
    rect.setAttribute("height", y2 - y1);
  });

  if (frames.length) {
    window.Shortcuts.on("ArrowRight", () => show(current + 1));
    window.Shortcuts.on("ArrowLeft", () => show(current - 1));
  }
  show(0);
})();
