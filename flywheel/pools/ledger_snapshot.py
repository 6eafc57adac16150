"""The ledger overview's counts, taken by beat and read by the page (issue #17).

Why a snapshot here, and not tallies or live counts: the overview counts every failure there is
by its stage, and stages move as repairs progress (pending → done, a person's repair, a rule fixed,
a newer attribution); none of that leaves a timestamp to fold by, and counting it live is a
join of every failure with its newest attribution and its repairs (≈ 0.2–0.4 s at 1M steps,
growing with the data). So beat (`snapshot_ledger`, every minute) counts it once in the
background and the page reads the result, saying how old it is. A run newer than the snapshot,
and every run's own ledger page, are counted live: one run is small. Without a recent snapshot
(no beat, a test), the overview is counted live as before.
"""
from collections import Counter
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from flywheel.models import CollectionRun, LedgerSnapshot, Trajectory
from flywheel.pools.ledger import empty_counts, failure_counts, ledger_of, merge_counts

MAX_AGE = timedelta(minutes=10)  # an older snapshot is not shown: beat has stopped, count live


def _dump(counts: dict) -> dict:
    return {"failed": counts["failed"], **{name: dict(counts[name]) for name in ("levels", "paths", "stages", "salvaged")}}


def _load(data: dict) -> dict:
    counts = empty_counts()
    counts["failed"] = data["failed"]
    counts["levels"] = Counter({int(level): n for level, n in data["levels"].items()})
    for name in ("paths", "stages", "salvaged"):
        counts[name] = Counter(data[name])
    return counts


def take_snapshot() -> LedgerSnapshot:
    """Count every run's failures now and keep that as the only snapshot."""
    started = timezone.now()
    runs = list(CollectionRun.objects.values_list("pk", flat=True))  # those without failures too
    groups = failure_counts(Trajectory.objects.all(), group_by="run_id", all_repairs=True)
    counts = {"runs": {str(run_id): _dump(groups.get(run_id) or empty_counts()) for run_id in runs},
              "outside_runs": _dump(groups.get(None) or empty_counts()),
              "overall": _dump(merge_counts(*groups.values()))}
    seconds = (timezone.now() - started).total_seconds()
    with transaction.atomic():
        snapshot = LedgerSnapshot.objects.create(taken_at=started, counts=counts, seconds=seconds)
        LedgerSnapshot.objects.exclude(pk=snapshot.pk).delete()
    return snapshot


def ledger_overview(run_ids: list[int]) -> dict:
    """{"by_run": {run id: ledger} of `run_ids`, "outside_runs": ledger, "overall": ledger,
    "as_of": time or None}: from the newest snapshot when it is recent (runs newer than it are
    counted live and added), else all live."""
    snapshot = LedgerSnapshot.objects.filter(taken_at__gte=timezone.now() - MAX_AGE).order_by("-taken_at").first()
    if snapshot is None:
        groups = failure_counts(Trajectory.objects.all(), group_by="run_id", all_repairs=True)
        by_run = {run_id: groups.get(run_id) or empty_counts() for run_id in run_ids}
        outside, overall = groups.get(None) or empty_counts(), merge_counts(*groups.values())
    else:
        known = snapshot.counts["runs"]
        by_run = {run_id: _load(known[str(run_id)]) for run_id in run_ids if str(run_id) in known}
        unknown = [pk for pk in run_ids if str(pk) not in known]  # launched since the snapshot
        newer = failure_counts(Trajectory.objects.filter(run_id__in=unknown), group_by="run_id") if unknown else {}
        by_run.update({run_id: newer.get(run_id) or empty_counts() for run_id in run_ids if run_id not in by_run})
        outside = _load(snapshot.counts["outside_runs"])
        overall = merge_counts(_load(snapshot.counts["overall"]), *newer.values())
    return {"by_run": {run_id: ledger_of(counts) for run_id, counts in by_run.items()},
            "outside_runs": ledger_of(outside), "overall": ledger_of(overall),
            "as_of": snapshot.taken_at if snapshot else None}
