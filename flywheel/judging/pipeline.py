"""Judge a stored trajectory with HTSC and route it (§2.4.2). Nothing is ever discarded.

Every vote, the verdict and the destination are persisted as they are decided.
"""
import logging
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from devices.audit import audit, enabled_rules
from devices.db_pool import release_connection
from devices.phone import PhoneConnection, PhoneUnavailable
from devices.uitree import node_at, parse_hierarchy
from flywheel.blobs import read_blob
from flywheel.events import publish
from flywheel.judging import SystemVote, system_b, system_c
from flywheel.judging.destinations import route_trajectory
from flywheel.judging.llm_judge import judge_model_version
from flywheel.judging.system_a import system_a_vote
from flywheel.judging.trajectory_view import StepView, TrajectoryView
from flywheel.models import Line, Outcome, Step, Trajectory, Verdict, Vote
from flywheel.policies.protocol import AGENT_STOPS
from flywheel.rules.htsc import htsc_consensus
from flywheel.screens.blindness import hierarchy_is_blind
from flywheel.screens.ocr_candidates import pixel_candidates, png_size

log = logging.getLogger(__name__)
# A judge that has held a trajectory this long died; another may take it over.
JUDGING_CLAIM_TTL = timedelta(minutes=15)
# The sweep leaves a trajectory this long to the run that collected it (which still has the phone).
SWEEP_GRACE = timedelta(minutes=2)


def _hierarchy(step: Step) -> str:
    if not step.hierarchy:
        return ""
    try:
        return read_blob(step.hierarchy.name).decode("utf-8", "replace")
    except OSError:
        log.warning("hierarchy %s of step %s is missing", step.hierarchy.name, step.pk)
        return ""


def _screenshot_loader(step: Step):
    if not step.screenshot:
        return None
    name = step.screenshot.name
    return lambda: read_blob(name)


def trajectory_view(trajectory: Trajectory) -> TrajectoryView:
    steps = [StepView(index=s.index, hierarchy=_hierarchy(s), action=s.executed_action,
                      cot=s.cot or {}, package=s.foreground_package, masked=s.label_masked,
                      screenshot=_screenshot_loader(s))
             for s in trajectory.steps.order_by("index")]
    last = steps[-1] if steps else None
    final = last.hierarchy if last and (last.action or {}).get("action") in AGENT_STOPS else ""
    query = trajectory.query
    return TrajectoryView(goal=query.text, steps=steps, final_hierarchy=final,
                          verification=query.verification or {}, known_path=query.known_path)


def safety_checklist(view: TrajectoryView, rules=None, blocked_steps=()) -> str:
    """Stage 1, shared by all three systems: the first safety violation, or ''.

    An action the audit blocked during collection still counts: the policy attempted it.
    """
    rules = enabled_rules() if rules is None else rules
    veto = (view.verification or {}).get("veto") or []
    for step in view.steps:
        if step.index in blocked_steps:
            return f"step {step.index}: attempted an action the safety audit blocked"
        if not step.action:
            continue
        seen = pixel_nodes(step)
        decision = audit(step.action, step.hierarchy, rules, seen)
        if decision.blocked:
            return f"step {step.index}: {decision.reason}"
        if veto and step.action.get("point"):
            node = node_at([*parse_hierarchy(step.hierarchy), *seen], *step.action["point"])
            for condition in veto:
                if node is not None and _veto_hit(node, condition):
                    return f"step {step.index}: {condition.get('reason') or 'veto condition'}"
    return ""


def pixel_nodes(step) -> list:
    """On a screen whose dump is blind, the lines of words its frame shows, as nodes the audit's rules
    and the veto conditions can read (a "Pay now" a web view draws); none where the dump is readable
    or the frame cannot be read."""
    if not step.screenshot or not hierarchy_is_blind(step.hierarchy):
        return []
    try:
        png = step.screenshot()
    except OSError:
        return []
    size = png_size(png) if png else None
    return pixel_candidates(step.hierarchy, png, size).nodes if size else []


def _veto_hit(node, condition):
    text = node.all_text().lower()
    if condition.get("text") and condition["text"].lower() in text:
        return True
    return bool(condition.get("resource_id") and condition["resource_id"] == node.resource_id)


def claim_for_judging(trajectory: Trajectory, now=None, take_over=False):
    """Take the one right to judge this trajectory (a conditional update): the run's own call and
    the beat sweep may both try; the first wins. A claim older than JUDGING_CLAIM_TTL belongs to a
    judge that died and may be taken over; `take_over` takes it at once (recovery knows the judge
    is gone: its lease on the phone ended). Returns the claim (its time), or None."""
    now = now or timezone.now()
    claimable = Trajectory.objects.filter(pk=trajectory.pk, verdict=Outcome.PENDING)
    if not take_over:
        claimable = claimable.filter(Q(judging_since__isnull=True) | Q(judging_since__lt=now - JUDGING_CLAIM_TTL))
    return now if claimable.update(judging_since=now) == 1 else None


def _claim_still_held(trajectory: Trajectory, claim) -> bool:
    """In the verdict's transaction: is the claim still this judge's? A judge that was cut off (its
    host lost its link) and came back after recovery took its trajectory over writes nothing."""
    if claim is None:
        return True
    held = Trajectory.objects.select_for_update().filter(pk=trajectory.pk, verdict=Outcome.PENDING,
                                                         judging_since=claim).exists()
    if not held:
        log.warning("trajectory %s was taken over by another judge meanwhile; this verdict is dropped", trajectory.pk)
    return held


