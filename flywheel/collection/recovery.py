"""Recovery of collection work whose holder died (a killed worker, a restarted machine, a lost host):
its trajectories are interrupted and still routed, its work items re-queued (or settled, when the
trajectory had ended on its own), judging it left half done is taken over, and its runs are
dispatched again.
"""
import logging
from datetime import timedelta

from django.db.models import DateTimeField, ExpressionWrapper, Q, Value
from django.db.models.functions import Now
from django.utils import timezone

from devices import leases
from devices.models import Lease, WorkItem
from flywheel.collection.engine import finish_trajectory
from flywheel.collection.launch import RUN_LINES, redispatch_stalled_runs, refresh_progress
from flywheel.judging.pipeline import evaluate_trajectory
from flywheel.models import CollectionRun, Line, Outcome, Trajectory
from flywheel.rules.stops import Stop, StopKind, holder_went_away

log = logging.getLogger(__name__)

# Recovery ended it: its worker died, not the task (it is collected again).
WORKER_STOPPED = Stop(StopKind.WORKER_STOPPED, "interrupted: the worker stopped")


def reclaim_host_work(names):
    """A fresh worker for these phone hosts (its predecessor was killed, or its machine restarted):
    the collection leases the predecessor left on their phones end now, its trajectories are
    interrupted and routed, its work items re-queued and the runs dispatched again at once, instead
    of waiting for the leases to run out."""
    released = 0
    for lease in Lease.objects.filter(released_at__isnull=True, holder__startswith="collection:run:",
                                      device__adb_server__in=names):
        released += leases.release(lease)
    recovered = recover_interrupted(stale_after=timedelta(0))
    recovered["redispatched"] += redispatch_stalled_runs(after=timedelta(0), skip=recovered["redispatched"])["redispatched"]
    if released or recovered["trajectories"] or recovered["redispatched"]:
        log.warning("phone hosts %s: took over %d lease(s) of a previous worker; %s", ", ".join(names), released,
                    recovered)
    return {"leases": released, **recovered}


def finished_or_not(items):
    """([item ids whose last trajectory ended on its own], [item ids to collect again]) of items whose
    holder died: one that died between routing a finished trajectory and marking its item done left
    nothing to collect again."""
    last = {pk: (payload or {}).get("trajectories", [None])[-1] for pk, _kind, payload in items}
    ended = dict(Trajectory.objects.filter(pk__in=[t for t in last.values() if t]).exclude(
        status=Trajectory.Status.RUNNING).values_list("pk", "stop_kind"))
    # One its holder's going away cut short is collected again. ("lease lost", which the holder
    # records itself, is Env_ERROR: its routing re-collects it.)
    done = [pk for pk, t in last.items() if t in ended and not holder_went_away(ended[t])]
    return done, [pk for pk in last if pk not in done]


def recover_interrupted(stale_after=timedelta(seconds=20)):
    """Beat: work whose holder died. Its trajectory is interrupted and still routed; its item is
    re-queued once the lease has expired; nothing is lost.

    A run's trajectory is alive while its own phone is leased to the run: the run's other phones,
    on another host perhaps, say nothing about a host that was cut off."""
    leases.expire_stale_leases()
    open_leases = set(Lease.objects.filter(released_at__isnull=True).values_list("device_id", "holder"))
    live_holders = {holder for _device, holder in open_leases}
    recovered = 0
    # A run's trajectory starts once its phone is leased: without that lease it is dead at any age. Other
    # trajectories (the environment service's) are made a moment before their lease: `stale_after`.
    old_enough = Q(run__isnull=False) | Q(started_at__lt=ExpressionWrapper(Now() - Value(stale_after),
                                                                          output_field=DateTimeField()))
    for trajectory in Trajectory.objects.filter(old_enough, status=Trajectory.Status.RUNNING, line__in=RUN_LINES):
        if f"collection:trajectory:{trajectory.pk}" in live_holders or (
                trajectory.run_id and (trajectory.device_id, f"collection:run:{trajectory.run_id}") in open_leases):
            continue
        finish_trajectory(trajectory, WORKER_STOPPED, phone=None)
        recovered += 1
    # An item is stranded once its phone is no longer leased to its run (the phone may already be
    # leased again, to another run or a person: that says nothing about this item's holder).
    held = set(Lease.objects.filter(released_at__isnull=True).values_list("device_id", "holder"))
    stranded = [(pk, kind, payload) for pk, kind, device_id, payload in WorkItem.objects.filter(
        status=WorkItem.Status.ASSIGNED, kind__startswith="collect:").values_list("pk", "kind", "device_id", "payload")
        if (device_id, "collection:" + kind.removeprefix("collect:")) not in held]
    done, again = finished_or_not(stranded)
    WorkItem.objects.filter(pk__in=done, status=WorkItem.Status.ASSIGNED).update(
        status=WorkItem.Status.DONE, finished_at=timezone.now(), note="its trajectory ended as its holder died")
    requeued = WorkItem.objects.filter(pk__in=again, status=WorkItem.Status.ASSIGNED).update(
        status=WorkItem.Status.QUEUED, device=None, note="re-queued: its holder died")
    judged = take_over_judging([payload["trajectories"][-1] for pk, _kind, payload in stranded if pk in done])
    for run_id in CollectionRun.objects.filter(status=CollectionRun.Status.RUNNING).values_list("pk", flat=True):
        refresh_progress(run_id)
    # Work just handed back goes out at once to runs no live driver holds (their drivers may all have
    # finished while the lost host still had items in hand), not after the re-dispatch delay.
    runs = {int(kind.rpartition(":")[2]) for pk, kind, _ in stranded if pk in again and kind.startswith("collect:run:")}
    redispatched = redispatch_stalled_runs(after=timedelta(0), run_ids=runs)["redispatched"] if runs else []
    return {"trajectories": recovered, "work_items": requeued, "redispatched": redispatched, "judged": judged}


def take_over_judging(trajectory_ids) -> int:
    """Trajectories a dead holder ended but was still judging: judged now (without the phone), not
    once its judging claim runs out. The benchmark's rollouts are its evaluation's to judge."""
    judged = 0
    for trajectory in Trajectory.objects.filter(pk__in=trajectory_ids, verdict=Outcome.PENDING).exclude(
            line=Line.BENCHMARK):
        judged += evaluate_trajectory(trajectory, phone=None, take_over=True) is not None
    return judged
