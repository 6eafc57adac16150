"""Judge a stored trajectory with HTSC and route it (§2.4.2). Nothing is ever discarded.

Every vote, the verdict and the destination are persisted as they are decided.
"""
import logging

from django.db import transaction

from devices.audit import audit, enabled_rules
from devices.phone import PhoneConnection
from devices.uitree import node_at, parse_hierarchy
from flywheel.blobs import read_blob
from flywheel.console.events import publish
from flywheel.evaluation import SystemVote
from flywheel.evaluation.destinations import route_trajectory
from flywheel.evaluation.llm_judge import judge_model_version
from flywheel.evaluation.system_a import system_a_vote
from flywheel.evaluation.system_b import system_b_vote
from flywheel.evaluation.system_c import system_c_vote
from flywheel.evaluation.trajectory_view import StepView, TrajectoryView
from flywheel.models import Line, Outcome, Step, Trajectory, Verdict, Vote
from flywheel.policies.protocol import AGENT_STOPS
from flywheel.rules.htsc import htsc_consensus

log = logging.getLogger(__name__)


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
        decision = audit(step.action, step.hierarchy, rules)
        if decision.blocked:
            return f"step {step.index}: {decision.reason}"
        if veto and step.action.get("point"):
            node = node_at(parse_hierarchy(step.hierarchy), *step.action["point"])
            for condition in veto:
                if node is not None and _veto_hit(node, condition):
                    return f"step {step.index}: {condition.get('reason') or 'veto condition'}"
    return ""


def _veto_hit(node, condition):
    text = node.all_text().lower()
    if condition.get("text") and condition["text"].lower() in text:
        return True
    return bool(condition.get("resource_id") and condition["resource_id"] == node.resource_id)


def evaluate_trajectory(trajectory: Trajectory, phone: PhoneConnection | None = None) -> Verdict:
    """Run the safety checklist and the three systems, vote, persist and route.

    `phone` is the phone still in the trajectory's terminal state (System A reads it); without
    it System A abstains.
    """
    view = trajectory_view(trajectory)
    blocked = {s.index for s in trajectory.steps.all() if (s.audit or {}).get("blocked")}
    violation = safety_checklist(view, blocked_steps=blocked)
    judge = judge_model_version()
    votes = [
        system_a_vote(phone, view.verification) if phone is not None
        else SystemVote("A", "abstain", "the phone's terminal state was not available"),
        system_b_vote(view, judge),
        system_c_vote(view, judge),
    ]
    for vote in votes:
        vote.safety_violation = violation
    outcome = htsc_consensus(*(v.vote for v in votes), safety_violation=bool(violation))
    rationale = (f"safety veto: {violation}" if violation else
                 "; ".join(f"{v.system}={v.vote}: {v.rationale}" for v in votes))
    with transaction.atomic():
        Vote.objects.bulk_create(Vote(trajectory=trajectory, system=v.system, vote=v.vote,
                                      safety_violation=v.safety_violation, rationale=v.rationale,
                                      details=v.details) for v in votes)
        verdict = Verdict.objects.create(trajectory=trajectory, outcome=outcome,
                                         safety_vetoed=bool(violation), rationale=rationale[:2000])
        route_trajectory(trajectory, outcome, reason=rationale)
        publish("verdict", trajectory=trajectory.pk, outcome=outcome)
    return verdict


def evaluate_pending(limit=100):
    """Judge finished trajectories that have no verdict yet (a crash leaves none behind)."""
    done = 0
    for trajectory in Trajectory.objects.filter(
            verdict=Outcome.PENDING, status__in=[Trajectory.Status.COMPLETED, Trajectory.Status.INTERRUPTED]).exclude(
            line=Line.SEMI_AUTO)[:limit]:
        evaluate_trajectory(trajectory)
        done += 1
    return done

