"""The human repair queue (§2.5.2 step-level correction, its human fallback): the repairs the
Teacher could not make (low confidence, a hard scenario, a Teacher that failed) wait here for an
annotator, who sets the right action on the frozen screenshot with its five-tag reasoning.

A claim is a lock with an expiry, like the adjudication queue's (annotation/adjudication.py): two
people never repair one step, and an abandoned claim frees itself. A submitted correction goes
through flywheel.repair.step_correction.apply_correction (by "human"), which writes the "prefix +
single-step correction" sample into the SFT pool (intake `ecdm_repaired`) and queues the prefix
replay. A repair a person cannot make is marked failed with their reason; nothing is deleted.
"""
import struct
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from devices.actions import ActionError, normalize_action
from flywheel.access import IN_REPAIR_QUEUE
from flywheel.blobs import read_blob
from flywheel.models import Repair
from flywheel.policies.protocol import REQUIRED_TAGS, TAGS

CLAIM_TTL = timedelta(minutes=10)
DEFAULT_SCREEN = (1080, 2400)
MAX_REASONING = 2000        # characters per tag
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class ClaimRefused(Exception):
    """Someone else holds the repair, or it no longer waits for a person."""


class RepairRejected(ValueError):
    """A correction (or a refusal) that cannot be recorded as sent; the message says why."""


def waiting_for_repair():
    """Repairs waiting for a person, oldest first."""
    return Repair.objects.filter(IN_REPAIR_QUEUE).order_by("created_at", "pk")


def _claim_is_live(repair, now=None) -> bool:
    now = now or timezone.now()
    return bool(repair.claimed_by_id and repair.claimed_until and repair.claimed_until > now)


def holder(repair):
    """Who is repairing it now (a live claim on a repair still waiting), else None."""
    if repair.status == Repair.Status.NEEDS_HUMAN and _claim_is_live(repair):
        return repair.claimed_by
    return None


def claim(repair_id, user):
    """Lock the repair for `user` (or extend their lock); refuse if someone else holds it or it no
    longer waits for a person. Raises Repair.DoesNotExist for an unknown id."""
    with transaction.atomic():
        repair = Repair.objects.select_for_update().get(pk=repair_id)
        if repair.status != Repair.Status.NEEDS_HUMAN:
            raise ClaimRefused(f"this repair is no longer waiting for a person ({repair.get_status_display().lower()})")
        now = timezone.now()
        if repair.claimed_by_id not in (None, user.pk) and _claim_is_live(repair, now):
            raise ClaimRefused(f"{repair.claimed_by} is repairing it until "
                               f"{timezone.localtime(repair.claimed_until):%H:%M}")
        repair.claimed_by, repair.claimed_until = user, now + CLAIM_TTL
        repair.save(update_fields=["claimed_by", "claimed_until"])
        return repair


def next_for(user, exclude=()):
    """The user's own live claim, else the oldest unclaimed repair, claimed for them (None if the
    queue is empty). `exclude`: repairs just skipped, so skipping moves on."""
    now = timezone.now()
    waiting = waiting_for_repair().exclude(pk__in=list(exclude))
    mine = waiting.filter(claimed_by=user, claimed_until__gt=now).first()
    if mine:
        return mine
    free = waiting.filter(Q(claimed_by__isnull=True) | Q(claimed_until__isnull=True) | Q(claimed_until__lte=now))
    for repair in free[:20]:
        try:
            return claim(repair.pk, user)
        except ClaimRefused:  # taken between the listing and the lock
            continue
    return None


def release(repair_id, user) -> bool:
    """Give the repair back to the queue untouched (the S key: skip it for now)."""
    return bool(Repair.objects.filter(pk=repair_id, claimed_by=user, status=Repair.Status.NEEDS_HUMAN)
                .update(claimed_by=None, claimed_until=None))


# -- what the person repairs --------------------------------------------------------------------

def wrong_step_index(repair, steps=None):
    """The step to correct: the repair's, else its attribution's first wrong step, else the last
    step (where the trajectory stopped); None for a trajectory without steps."""
    if repair.step_index is not None:
        return repair.step_index
    if repair.attribution_id and repair.attribution.first_bad_step is not None:
        return repair.attribution.first_bad_step
    indexes = [s.index for s in steps] if steps is not None else list(
        repair.trajectory.steps.values_list("index", flat=True))
    return max(indexes) if indexes else None


def screen_size(step):
    """The frozen screen's size in pixels: what the step recorded, else the PNG's header."""
    if step is None:
        return DEFAULT_SCREEN
    recorded = (step.timings or {}).get("screen")
    if (isinstance(recorded, (list, tuple)) and len(recorded) == 2
            and all(isinstance(v, int) and v > 0 for v in recorded)):
        return tuple(recorded)
    if step.screenshot:
        try:
            header = read_blob(step.screenshot.name)[:24]
            if header[:8] == PNG_MAGIC:
                width, height = struct.unpack(">II", header[16:24])
                if width > 0 and height > 0:
                    return width, height
        except (OSError, struct.error, ValueError):
            pass
    return DEFAULT_SCREEN


