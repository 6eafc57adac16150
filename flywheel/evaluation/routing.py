"""Where a judged trajectory goes: exactly one recorded destination per trajectory (§2.4.2).

True → SFT pool; False → ECDM queue; Env_ERROR → environment self-healing, re-collection of the
query, and the ECDM; Undetermined → the adjudication queue.
"""
import logging

from django.utils import timezone

from devices import health, scheduling
from devices.models import Device

from ..htsc import route_outcome
from ..pool_rules import sft_intake_allowed
from ..models import SftEntry, Trajectory

log = logging.getLogger(__name__)
ENV_ERRORS_BEFORE_QUARANTINE = 3


def route_trajectory(trajectory: Trajectory, outcome: str, reason: str = "",
                     intake: str = "htsc_true") -> str:
    destination = route_outcome(outcome)
    Trajectory.objects.filter(pk=trajectory.pk).update(
        verdict=outcome, destination=destination,
        finished_at=trajectory.finished_at or timezone.now())
    trajectory.verdict, trajectory.destination = outcome, destination
    if destination == "sft":
        if not sft_intake_allowed(intake):
            raise ValueError(f"{intake!r} may not enter the SFT pool")
        SftEntry.objects.get_or_create(trajectory=trajectory, intake=intake)
    elif destination == "env_healing":
        heal_environment(trajectory, reason)
    return destination


def heal_environment(trajectory: Trajectory, reason: str):
    """Check the phone, quarantine it when Env_ERROR repeats there, and collect the query again."""
    device = trajectory.device
    if device is not None:
        recent = list(Trajectory.objects.filter(device=device).exclude(verdict="pending")
                      .order_by("-finished_at", "-pk")
                      .values_list("verdict", flat=True)[:ENV_ERRORS_BEFORE_QUARANTINE])
        if len(recent) == ENV_ERRORS_BEFORE_QUARANTINE and set(recent) == {"env_error"}:
            health.quarantine(device, by="auto", reason=f"{len(recent)} Env_ERROR trajectories in a row")
        elif device.status not in ("quarantined",):
            health.check_device(Device.objects.get(pk=device.pk))
    query = trajectory.query
    scheduling.enqueue("collect", payload={"query_id": query.pk, "line": trajectory.line,
                                           "recollect_of": trajectory.pk, "reason": reason[:300]},
                       requirements=recollect_requirements(query), priority=1)
    log.info("trajectory %s: Env_ERROR, query %s queued for re-collection", trajectory.pk, query.key)


def recollect_requirements(query) -> dict:
    requirements = dict(query.requirements or {})
    requirements.setdefault("apps", query.app_packages)
    return requirements
