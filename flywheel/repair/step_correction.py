"""Step-level correction (§2.5.2): keep steps 1..N−1, let the Teacher rewrite step N from its
context (screenshot, goal, history), and fall back to a person when the Teacher is unsure, the
scenario is hard, or the Teacher fails.

    correct_step(repair)       Teacher first; low confidence / hard scenario / failure → needs_human
    apply_correction(...)      the one writer of a correction (Teacher or person): validates the
                               action, writes the "prefix + single-step correction" sample into the
                               SFT pool, then (after commit) queues the replay on a phone
    replay_and_continue(id)    the Celery task's body (flywheel.tasks.repair_replay): replay.py

The Teacher is flywheel/policies/teacher.py (teacher_for, Teacher.correct, context_for_step); its
names are looked up when first called, so this module imports whatever state that one is in.
"""
from __future__ import annotations

import json
import logging

from django.conf import settings
from django.db import transaction

from accounts import history
from devices.actions import RESOLVED_FIELDS, ActionError, normalize_action
from devices.uitree import all_nodes, node_at, page_text, parse_hierarchy
from flywheel import jobs
from flywheel.models import Repair, Step
from flywheel.policies.protocol import describe_action
from flywheel.policies.teacher import context_for_step, teacher_for
from flywheel.repair.explanations import explain_correction
from flywheel.repair.replay import replay_and_continue as replay_prefix
from flywheel.repair.samples import clean_cot, make_sample
from flywheel.repair.screens import (
    has_screenshot,
    missing_screenshots,
    no_screenshot_reason,
    screen_of,
    stored_hierarchy,
)
from flywheel.rules.human_repair import hard_scenario, route_to_human_repair
from flywheel.rules.repetition import same_action

log = logging.getLogger(__name__)
OPEN = (Repair.Status.PENDING, Repair.Status.NEEDS_HUMAN)


def min_confidence() -> float:
    return settings.ECDM_TEACHER_MIN_CONFIDENCE


# -- what the stored step shows ----------------------------------------------------------------------

def hard_scenario_of(step: Step) -> str:
    """The report's hard scenarios, read from the stored step (rules/human_repair.py)."""
    roots = parse_hierarchy(stored_hierarchy(step))
    kind = str((step.anomaly or {}).get("kind") or "")
    return hard_scenario(has_screenshot(step), sum(1 for _ in all_nodes(roots)), page_text(roots), kind)


def wrong_action_of(step: Step) -> dict | None:
    return step.executed_action or step.proposed_action


def validated_action(action, step: Step, reject_wrong: bool = True) -> dict:
    """The action in on-screen pixels of step N's screen; ValueError with a clear message when it is
    not one of the 14 actions (Table 3) as the executor would run it, or (`reject_wrong`) when it is
    the action that went wrong there."""
    if not isinstance(action, dict):
        raise ValueError(f"the corrected action must be a JSON object, not {type(action).__name__}")
    try:
        action = normalize_action({k: v for k, v in action.items() if k not in RESOLVED_FIELDS}, *screen_of(step))
    except ActionError as error:
        raise ValueError(f"the corrected action is not valid: {error}") from error
    wrong = wrong_action_of(step) if reject_wrong else None
    if wrong and same_action(action, wrong):
        raise ValueError(f"this is the action that went wrong at step {step.index}: choose another one, "
                         "or mark the repair as impossible")
    return action


def decision_label(action: dict, step: Step) -> str | None:
    point = action.get("point")
    if not isinstance(point, list) or len(point) != 2:
        return None
    node = node_at(parse_hierarchy(stored_hierarchy(step)), int(point[0]), int(point[1]))
    label = (node.all_text() if node else "").strip()
    return label[:60] or None


