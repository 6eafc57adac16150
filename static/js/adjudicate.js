// Keyboard-driven step player for adjudication: ←/→ move between steps, 1/2/3 decide,
// N focuses the note, Esc releases the claim.
(function () {
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

  document.addEventListener("keydown", (event) => {
    if (event.target.closest("textarea, input")) {
      if (event.key === "Escape") event.target.blur();
      return;
    }
    if (event.key === "ArrowRight") show(current + 1);
    else if (event.key === "ArrowLeft") show(current - 1);
    else if (event.key === "n" || event.key === "N") { event.preventDefault(); document.getElementById("note").focus(); }
    else if (event.key === "Escape") document.querySelector("form.inline button").click();
    else {
      const button = document.querySelector(`#decision-form button[data-key="${event.key}"]`);
      if (button) button.click();
    }
  });
  show(0);
})();
