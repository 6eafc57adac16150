"""Before the first action: a task whose success check already passes is flagged, not collected.

Such a trajectory would teach nothing (or reward doing nothing), and usually means the phone was
not in the task's starting state. Its System A terminal checks are read right after the reset;
when all pass, the trajectory is flagged with the reason and ends interrupted, and the judge sends
it to a person (adjudication), never to the SFT pool.
"""
import logging

from devices.phone import PhoneUnavailable
from flywheel.judging.terminal_checks import read_and_compare
from flywheel.models import Trajectory

log = logging.getLogger(__name__)


def success_check_passes(phone, verification) -> str:
    """What the passing checks read, when every terminal check already holds; '' otherwise (no
    checks, one fails, or one cannot be read: the judge deals with an unreadable spec)."""
    checks = verification.get("terminal") if isinstance(verification, dict) else None
    if not checks or not isinstance(checks, list):
        return ""
    details = []
    for check in checks:
        try:
            passed, detail = read_and_compare(phone, check)
        except PhoneUnavailable:
            raise
        except Exception as error:  # unreadable or malformed: not a reason to stop collecting
            log.info("pre-check skipped: %s", error)
            return ""
        if not passed:
            return ""
        details.append(detail)
    return "; ".join(details)


def flag_if_already_done(trajectory: Trajectory, phone) -> str:
    """The stop reason when the task is already done before any action ('' to go on)."""
    if trajectory.steps.exists():  # a redelivered trajectory continues; it is not starting
        return ""
    passed = success_check_passes(phone, trajectory.query.verification)
    if not passed:
        return ""
    reason = f"the success check already passed before any action ({passed})"[:300]
    Trajectory.objects.filter(pk=trajectory.pk).update(flag=reason)
    trajectory.flag = reason
    log.warning("trajectory %s flagged: %s", trajectory.pk, reason)
    return f"interrupted: {reason}"[:200]
