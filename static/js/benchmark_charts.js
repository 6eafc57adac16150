// The benchmark pages' charts, drawn with the vendored Chart.js (static/vendor/chart.umd.min.js).
//
// Markup: <script type="application/json" id="X">…</script> (Django's json_script) and
// <canvas data-chart="X">. The data is {type: "bar"|"line", labels, datasets: [{label, data}],
// percent, horizontal, time}; a time chart's points are {x: ms since the epoch, y, title}.
// Every chart has its numbers in a table next to it, so a page without this script loses nothing.
// Charts inside an htmx-swapped fragment (the live run page) are drawn again after each swap.
(function () {
  "use strict";
  const COLOURS = ["#2457c5", "#e07b00", "#1a7f37", "#b42318", "#7c3aed", "#0e7490", "#a16207", "#be185d"];

  function percent(value) {
    return value === null || value === undefined ? "–" : Math.round(value * 1000) / 10 + "%";
  }

  function day(ms) {
    const d = new Date(ms);
    return d.toISOString().slice(0, 16).replace("T", " ");
  }

  function config(spec) {
    const horizontal = Boolean(spec.horizontal);
    const valueAxis = horizontal ? "x" : "y";
    const datasets = (spec.datasets || []).map((set, i) => ({
      label: set.label,
      data: set.data,
      backgroundColor: COLOURS[i % COLOURS.length] + (spec.type === "line" ? "33" : "cc"),
      borderColor: COLOURS[i % COLOURS.length],
      borderWidth: spec.type === "line" ? 2 : 1,
      pointRadius: spec.type === "line" ? 4 : undefined,
      spanGaps: true,
      fill: false,
    }));
    const scales = {};
    scales[valueAxis] = {
      min: 0,
      max: spec.percent ? 1 : undefined,
      ticks: spec.percent ? {callback: (value) => percent(value)} : {},
    };
    if (spec.time) {
      scales.x = {type: "linear", ticks: {callback: (value) => day(value), maxRotation: 0, autoSkip: true}};
    }
    return {
      type: spec.type === "line" ? "line" : "bar",
      data: {labels: spec.time ? undefined : spec.labels, datasets},
      options: {
        indexAxis: horizontal ? "y" : "x",
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        scales,
        plugins: {
          legend: {display: datasets.length > 1 || spec.type === "line"},
          tooltip: {
            callbacks: {
              title: (items) => {
                const raw = items.length ? items[0].raw : null;
                if (raw && typeof raw === "object" && raw.title) return raw.title;
                return items.length ? items[0].label : "";
              },
              label: (item) => {
                const raw = item.raw && typeof item.raw === "object" ? item.raw.y : item.raw;
                return item.dataset.label + ": " + (spec.percent ? percent(raw) : raw);
              },
            },
          },
        },
      },
    };
  }

  function draw(canvas) {
    const source = document.getElementById(canvas.dataset.chart);
    const fallback = canvas.parentElement && canvas.parentElement.querySelector(".chart-fallback");
    if (!source || !window.Chart) {
      if (fallback) fallback.hidden = false;
      canvas.hidden = true;
      return;
    }
    const existing = window.Chart.getChart(canvas);
    if (existing) existing.destroy();
    const spec = JSON.parse(source.textContent);
    const height = Number(canvas.getAttribute("height")) || 220;
    canvas.parentElement.style.height = height + "px";
    const chart = new window.Chart(canvas, config(spec));
    canvas.dataset.drawn = String(chart.data.datasets.length);
  }

  function drawAll(root) {
    (root || document).querySelectorAll("canvas[data-chart]").forEach(draw);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => drawAll(document));
  else drawAll(document);
  document.body.addEventListener("htmx:afterSettle", (event) => drawAll(event.target));
  window.BenchmarkCharts = {drawAll};
})();
