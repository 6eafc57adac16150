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

  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  const DAY_MS = 86400000;

  // A date as people read it, in the browser's time zone; the time of day only when the axis spans
  // less than a few days (then it is what tells points apart).
  function day(ms, withTime) {
    const d = new Date(ms);
    const date = `${d.getDate()} ${MONTHS[d.getMonth()]} ${d.getFullYear()}`;
    if (!withTime) return date;
    const pad = (n) => String(n).padStart(2, "0");
    return `${date} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
  }

  // A label on several lines (Chart.js draws an array as lines) so none has to be skipped.
  function wrap(label, width) {
    const words = String(label).split(" ");
    const lines = [];
    words.forEach((word) => {
      const last = lines.length ? lines[lines.length - 1] : null;
      if (last !== null && (last + " " + word).length <= width) lines[lines.length - 1] = last + " " + word;
      else lines.push(word);
    });
    return lines.length > 1 ? lines : String(label);
  }

  function values(spec) {
    const out = [];
    (spec.datasets || []).forEach((set) => (set.data || []).forEach((point) => {
      const value = point && typeof point === "object" ? point.y : point;
      if (typeof value === "number" && isFinite(value)) out.push(value);
    }));
    return out;
  }

  function times(spec) {
    const out = [];
    (spec.datasets || []).forEach((set) => (set.data || []).forEach((point) => {
      if (point && typeof point.x === "number") out.push(point.x);
    }));
    return out;
  }

  function valueScale(spec) {
    const scale = {ticks: spec.percent ? {callback: (value) => percent(value)} : {}};
    if (spec.fit) {  // the data's own range, padded by a tenth of it (or of the value when flat)
      const all = values(spec);
      if (all.length) {
        const low = Math.min(...all), high = Math.max(...all);
        const pad = (high - low) * 0.1 || Math.abs(high) * 0.1 || 1;
        scale.min = spec.percent ? Math.max(0, low - pad) : low - pad;
        scale.max = spec.percent ? Math.min(1, high + pad) : high + pad;
      }
    } else {
      scale.min = 0;
      if (spec.percent) scale.max = 1;
    }
    return scale;
  }

  // The time axis spans the data: a lone point (or points close together) gets a window of a day
  // or two around it rather than the years Chart.js would pick.
  function timeScale(spec) {
    const all = times(spec);
    const scale = {type: "linear", ticks: {maxRotation: 0, autoSkip: true, maxTicksLimit: 6}};
    if (!all.length) return scale;
    const first = Math.min(...all), last = Math.max(...all);
    const pad = Math.max((last - first) * 0.05, DAY_MS / 2);
    scale.min = first - pad;
    scale.max = last + pad;
    const withTime = scale.max - scale.min < 4 * DAY_MS;
    scale.ticks.callback = (value) => day(value, withTime);
    return scale;
  }

  function title(text) {
    return text ? {display: true, text} : {display: false};
  }

  function config(spec) {
    const horizontal = Boolean(spec.horizontal);
    const valueAxis = horizontal ? "x" : "y";
    const labelAxis = horizontal ? "y" : "x";
    const axes = spec.axes || {};
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
    scales[valueAxis] = valueScale(spec);
    if (spec.time) {
      scales.x = timeScale(spec);
    } else if (spec.type !== "line") {
      // Never skip a bar's label: a bar beside another bar's label reads as a wrong number. (A
      // line's x labels are a continuous scale such as steps: thinning their ticks misleads no one.)
      scales[labelAxis] = {ticks: {autoSkip: false, maxRotation: horizontal ? 0 : 50, minRotation: 0}};
    }
    scales.x = Object.assign(scales.x || {}, {title: title(axes.x)});
    scales.y = Object.assign(scales.y || {}, {title: title(axes.y)});
    const labels = spec.time ? undefined
      : (spec.labels || []).map((label) => (spec.type === "line" ? label : wrap(label, horizontal ? 40 : 16)));
    return {
      type: spec.type === "line" ? "line" : "bar",
      data: {labels, datasets},
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
                const label = items.length ? items[0].label : "";
                return Array.isArray(label) ? label.join(" ") : label;
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

  // A horizontal chart's rows need room for every label: the canvas grows with them.
  function heightFor(spec, asked) {
    if (!spec.horizontal || spec.time) return asked;
    const rows = (spec.labels || []).length;
    const perRow = 8 + 10 * Math.max(1, (spec.datasets || []).length);
    return Math.max(asked, rows * perRow + 70);
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
    const height = heightFor(spec, Number(canvas.getAttribute("height")) || 220);
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
  window.BenchmarkCharts = {drawAll, config};
})();