def jsonable(value):
    """The Teacher's model_io as stored JSON (bytes and odd objects become text)."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


# -- the path -------------------------------------------------------------------------------------

def to_human(repair: Repair, reason: str, teacher_output: dict | None = None) -> Repair:
    """The human repair queue takes it (nothing is lost: the Teacher's attempt is kept)."""
    fields = {"status": Repair.Status.NEEDS_HUMAN, "human_fallback": True, "human_reason": reason[:300]}
    if teacher_output is not None:
        fields.update(teacher_output=jsonable(teacher_output), confidence=teacher_output.get("confidence"))
    Repair.objects.filter(pk=repair.pk, status__in=OPEN).update(**fields)
    repair.refresh_from_db()
    return repair


def fail(repair: Repair, reason: str) -> Repair:
    Repair.objects.filter(pk=repair.pk, status__in=OPEN).update(status=Repair.Status.FAILED, reason=reason)
    repair.refresh_from_db()
    return repair


def correct_step(repair: Repair) -> Repair:
    """The Teacher rewrites step N; a person takes what the Teacher cannot be trusted with."""
    original, index = repair.trajectory, repair.step_index
    if index is None:
        return fail(repair, "the attribution located no wrong step to correct")
    step = original.steps.filter(index=index).first()
    if step is None:
        return fail(repair, f"step {index} of trajectory #{original.pk} is not stored")
    missing = missing_screenshots(original, index)
    if missing:
        return to_human(repair, no_screenshot_reason(missing))
    hard = hard_scenario_of(step)
    context = context_for_step(original, index)
    if context is None:
        return to_human(repair, f"step {index}: the Teacher has no context (no screenshot or dump stored)")
    name = "teacher"
    try:
        teacher = teacher_for()
        name = getattr(teacher, "name", type(teacher).__name__)
        answer = teacher.correct(context)
    except Exception as error:  # TeacherFailed (timeout, garbage) or a broken Teacher: a person takes it
        reason = getattr(error, "reason", "") or f"{type(error).__name__}: {error}"
        log.info("repair %s: the Teacher failed: %s", repair.pk, reason)
        return to_human(repair, f"the Teacher failed: {reason}",
                        {"source": name, "error": str(reason)[:500], "model_io": getattr(error, "model_io", None)})
    output = {"action": answer.action, "cot": clean_cot(answer.cot), "confidence": answer.confidence,
              "source": getattr(answer, "source", "") or name, "rationale": getattr(answer, "rationale", ""),
              "model_io": getattr(answer, "model_io", None)}
    try:
        action = validated_action(answer.action, step)
    except ValueError as error:
        return to_human(repair, f"the Teacher's answer was not usable: {error}", output)
    reason = route_to_human_repair(answer.confidence, min_confidence(), hard)
    if reason:
        return to_human(repair, reason, output)
    Repair.objects.filter(pk=repair.pk).update(teacher_output=jsonable(output), confidence=answer.confidence)
    return apply_correction(repair, action, output["cot"], by="teacher")


def apply_correction(repair: Repair, action: dict, cot: dict, by: str, user=None) -> Repair:
    """Write the corrected step N on its frozen screen: the sample (prefix + correction) enters the
    SFT pool as `ecdm_repaired`, the repair is done, and the replay on a phone is queued after
    commit. The corrected step's [Reflection] says why the original was wrong (explanations.py: a
    person's reason, the Teacher's, else the attribution's evidence); the structured explanation is
    kept on the correction and the sample's step. ValueError (clear message) for a bad action or a
    repair that is not open."""
    if by not in ("teacher", "human"):
        raise ValueError("a correction is written by the teacher or a human")
    index = repair.step_index
    if index is None:
        raise ValueError("this repair has no step to correct")
    step = repair.trajectory.steps.filter(index=index).first()
    if step is None or not step.screenshot:
        raise ValueError(f"step {index} has no stored screenshot: there is no frozen screen to correct on")
    action = validated_action(action, step)
    cot = clean_cot(cot)
    if not cot["Decision"]:
        cot["Decision"] = describe_action(action, decision_label(action, step))
    # Why step N was wrong (Xiaomi-GUI-0 §3.4): the sample learns it in its [Reflection].
    explanation = explain_correction(repair, step, action, cot, by)
    cot["Reflection"] = explanation["text"]
    replay = replay_plan(repair)
    with transaction.atomic():
        locked = Repair.objects.select_for_update().get(pk=repair.pk)
        if locked.status not in OPEN or locked.sample_id:
            raise ValueError(f"this repair is {locked.get_status_display().lower()} already")
        make_sample(repair.trajectory, locked, keep_until=index,
                    final_step={"index": index, "screenshot": step.screenshot.name, "hierarchy": step.hierarchy.name,
                                "action": action, "cot": cot, "edit": {"by": by, "explanation": explanation}})
        correction = {"action": action, "cot": cot, "by": by, "explanation": explanation}
        Repair.objects.filter(pk=repair.pk).update(
            correction=correction, repaired_by=user, claimed_by=None, claimed_until=None, replay=replay)
        history.record(locked, {"correction": (json.dumps(locked.correction, sort_keys=True),
                                               json.dumps(correction, sort_keys=True)),
                                "repaired_by": (locked.repaired_by_id, getattr(user, "pk", None))},
                       actor=user if by == "human" else "Teacher")
        if replay["status"] == "queued":
            repair_id = repair.pk
            transaction.on_commit(lambda: queue_replay(repair_id))
    repair.refresh_from_db()
    return repair


def replay_plan(repair: Repair) -> dict:
    """Only a step correction is replayed: the screen of an interruption (a pop-up) or of RQA's
    reached state does not come back by replaying the prefix."""
    if repair.path != Repair.Path.STEP:
        return {"status": "skipped", "reason": f"{repair.get_path_display()} is not replayed: the screen it was "
                                               "made on does not come back by replaying the prefix"}
    if not settings.ECDM_REPLAY:
        return {"status": "skipped", "reason": "replay is turned off (ECDM_REPLAY)"}
    return {"status": "queued"}


def queue_replay(repair_id: int) -> None:
    """After commit: the repair worker replays the prefix on a phone (flywheel.tasks.repair_replay)."""
    task = jobs.find(jobs.REPAIR_REPLAY)
    if task is None:
        Repair.objects.filter(pk=repair_id).update(replay={"status": "skipped", "reason": "no replay task"})
        return
    task.delay(repair_id)


def replay_and_continue(repair_id: int) -> dict:
    """Replay the kept prefix on a phone, run the correction, collect the continuation (replay.py)."""
    return replay_prefix(repair_id)
