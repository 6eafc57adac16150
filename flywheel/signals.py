"""Signals of the data engine: parts of the loop that follow routing listen without it knowing them."""
import logging

from django.dispatch import Signal

from flywheel.models import CollectionRun, Trajectory

log = logging.getLogger(__name__)

# Sent after a trajectory's destination is committed.
# Arguments: trajectory_id, outcome (an Outcome value), reason (text, may be empty).
trajectory_routed = Signal()


def announce_routed(trajectory_id: int, outcome: str, reason: str = "") -> None:
    """Tell the listeners; one that fails is logged and does not undo or stop routing."""
    for receiver, result in trajectory_routed.send_robust(
            sender=Trajectory, trajectory_id=trajectory_id, outcome=outcome, reason=reason):
        if isinstance(result, Exception):
            log.error("trajectory %s routed: %s failed: %r", trajectory_id, receiver, result)


# Sent after a collection run's progress is counted (its status may just have become done).
# Arguments: run_id, line.
run_progressed = Signal()


def announce_progress(run_id: int, line: str) -> None:
    for receiver, result in run_progressed.send_robust(sender=CollectionRun, run_id=run_id, line=line):
        if isinstance(result, Exception):
            log.error("run %s progressed: %s failed: %r", run_id, receiver, result)
