"""Counts for the manager dashboard, straight from the database."""
from django.db.models import Count

from devices.models import Device
from flywheel.models import CptEntry, Query, RlQueryEntry, SftEntry, Step, Trajectory
from flywheel.models.trajectories import Line, Outcome
from flywheel.queries.coverage import coverage, coverage_by_app


def trajectories_by_line_and_verdict():
    """Rows of (line label, {verdict: count}, total) for every line that has trajectories."""
    counts = {}
    for row in Trajectory.objects.values("line", "verdict").annotate(n=Count("id")):
        counts.setdefault(row["line"], {})[row["verdict"]] = row["n"]
    rows = []
    for line, label in Line.choices:
        if line in counts:
            by_verdict = [counts[line].get(verdict, 0) for verdict in Outcome.values]
            rows.append({"line": label, "counts": by_verdict, "total": sum(by_verdict)})
    return rows


def _summarise(rows):
    steps = len(rows)
    times = [row["verify_ms"] for row in rows if row["verify_ms"] is not None]
    accepted = sum(1 for row in rows if row["accepted"])
    return {"steps": steps, "seconds_per_step": round(sum(times) / len(times) / 1000, 1) if times else None,
            "accepted_share": accepted / steps if steps else None,
            "moved": sum(1 for row in rows if (row["distance"] or 0) >= 1)}


def verification_metrics(limit=20_000):
    """Semi-automatic line: time per verified step and the share of proposals accepted unchanged,
    per annotator and per policy (the model version that proposed)."""
    steps = (Step.objects.filter(trajectory__line=Line.SEMI_AUTO, executed_action__isnull=False, edit__isnull=False)
             .values("edit", "timings", "trajectory__annotator__username", "trajectory__model_version__name")
             .order_by("-id")[:limit])
    by_annotator, by_policy = {}, {}
    for step in steps:
        edit, timings = step["edit"] or {}, step["timings"] or {}
        row = {"verify_ms": timings.get("verify_ms"), "accepted": bool(edit.get("accepted_unchanged")),
               "distance": edit.get("pixel_distance")}
        by_annotator.setdefault(step["trajectory__annotator__username"] or "–", []).append(row)
        by_policy.setdefault(step["trajectory__model_version__name"] or "offline", []).append(row)
    return {"by_annotator": [(name, _summarise(rows)) for name, rows in sorted(by_annotator.items())],
            "by_policy": [(name, _summarise(rows)) for name, rows in sorted(by_policy.items())]}


def dashboard_counts():
    queries_by_tier = dict(Query.objects.values_list("tier").annotate(n=Count("id")))
    devices_by_status = dict(Device.objects.values_list("status").annotate(n=Count("id")))
    return {
        "queries_total": sum(queries_by_tier.values()),
        "queries_by_tier": [(tier, queries_by_tier.get(tier, 0)) for tier in ("L1", "L2", "L3")],
        "verdict_labels": Outcome.labels,
        "trajectory_rows": trajectories_by_line_and_verdict(),
        "trajectories_total": Trajectory.objects.count(),
        "pools": {
            "cpt": CptEntry.objects.count(),
            "sft": SftEntry.objects.count(),
            "rl": RlQueryEntry.objects.filter(state__in=["banked", "active"]).count(),
        },
        "devices_by_status": [(label, devices_by_status.get(status, 0))
                              for status, label in Device.Status.choices],
        "devices_total": sum(devices_by_status.values()),
        "verification": verification_metrics(),
        "coverage": {"overall": coverage(), "by_app": coverage_by_app()},
    }
