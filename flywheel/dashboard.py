"""Counts for the manager dashboard, straight from the database."""
from django.db.models import Count

from devices.models import Device

from .models import CptEntry, Query, RlQueryEntry, SftEntry, Trajectory
from .models.trajectories import LINES, VERDICTS


def trajectories_by_line_and_verdict():
    """Rows of (line label, {verdict: count}, total) for every line that has trajectories."""
    counts = {}
    for row in Trajectory.objects.values("line", "verdict").annotate(n=Count("id")):
        counts.setdefault(row["line"], {})[row["verdict"]] = row["n"]
    rows = []
    for line, label in LINES:
        if line in counts:
            by_verdict = [counts[line].get(verdict, 0) for verdict, _ in VERDICTS]
            rows.append({"line": label, "counts": by_verdict, "total": sum(by_verdict)})
    return rows


def dashboard_counts():
    queries_by_tier = dict(Query.objects.values_list("tier").annotate(n=Count("id")))
    devices_by_status = dict(Device.objects.values_list("status").annotate(n=Count("id")))
    return {
        "queries_total": sum(queries_by_tier.values()),
        "queries_by_tier": [(tier, queries_by_tier.get(tier, 0)) for tier in ("L1", "L2", "L3")],
        "verdict_labels": [label for _, label in VERDICTS],
        "trajectory_rows": trajectories_by_line_and_verdict(),
        "trajectories_total": Trajectory.objects.count(),
        "pools": {
            "cpt": CptEntry.objects.count(),
            "sft": SftEntry.objects.count(),
            "rl": RlQueryEntry.objects.filter(state__in=["banked", "active"]).count(),
        },
        "devices_by_status": [(label, devices_by_status.get(status, 0))
                              for status, label in Device.STATUSES],
        "devices_total": sum(devices_by_status.values()),
    }
