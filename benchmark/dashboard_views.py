"""Score dashboards (report §4): SR over time per model version and per benchmark version, one run's
SR by dimension, two runs on two versions compared cell by cell (so a score change is attributable
to the stated quota shifts), and how far the judges can be trusted (agreement, expert overrides).
"""
from django.shortcuts import render

from accounts.roles import MANAGER, role_required
from benchmark.charts import (
    comparison_chart,
    dimension_chart,
    dimension_label,
    dimension_rows,
    per_run_chart,
    time_series,
    value_label,
)
from benchmark.models import Benchmark, EvalRun
from benchmark.rules.metric_system import BY_KEY, DIMENSIONS
from benchmark.rules.version_shifts import attribute_scores, version_diff
from flywheel.rules.numbers import row_id

RUN_LIMIT = 500


def _chosen(runs_by_id, raw, default=None):
    return runs_by_id.get(row_id(raw), default) if raw else default


def table_4_order(row):
    """Rows in Table 4's order: by dimension, then by the dimension's own order of values."""
    keys = [d.key for d in DIMENSIONS]
    dimension = BY_KEY.get(row["dimension"])
    values = list(dimension.values) if dimension else []
    return (keys.index(row["dimension"]) if dimension else len(keys), row["dimension"],
            values.index(row["value"]) if row["value"] in values else len(values), str(row["value"]))


def _score(run, key):
    return (run.scores or {}).get(key)


@role_required(MANAGER)
def dashboards(request):
    runs = list(EvalRun.objects.filter(status=EvalRun.Status.DONE).select_related("benchmark", "model_version")
                .order_by("finished_at", "pk")[:RUN_LIMIT])
    by_id = {run.pk: run for run in runs}
    context = {"runs": runs, "has_frozen": Benchmark.objects.filter(frozen=True).exists()}
    if not runs:
        return render(request, "benchmark/dashboards.html", context)

    context["sr_by_model"] = time_series(runs, lambda r: r.model_version_id, lambda r: str(r.model_version),
                                         lambda r: _score(r, "sr"))
    context["sr_by_benchmark"] = time_series(runs, lambda r: r.benchmark_id, lambda r: str(r.benchmark),
                                             lambda r: _score(r, "sr"))

    chosen = _chosen(by_id, request.GET.get("run", ""), runs[-1])
    rows = dimension_rows(_score(chosen, "by_dimension"))
    context.update(chosen=chosen, dimension_rows=rows, dimension_chart=dimension_chart(rows) if rows else None)

    run_a = _chosen(by_id, request.GET.get("a", ""))
    run_b = _chosen(by_id, request.GET.get("b", ""))
    if run_a is None and run_b is None and len(runs) > 1:
        # The latest run on a derived version against the latest run on its parent (the same model
        # version's, when there is one): the comparison the evolution is for.
        for candidate in reversed(runs):
            parents = [r for r in runs if candidate.benchmark.parent_id and r.benchmark_id == candidate.benchmark.parent_id]
            if parents:
                same_model = [r for r in parents if r.model_version_id == candidate.model_version_id]
                run_a, run_b = (same_model or parents)[-1], candidate
                break
    context.update(run_a=run_a, run_b=run_b)
    if run_a and run_b:
        comparison = sorted(attribute_scores(_score(run_a, "by_dimension") or {}, _score(run_b, "by_dimension") or {}),
                            key=table_4_order)
        for row in comparison:
            row.update(dimension_label=dimension_label(row["dimension"]), value_label=value_label(row["value"]))
        diff = version_diff(run_a.benchmark.quota_table or {}, run_b.benchmark.quota_table or {}, [], [])
        moved = {(m["dimension"], m["value"]): m for m in diff["moved"]}
        for row in comparison:
            row["moved"] = moved.get((row["dimension"], row["value"]))
        sr_a, sr_b = _score(run_a, "sr"), _score(run_b, "sr")
        context.update(comparison=comparison, moved=[{**m, "dimension_label": dimension_label(m["dimension"]),
                                                      "value_label": value_label(m["value"])} for m in diff["moved"]],
                       comparison_chart=comparison_chart(comparison, f"#{run_a.pk} {run_a.benchmark}",
                                                         f"#{run_b.pk} {run_b.benchmark}") if comparison else None,
                       sr_change=None if sr_a is None or sr_b is None else round(sr_b - sr_a, 4))

    context["trust_chart"] = per_run_chart(runs, {"judge agreement": lambda r: _score(r, "judge_agreement"),
                                                  "expert override rate": lambda r: _score(r, "expert_override_rate")})
    return render(request, "benchmark/dashboards.html", context)
