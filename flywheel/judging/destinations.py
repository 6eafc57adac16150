"""Where a judged trajectory goes: exactly one recorded destination per trajectory (§2.4.2).

True → SFT pool (through its intake's consistency gate, flywheel/pools/sft.py); False → ECDM queue; Env_ERROR → environment self-healing, re-collection of the
query, and the ECDM; Undetermined → the adjudication queue. An RL rollout's group is metabolised
again whenever one of its verdicts arrives (a re-collection judged, a person's decision).

The destination is written in the caller's transaction; what touches the world (the phone's
health check, telling dashboards and the listeners of `trajectory_routed`) runs after commit, never
under a lock. Routing does not know the stages that follow it: re-collection of an Env_ERROR query
(flywheel.collection.recollection), coverage, GEM feedback and the ECDM listen to the signal
(connected in flywheel/apps.py).
"""
from django.db import transaction
from django.utils import timezone

from devices import health
from devices.models import Device
from flywheel.events import publish
from flywheel.models import Destination, Line, Outcome, Trajectory
from flywheel.pools import sft
from flywheel.pools.rl import metabolize_group
from flywheel.rules.environment import ENV_ERRORS_BEFORE_QUARANTINE, quarantine_after_env_errors
from flywheel.rules.htsc import route_outcome
from flywheel.rules.pools import sft_intake_allowed
from flywheel.signals import announce_routed


def route_trajectory(trajectory: Trajectory, outcome: str, reason: str = "",
                     intake: str = "htsc_true") -> str:
    destination = route_outcome(outcome)
    gate = None
    if destination == Destination.SFT:
        if not sft_intake_allowed(intake):
            raise ValueError(f"{intake!r} may not enter the SFT pool")
        gate = sft.run_gate(trajectory)  # reads dumps: before the transaction
    with transaction.atomic():
        Trajectory.objects.filter(pk=trajectory.pk).update(
            verdict=outcome, destination=destination,
            finished_at=trajectory.finished_at or timezone.now())
        trajectory.verdict, trajectory.destination = outcome, destination
        trajectory_id = trajectory.pk
        if destination == Destination.SFT:
            sft.admit(trajectory, intake, gate)  # the consistency gate, every line's one door
        elif destination == Destination.ENV_HEALING:
            transaction.on_commit(lambda: heal_environment(trajectory_id, reason))
        publish("routing", trajectory=trajectory.pk, outcome=outcome, destination=destination)
        transaction.on_commit(lambda: announce_routed(trajectory_id, outcome, reason))
        if trajectory.line == Line.RL and trajectory.run_id:
            # After the listeners: an Env_ERROR's re-collection is queued, so the group waits for it.
            run_id, query_id = trajectory.run_id, trajectory.query_id
            transaction.on_commit(lambda: _metabolize_rl_group(run_id, query_id))
    return destination


def heal_environment(trajectory_id: int, reason: str):
    """Check the phone and quarantine it when Env_ERROR repeats there (the query is collected
    again by the re-collection listener of `trajectory_routed`, sent after this).

    The phone's global settings go back to its recorded baseline at the next reset, before any
    task starts on it; re-collection runs on whichever healthy phone pulls the work first.
    """
    trajectory = Trajectory.objects.select_related("device").get(pk=trajectory_id)
    device = trajectory.device
    if device is not None:
        recent = list(Trajectory.objects.filter(device=device).exclude(verdict=Outcome.PENDING)
                      .order_by("-finished_at", "-pk")
                      .values_list("verdict", flat=True)[:ENV_ERRORS_BEFORE_QUARANTINE])
        if quarantine_after_env_errors(recent):
            health.quarantine(device, by="auto", reason=f"{len(recent)} Env_ERROR trajectories in a row")
        elif device.status != Device.Status.QUARANTINED:
            health.check_device(Device.objects.get(pk=device.pk))


def _metabolize_rl_group(run_id: int, query_id: int):
    metabolize_group(run_id, query_id)
