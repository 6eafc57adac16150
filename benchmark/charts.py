"""The numbers behind the benchmark pages' charts, as plain data.

Each chart is a dict that the page embeds with `json_script` and static/js/benchmark_charts.js draws;
the same rows are shown as an HTML table next to it, so nothing is only in a picture.

    {"type": "bar" | "line", "labels": [...], "datasets": [{"label", "data"}], "percent": bool,
     "horizontal": bool, "time": bool, "fit": bool, "axes": {"x": title, "y": title}}
`fit`: the value axis spans the data's range (padded) instead of starting at zero. The script labels
every bar (it wraps long labels and grows a horizontal chart with its rows) and scales a time axis
to the points' own span.
A time chart's points are {"x": milliseconds since the epoch, "y": value, "title": what the point is}.
"""
from benchmark.rules.metric_system import BY_KEY, DIMENSIONS, QUOTA_DIMENSIONS, VALUE_LABELS


def value_label(value) -> str:
    return VALUE_LABELS.get(value, str(value))


def dimension_label(key) -> str:
    return BY_KEY[key].label if key in BY_KEY else str(key)


def bar(labels, datasets, percent=True, horizontal=False, axes=None) -> dict:
    return {"type": "bar", "labels": list(labels), "datasets": datasets, "percent": percent,
            "horizontal": horizontal, "time": False, "axes": axes or {}}


def quota_groups(drift_rows: list[dict], tolerance: float = 0.05) -> list[dict]:
    """Quota vs realised, one group (a grouped bar chart and its table) per dimension; a row is
    `off` when its gap is beyond the table's tolerance."""
    groups = []
    for dimension in QUOTA_DIMENSIONS:
        rows = [r for r in drift_rows if r["dimension"] == dimension]
        if not rows:
            continue
        labels = [value_label(r["value"]) for r in rows]
        groups.append({
            "key": dimension, "label": dimension_label(dimension), "tests": BY_KEY[dimension].tests,
            "rows": [{**r, "value_label": value_label(r["value"]), "off": abs(r["gap"]) > tolerance} for r in rows],
            "chart": bar(labels, [{"label": "quota", "data": [r["target"] for r in rows]},
                                  {"label": "realised", "data": [r["realised"] for r in rows]}]),
        })
    return groups


def realised_groups(counts: dict, size: int) -> list[dict]:
    """Realised composition per dimension, for a version whose table sets no shares."""
    groups = []
    for dimension in QUOTA_DIMENSIONS:
        cells = counts.get(dimension) or {}
        if not cells:
            continue
        rows = [{"value": v, "value_label": value_label(v), "count": cells[v],
                 "realised": round(cells[v] / max(size, 1), 4)} for v in BY_KEY[dimension].values if cells.get(v)]
        groups.append({"key": dimension, "label": dimension_label(dimension), "rows": rows,
                       "chart": bar([r["value_label"] for r in rows],
                                    [{"label": "realised", "data": [r["realised"] for r in rows]}])})
    return groups


def dimension_rows(by_dimension: dict) -> list[dict]:
    """A run's SR per (dimension, value), in Table 4's order."""
    rows = []
    for dimension in DIMENSIONS:
        cells = (by_dimension or {}).get(dimension.key) or {}
        ordered = [v for v in dimension.values if v in cells] + sorted(v for v in cells if v not in dimension.values)
        for value in ordered:
            cell = cells[value]
            rows.append({"dimension": dimension.key, "dimension_label": dimension.label, "value": value,
                         "value_label": value_label(value), "sr": cell.get("sr"), "n": cell.get("n", 0),
                         "successes": cell.get("successes", 0)})
    return rows


def dimension_chart(rows: list[dict]) -> dict:
    return bar([f"{r['dimension_label']}: {r['value_label']}" for r in rows],
               [{"label": "SR", "data": [r["sr"] for r in rows]}], horizontal=True, axes={"x": "success rate"})


def comparison_chart(rows: list[dict], label_a: str, label_b: str) -> dict:
    return bar([f"{dimension_label(r['dimension'])}: {value_label(r['value'])}" for r in rows],
               [{"label": label_a, "data": [r["sr_a"] for r in rows]},
                {"label": label_b, "data": [r["sr_b"] for r in rows]}], horizontal=True,
               axes={"x": "success rate"})


def time_series(runs, key_of, label_of, value_of) -> dict:
    """A line per key (model version, benchmark version) over the runs' finishing times."""
    series: dict = {}
    for run in runs:
        value = value_of(run)
        if value is None or run.finished_at is None:
            continue
        dataset = series.setdefault(key_of(run), {"label": label_of(run), "data": []})
        dataset["data"].append({"x": int(run.finished_at.timestamp() * 1000), "y": value,
                                "title": f"eval #{run.pk}: {run.model_version} on {run.benchmark}"})
    return {"type": "line", "labels": [], "datasets": list(series.values()), "percent": True, "horizontal": False,
            "time": True, "axes": {"x": "finished", "y": "success rate"}}


def per_run_chart(runs, fields: dict) -> dict:
    """One bar group per run, one bar per field ({label: function of the run})."""
    return bar([f"#{run.pk}" for run in runs],
               [{"label": label, "data": [of(run) for run in runs]} for label, of in fields.items()],
               axes={"x": "evaluation run"})
