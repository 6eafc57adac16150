"""Signals of the data engine: parts of the loop that follow routing listen without it knowing them."""
import logging

from django.dispatch import Signal

log = logging.getLogger(__name__)

# Sent after a trajectory's destination is committed.
# Arguments: trajectory_id, outcome (an Outcome value), reason (text, may be empty).
trajectory_routed = Signal()


def announce_routed(trajectory_id: int, outcome: str, reason: str = "") -> None:
    """Tell the listeners; one that fails is logged and does not undo or stop routing."""
    from flywheel.models import Trajectory

    for receiver, result in trajectory_routed.send_robust(
            sender=Trajectory, trajectory_id=trajectory_id, outcome=outcome, reason=reason):
        if isinstance(result, Exception):
            log.error("trajectory %s routed: %s failed: %r", trajectory_id, receiver, result)
