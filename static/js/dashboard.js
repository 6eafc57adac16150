// The manager dashboard is pushed: product code sends an event after each commit (a verdict, a
// routing, a pool or lease change, run progress) over /ws/dashboard/, and the counts are re-read
// at most twice a second. A lost connection comes back with growing delays; the page's slow
// htmx poll covers the gap.
(function () {
  "use strict";
  const counts = document.querySelector("[data-dashboard-socket]");
  const state = document.getElementById("live-state");
  if (!counts || !window.WebSocket) return;
  let timer = null, retry = 1000, last = 0;

  function refresh() {
    if (timer) return;
    const wait = Math.max(0, 500 - (Date.now() - last));
    timer = setTimeout(() => {
      timer = null;
      last = Date.now();
      if (window.htmx) window.htmx.trigger(counts, "refresh");
    }, wait);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(scheme + "//" + location.host + counts.dataset.dashboardSocket);
    socket.addEventListener("open", () => { retry = 1000; state.textContent = "live"; });
    socket.addEventListener("message", (message) => {
      const data = JSON.parse(message.data);
      if (data.type === "event") {
        counts.dataset.lastEvent = data.event.kind;
        refresh();
      }
    });
    socket.addEventListener("close", (event) => {
      if (event.code === 4401 || event.code === 4403) { state.textContent = "not live (no access)"; return; }
      state.textContent = "reconnecting…";
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 30000);
    });
  }
  connect();
})();
