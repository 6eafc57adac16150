"""Counts for the manager dashboard.

The open dashboard re-reads these on every pushed event (up to twice a second), so each figure is
one cheap statement at any scale: small tables and the trajectories (by index-only scans) are
counted as they stand; the pools and the semi-automatic line's verified steps come from the
incrementally folded tallies (flywheel/tallies.py), never from counting a million rows.
"""
from django.contrib.auth.models import User
from django.db.models import Count

from devices.models import Device
from flywheel import tallies
from flywheel.models import ModelVersion, Query, RlQueryEntry, Trajectory
from flywheel.models.trajectories import Line, Outcome
from flywheel.queries.coverage import coverage_overview

# Whose verdicts a line's row counts: every verdict shown has its votes or its person behind it.
VERDICTS_BY = {Line.SEMI_AUTO: "stated by the annotator who verified it",
               Line.HANDBACK: "the right step at a recognised state, written by rule (§2.3.7)"}


def trajectories_by_line_and_verdict():
    """Rows of (line label, {verdict: count}, total) for every line of the training data that has
    trajectories, and the number of benchmark rollouts, which are counted apart: they are scored
    by their evaluations (the benchmark's pages) and are never training data nor failures."""
    counts = {}
    for row in Trajectory.objects.order_by().values("line", "verdict").annotate(n=Count("*")):
        counts.setdefault(row["line"], {})[row["verdict"]] = row["n"]
    assisted = teacher_assisted_successes()
    rows = []
    for line, label in Line.choices:
        if line in counts and line != Line.BENCHMARK:
            # The True column is the policy's own successes; the Teacher's are counted apart.
            by_verdict = [counts[line].get(verdict, 0) - (assisted.get(line, 0) if verdict == Outcome.TRUE else 0)
                          for verdict in Outcome.values]
            total = sum(by_verdict) + assisted.get(line, 0)
            rows.append({"line": label, "counts": by_verdict, "teacher_assisted": assisted.get(line, 0),
                         "total": total, "verdicts_by": VERDICTS_BY.get(line, "")})
    return rows, sum(counts.get(Line.BENCHMARK, {}).values())


def teacher_assisted_successes() -> dict[str, int]:
    """{line: True trajectories the Teacher took over in}: never the policy's own successes (a
    partial index holds the few Teacher-assisted trajectories)."""
    return dict(Trajectory.objects.filter(teacher_assisted=True, verdict=Outcome.TRUE).order_by()
                .values_list("line").annotate(n=Count("*")))


def _summarise(rows):
    steps = sum(row["steps"] for row in rows)
    timed, verify_ms = sum(row["timed"] for row in rows), sum(row["verify_ms"] for row in rows)
    accepted = sum(row["steps"] for row in rows if row["accepted"])
    return {"steps": steps, "seconds_per_step": round(verify_ms / timed / 1000, 1) if timed else None,
            "accepted_share": accepted / steps if steps else None,
            "moved": sum(row["steps"] for row in rows if row["moved"])}


def verification_metrics():
    """Semi-automatic line: time per verified step and the share of proposals accepted unchanged,
    per annotator and per policy (the model version that proposed), over every verified step."""
    rows = []
    for key, steps, verify_ms, timed in tallies.read(tallies.VERIFIED, by=("key",)):
        annotator, version, accepted, moved = key.split("|")
        rows.append({"annotator": int(annotator) if annotator else None, "version": int(version) if version else None,
                     "accepted": tallies.key_flag(accepted), "moved": tallies.key_flag(moved), "steps": steps,
                     "verify_ms": verify_ms,
                     "timed": timed})
    names = dict(User.objects.filter(pk__in={row["annotator"] for row in rows}).values_list("pk", "username"))
    versions = dict(ModelVersion.objects.filter(pk__in={row["version"] for row in rows}).values_list("pk", "name"))
    by_annotator, by_policy = {}, {}
    for row in rows:
        by_annotator.setdefault(names.get(row["annotator"], "–"), []).append(row)
        by_policy.setdefault(versions.get(row["version"], "offline"), []).append(row)
    return {"by_annotator": [(name, _summarise(rows)) for name, rows in sorted(by_annotator.items())],
            "by_policy": [(name, _summarise(rows)) for name, rows in sorted(by_policy.items())]}


def dashboard_counts():
    queries_by_tier = dict(Query.objects.order_by().values_list("tier").annotate(n=Count("*")))
    devices_by_status = dict(Device.objects.order_by().values_list("status").annotate(n=Count("id")))
    trajectory_rows, benchmark_rollouts = trajectories_by_line_and_verdict()
    return {
        "queries_total": sum(queries_by_tier.values()),
        "queries_by_tier": [(tier, queries_by_tier.get(tier, 0)) for tier in ("L1", "L2", "L3")],
        "verdict_labels": Outcome.labels,
        "trajectory_rows": trajectory_rows,
        "trajectories_total": sum(row["total"] for row in trajectory_rows),
        "benchmark_rollouts": benchmark_rollouts,
        "pools": {
            "cpt": tallies.total(tallies.CPT),
            "sft": tallies.total(tallies.SFT),
            "rl": RlQueryEntry.objects.filter(state__in=["banked", "active"]).count(),
        },
        "devices_by_status": [(label, devices_by_status.get(status, 0))
                              for status, label in Device.Status.choices],
        "devices_total": sum(devices_by_status.values()),
        "verification": verification_metrics(),
        "coverage": coverage_overview(),
    }
