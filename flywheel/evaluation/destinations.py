"""Where a judged trajectory goes: exactly one recorded destination per trajectory (§2.4.2).

True → SFT pool; False → ECDM queue; Env_ERROR → environment self-healing, re-collection of the
query, and the ECDM; Undetermined → the adjudication queue.

The destination is written in the caller's transaction; what touches the world (the phone's
health check, dispatching re-collection, telling dashboards) runs after commit, never under a lock.
"""
import logging

from django.db import transaction
from django.utils import timezone

from devices import health, scheduling
from devices.models import Device
from flywheel.console.events import publish
from flywheel.models import Destination, Outcome, SftEntry, Trajectory
from flywheel.rules.environment import ENV_ERRORS_BEFORE_QUARANTINE, quarantine_after_env_errors
from flywheel.rules.htsc import route_outcome
from flywheel.rules.pools import sft_intake_allowed

log = logging.getLogger(__name__)


def route_trajectory(trajectory: Trajectory, outcome: str, reason: str = "",
                     intake: str = "htsc_true") -> str:
    destination = route_outcome(outcome)
    if destination == Destination.SFT and not sft_intake_allowed(intake):
        raise ValueError(f"{intake!r} may not enter the SFT pool")
    with transaction.atomic():
        Trajectory.objects.filter(pk=trajectory.pk).update(
            verdict=outcome, destination=destination,
            finished_at=trajectory.finished_at or timezone.now())
        trajectory.verdict, trajectory.destination = outcome, destination
        if destination == Destination.SFT:
            SftEntry.objects.get_or_create(trajectory=trajectory, intake=intake)
            publish("pools", pool="sft")
        elif destination == Destination.ENV_HEALING:
            trajectory_id = trajectory.pk
            transaction.on_commit(lambda: heal_environment(trajectory_id, reason))
        publish("routing", trajectory=trajectory.pk, outcome=outcome, destination=destination)
    return destination


def heal_environment(trajectory_id: int, reason: str):
    """Check the phone, quarantine it when Env_ERROR repeats there, and collect the query again."""
    trajectory = Trajectory.objects.select_related("device", "query").get(pk=trajectory_id)
    device = trajectory.device
    if device is not None:
        recent = list(Trajectory.objects.filter(device=device).exclude(verdict=Outcome.PENDING)
                      .order_by("-finished_at", "-pk")
                      .values_list("verdict", flat=True)[:ENV_ERRORS_BEFORE_QUARANTINE])
        if quarantine_after_env_errors(recent):
            health.quarantine(device, by="auto", reason=f"{len(recent)} Env_ERROR trajectories in a row")
        elif device.status != Device.Status.QUARANTINED:
            health.check_device(Device.objects.get(pk=device.pk))
    query = trajectory.query
    scheduling.enqueue("collect", payload={"query_id": query.pk, "line": trajectory.line,
                                           "recollect_of": trajectory.pk, "reason": reason[:300]},
                       requirements=query.phone_requirements(), priority=1)
    log.info("trajectory %s: Env_ERROR, query %s queued for re-collection", trajectory.pk, query.key)