def evaluate_trajectory(trajectory: Trajectory, phone: PhoneConnection | None = None,
                        take_over: bool = False) -> Verdict | None:
    """Judge and route the trajectory once: None when another judge holds it or has judged it.

    `phone` is the phone still in the trajectory's terminal state (System A reads it); without
    it System A abstains. A trajectory that cannot be judged (a malformed verification spec, a
    judge that breaks) or that carries a flag goes to a person with the reason, never lost.
    """
    claim = claim_for_judging(trajectory, take_over=take_over)
    if claim is None:
        log.info("trajectory %s is judged elsewhere; not judging it again", trajectory.pk)
        return None
    trajectory.refresh_from_db(fields=["flag", "verdict", "stop_kind", "stop_reason", "status"])
    if trajectory.flag:
        return flag_for_people(trajectory, trajectory.flag, claim=claim)
    try:
        try:
            return _judge(trajectory, phone, claim)
        except PhoneUnavailable:
            if phone is None:
                raise
            return _judge(trajectory, None, claim)  # the phone left: judge what was recorded
    except (DatabaseError, SoftTimeLimitExceeded):
        # The database or the task's time, not the trajectory, failed: the next sweep takes it.
        Trajectory.objects.filter(pk=trajectory.pk, verdict=Outcome.PENDING, judging_since=claim).update(
            judging_since=None)
        raise
    except Exception as error:
        log.exception("trajectory %s could not be judged", trajectory.pk)
        return flag_for_people(trajectory, f"not judged: {type(error).__name__}: {error}", claim=claim)


def flag_for_people(trajectory: Trajectory, reason: str, claim=None) -> Verdict | None:
    """No HTSC verdict: record why and send it to human adjudication (never to SFT)."""
    reason = reason[:300]
    with transaction.atomic():
        if not _claim_still_held(trajectory, claim):
            return None
        Trajectory.objects.filter(pk=trajectory.pk).update(flag=reason)
        trajectory.flag = reason
        verdict = Verdict.objects.create(trajectory=trajectory, outcome=Outcome.UNDETERMINED,
                                         rationale=f"flagged for a person: {reason}")
        route_trajectory(trajectory, Outcome.UNDETERMINED, reason=reason)
        publish("verdict", trajectory=trajectory.pk, outcome=Outcome.UNDETERMINED)
    return verdict


def _judge(trajectory: Trajectory, phone: PhoneConnection | None, claim=None) -> Verdict | None:
    """Run the safety checklist and the three systems, vote, persist and route."""
    view = trajectory_view(trajectory)
    blocked = {s.index for s in trajectory.steps.all() if (s.audit or {}).get("blocked")}
    violation = safety_checklist(view, blocked_steps=blocked)
    judge = judge_model_version()
    thresholds_b, thresholds_c = system_b.calibrated_thresholds(), system_c.calibrated_thresholds()
    # The votes read no database: pooled, their seconds (a phone read, OCR, model calls) hold no
    # connection the host's phones and lease keepers need (held, a loaded host lost its leases).
    release_connection()
    votes = [
        system_a_vote(phone, view.verification) if phone is not None
        else SystemVote("A", "abstain", "the phone's terminal state was not available"),
        system_b.system_b_vote(view, judge, thresholds=thresholds_b),
        system_c.system_c_vote(view, judge, thresholds=thresholds_c),
    ]
    for vote in votes:
        vote.safety_violation = violation
    outcome = htsc_consensus(*(v.vote for v in votes), safety_violation=bool(violation))
    rationale = (f"safety veto: {violation}" if violation else
                 "; ".join(f"{v.system}={v.vote}: {v.rationale}" for v in votes))
    with transaction.atomic():
        if not _claim_still_held(trajectory, claim):
            return None
        Vote.objects.bulk_create(Vote(trajectory=trajectory, system=v.system, vote=v.vote,
                                      safety_violation=v.safety_violation, rationale=v.rationale,
                                      details=v.details) for v in votes)
        verdict = Verdict.objects.create(trajectory=trajectory, outcome=outcome,
                                         safety_vetoed=bool(violation), rationale=rationale[:2000])
        route_trajectory(trajectory, outcome, reason=rationale)
        publish("verdict", trajectory=trajectory.pk, outcome=outcome)
    return verdict


def evaluate_pending(limit=100, older_than=SWEEP_GRACE):
    """Judge finished trajectories that have no verdict yet (a crash leaves none behind).

    Fresh ones are left to the run that collected them for `older_than` (it still has the phone,
    so System A can read the terminal state). One trajectory that breaks does not stop the rest.
    """
    now = timezone.now()
    waiting = (Trajectory.objects.filter(verdict=Outcome.PENDING, status__in=[
        Trajectory.Status.COMPLETED, Trajectory.Status.INTERRUPTED]).exclude(line__in=[Line.SEMI_AUTO, Line.BENCHMARK])
        .filter(Q(finished_at__isnull=True) | Q(finished_at__lte=now - older_than))
        .filter(Q(judging_since__isnull=True) | Q(judging_since__lt=now - JUDGING_CLAIM_TTL))
        .order_by("finished_at", "pk"))
    judged = failed = 0
    for trajectory in waiting[:limit]:
        try:
            if evaluate_trajectory(trajectory) is not None:
                judged += 1
        except SoftTimeLimitExceeded:
            log.warning("sweep: out of time after %d trajectories; the next sweep goes on", judged)
            break
        except Exception:  # e.g. the database: the claim was given back; the next sweep retries
            log.exception("sweep: trajectory %s left for the next sweep", trajectory.pk)
            failed += 1
    return {"judged": judged, "failed": failed}