def in_pixels(action, width, height):
    """An action with its points in on-screen pixels for drawing, or None when it is not one."""
    try:
        return normalize_action(action, width, height)
    except (ActionError, TypeError, ValueError):
        return None


def five_tags(cot) -> dict:
    """The five tags of any stored reasoning (keys in any case), every tag present."""
    found = {str(k).strip().lower(): v for k, v in (cot or {}).items()} if isinstance(cot, dict) else {}
    return {tag: str(found.get(tag.lower()) or "").strip() for tag in TAGS}


def validate_correction(action, cot, width, height, wrong_action=None):
    """The person's action and reasoning, checked (EditError style: RepairRejected with a clear
    message, never a crash): one of the 14 actions with points on the screen, not the very action
    that went wrong, and reasoning under the five tags with Observation, Plan and Decision filled.
    Returns (action in pixels, cot with all five tags)."""
    if not isinstance(action, dict):
        raise RepairRejected("send the corrected action as a JSON object, e.g. {\"action\": \"click\", \"point\": [x, y]}")
    try:
        checked = normalize_action(action, width, height)
    except ActionError as error:
        raise RepairRejected(f"the corrected action's {error.field}: {error.message}") from error
    wrong = in_pixels(wrong_action, width, height) if isinstance(wrong_action, dict) else None
    if wrong is not None and _same_action(wrong, checked):
        raise RepairRejected("that is the action that went wrong at this step: set the right one, "
                             "or say why the step cannot be repaired")
    if cot is None:
        cot = {}
    if not isinstance(cot, dict):
        raise RepairRejected("send the reasoning as an object of the five tags: " + ", ".join(TAGS))
    unknown = sorted(str(k) for k in cot if str(k).strip().lower() not in {t.lower() for t in TAGS})
    if unknown:
        raise RepairRejected(f"unknown reasoning tag {unknown[0]!r}; the tags are {', '.join(TAGS)}")
    for key, value in cot.items():
        if value is not None and not isinstance(value, str):
            raise RepairRejected(f"[{key}] must be text")
        if value and len(value) > MAX_REASONING:
            raise RepairRejected(f"[{key}] is longer than {MAX_REASONING} characters")
    tags = five_tags(cot)
    missing = [tag for tag in REQUIRED_TAGS if not tags[tag]]
    if missing:
        raise RepairRejected(f"the reasoning needs {', '.join(missing)}: say what the screen shows, "
                             "the plan, and the decision that this action carries out")
    return checked, tags


def _same_action(a, b) -> bool:
    strip = ("note", "coords", "duration_ms", "direction")
    return {k: v for k, v in a.items() if k not in strip} == {k: v for k, v in b.items() if k not in strip}


# -- the person's answer ------------------------------------------------------------------------

def submit(repair_id, user, action, cot, step=None):
    """Record the person's correction of the wrong step: checked here, then written by
    flywheel.repair.step_correction.apply_correction (by "human"), which makes the sample and
    queues the replay. Raises ClaimRefused (someone else holds it, it is done, or `step` is not
    the step this repair corrects any more) or RepairRejected (a bad action or reasoning)."""
    from flywheel.repair import step_correction

    with transaction.atomic():
        repair = claim(repair_id, user)
        index = wrong_step_index(repair)
        if index is None:
            raise RepairRejected("this trajectory has no steps to correct: say why it cannot be repaired")
        if step is not None and step != index:
            raise ClaimRefused(f"this repair now corrects step {index}, not step {step}; reload the page")
        frozen = repair.trajectory.steps.filter(index=index).first()
        if frozen is None:
            raise RepairRejected(f"this trajectory has no step {index} to correct: say why it cannot be repaired")
        width, height = screen_size(frozen)
        wrong = frozen.executed_action or frozen.proposed_action
        checked, tags = validate_correction(action, cot, width, height, wrong)
        if repair.step_index is None:
            repair.step_index = index
            repair.save(update_fields=["step_index"])
        try:
            repair = step_correction.apply_correction(repair, checked, tags, by="human", user=user)
        except ValueError as error:  # the correction's own validation: a bad request, not a crash
            raise RepairRejected(str(error)) from error
        Repair.objects.filter(pk=repair_id).update(claimed_until=None)
    repair.refresh_from_db()
    return repair


def cannot_repair(repair_id, user, reason):
    """The person cannot repair it (the screen is unreadable, the task was never possible, the
    step was in fact right...): the repair fails with their reason, kept with everything it had."""
    reason = (reason or "").strip()
    if not reason:
        raise RepairRejected("say why it cannot be repaired; the ledger keeps the reason")
    with transaction.atomic():
        repair = claim(repair_id, user)
        repair.status = Repair.Status.FAILED
        repair.reason = f"a person could not repair it: {reason}"[:2000]
        repair.claimed_until = None
        repair.finished_at = timezone.now()
        repair.save(update_fields=["status", "reason", "claimed_until", "finished_at"])
    return repair


skip = cannot_repair  # the contract's other name for it (the S key only releases; see release)
