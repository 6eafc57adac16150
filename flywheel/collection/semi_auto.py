"""The semi-automatic line (§2.3.2): the model proposes, a person verifies every step.

The session's life: take a query → lease a matching phone → reset it → for each step the one step
recorder observes and proposes (persisted at once as a pending Step), the person verifies, and the
recorder executes the verified action through the executor and its safety audit, persists it and
feeds the CPT pool → until terminate or call_user (a clarify is answered by the person, who plays
the user, and the session goes on). The session's outcome is what the person states when ending it
(flywheel/rules/stated_outcome.py): a success passes the bi-directional consistency gate into the
SFT pool; a task stated infeasible passes it as a refusal sample; a failure goes to the ECDM like
any other failure. This module is the engine; annotation/ holds the pages that drive it.
"""
from __future__ import annotations

import time
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from devices import leases
from devices.actions import TERMINATE_STATUSES
from devices.executor import ActionExecutor
from devices.models import Device, Lease
from devices.observation import observe
from devices.phone import PhoneConnection, PhoneUnavailable
from devices.reset import ResetError
from devices.reset import reset_phone as reset_device
from flywheel.collection import prerequisites, recorder
from flywheel.collection.edits import measure_edit
from flywheel.judging.destinations import route_trajectory
from flywheel.models import Destination, Line, Outcome, Query, Trajectory
from flywheel.policies import PolicyError, default_policy_version, policy_for
from flywheel.policies.protocol import AGENT_STOPS, ASKING_ACTIONS, DEFAULT_K, TAGS
from flywheel.pools import sft
from flywheel.rules.stated_outcome import VERDICTS, OutcomeNotStated, Stated, needs_statement, state_outcome
from flywheel.rules.stops import Stop, StopKind
from flywheel.signals import announce_routed

LEASE_TTL = timedelta(seconds=60)   # the page heartbeats every 10 s; a closed tab frees the phone
SEMI_AUTO_INTAKE = "semi_auto_verified"
REFUSAL_INTAKE = "semi_auto_refusal"  # stated infeasible: a refusal sample
PAUSED_BY_THE_ANNOTATOR = Stop(StopKind.PAUSED, "paused by the annotator")
LEFT_THE_PAGE = Stop(StopKind.LEFT_THE_PAGE, "left the page")  # the page closed: the phone is freed at once


class SessionError(Exception):
    """Something the person must be told (no phone free, lease lost, action blocked)."""


class OutcomeUnconfirmed(SessionError):
    """An ending that is not a success, sent without the person's confirmed statement: nothing ran."""


def expected_handoff(trajectory) -> str:
    """The handover the task asks for ('call_user' at a payment screen...), or ''."""
    return str((trajectory.query.verification or {}).get("handoff") or "")


def lease_holder(trajectory) -> str:
    return f"semi-auto:trajectory:{trajectory.pk}"


def next_query_for(user):
    """Assigned to this person first, then the open pool; claimed atomically. A query held out for
    evaluation is never collected, by people either."""
    collectable = Query.objects.filter(status=Query.Status.READY, evaluation_only=False)
    for candidates in (collectable.filter(assignee=user), collectable.filter(assignee__isnull=True)):
        for query in candidates.order_by("created_at", "key")[:50]:
            if Query.objects.filter(pk=query.pk, status=Query.Status.READY).update(status=Query.Status.IN_PROGRESS, assignee=user):
                query.refresh_from_db()
                return query
    return None


def _lease_phone(query, holder, user):
    return leases.acquire_fitting(query.phone_requirements(), holder, user=user, ttl=LEASE_TTL,
                                  purpose=f"semi-automatic collection of {query.key}")


def reset_phone(phone: PhoneConnection, query, baseline: dict | None = None) -> dict:
    """The query's reset spec (docs/query-format.md), then the phone's recorded baseline."""
    return reset_device(phone, query.reset or None, apps=query.app_packages, baseline=baseline)


def start_session(query, user, model_version=None) -> Trajectory:
    """Lease a phone that satisfies the query, reset it and open a running trajectory."""
    with transaction.atomic():
        trajectory = Trajectory.objects.create(
            query=query, line=Line.SEMI_AUTO, annotator=user, status=Trajectory.Status.RUNNING,
            model_version=model_version or default_policy_version())
    device, lease = _lease_phone(query, lease_holder(trajectory), user)
    if lease is None:
        trajectory.delete()
        Query.objects.filter(pk=query.pk, status=Query.Status.IN_PROGRESS).update(status=Query.Status.READY)
        raise SessionError(f"no free phone offers {', '.join(query.phone_requirements()['apps'])}; "
                           "try again when one is released")
    trajectory.device = device
    trajectory.save(update_fields=["device"])
    phone = PhoneConnection.for_device(device)
    try:
        reset_phone(phone, query, baseline=device.baseline)
        unmet = prerequisites.prepare(trajectory, phone, ActionExecutor(
            phone, holder=lease_holder(trajectory), device=device, lease=lease, lease_ttl=LEASE_TTL), device)
    except (PhoneUnavailable, ResetError) as error:
        interrupt(trajectory, Stop(StopKind.RESET_FAILED, f"reset failed: {error}"))
        raise SessionError(f"the phone {device.serial} did not answer the reset: {error}") from error
    if unmet is not None:
        # As on every line: not executable, never judged; the query goes to review with the reason
        # (a recipe to add, or an account no phone holds), so the queue does not hand it out again.
        mark_not_executable(trajectory, unmet.detail, stop_kind=StopKind.PREREQUISITE_UNMET)
        raise SessionError(f"{query.key} cannot start: {unmet.detail}. It went back to review.")
    return trajectory


def live_lease(trajectory):
    if trajectory.device_id is None:
        return None
    return Lease.objects.live().filter(device_id=trajectory.device_id, holder=lease_holder(trajectory)).first()


def keep_alive(trajectory) -> bool:
    lease = live_lease(trajectory)
    return bool(lease) and leases.heartbeat(lease, ttl=LEASE_TTL)


def release_phone(trajectory) -> None:
    for lease in Lease.objects.filter(holder=lease_holder(trajectory), released_at__isnull=True):
        leases.release(lease)


def pause(trajectory, stop: Stop = PAUSED_BY_THE_ANNOTATOR) -> None:
    """The phone goes back to the pool; resume leases the same phone again."""
    if trajectory.status == Trajectory.Status.RUNNING:
        trajectory.status, trajectory.stop_kind, trajectory.stop_reason = "paused", stop.kind, stop.detail
        trajectory.save(update_fields=["status", "stop_kind", "stop_reason"])
    release_phone(trajectory)


def resume(trajectory) -> None:
    if trajectory.status not in (Trajectory.Status.PAUSED, Trajectory.Status.RUNNING):
        raise SessionError(f"trajectory #{trajectory.pk} is {trajectory.get_status_display().lower()}")
    if live_lease(trajectory) is None:
        device = Device.objects.get(pk=trajectory.device_id)
        try:
            leases.acquire(device, holder=lease_holder(trajectory), user=trajectory.annotator, ttl=LEASE_TTL,
                           purpose=f"semi-automatic collection of {trajectory.query.key}")
        except leases.LeaseRefused as error:
            raise SessionError(f"cannot resume: {error}") from error
        # The screen may have changed while the phone was away: observe it afresh.
        trajectory.steps.filter(executed_action__isnull=True).delete()
    trajectory.status, trajectory.stop_kind, trajectory.stop_reason = "running", "", ""
    trajectory.save(update_fields=["status", "stop_kind", "stop_reason"])


def pending_step(trajectory):
    return trajectory.steps.filter(executed_action__isnull=True).order_by("-index").first()


def prepare_step(trajectory):
    """The step awaiting verification: observed and proposed now, persisted before anyone acts."""
    step = pending_step(trajectory)
    if step is not None:
        return step
    lease = live_lease(trajectory)
    if lease is None:
        raise SessionError("this session no longer holds its phone (the lease expired); resume it")
    observation = observe(PhoneConnection.for_device(trajectory.device))
    step = recorder.record_observation(trajectory, trajectory.steps.count(), observation, replace=False)
    if step is None:  # a second tab observed the same step first: show that one
        return pending_step(trajectory)
    try:
        policy = policy_for(trajectory.model_version)
        with leases.kept_alive(lease, ttl=LEASE_TTL):  # a model call may outlast the page's heartbeats
            recorder.propose(step, observation, policy, k=getattr(policy, "k", DEFAULT_K))
    except PolicyError:
        pass  # kept on the step (model_io); the person chooses the action by hand
    except ValueError as error:  # e.g. an endpoint model version without a usable URL
        step.model_io = {"error": f"the policy is misconfigured: {error}"}
        step.save(update_fields=["model_io"])
    return step


def execute_step(step, action: dict, cot: dict, by_hand: bool = False, reply: str = "",
                 stated: str = "", stated_reason: str = "", by=None) -> dict:
    """Run the verified action; persist what ran, the edit and timings. Returns a summary.

    `reply` is the person's answer, as the user, when the action is a clarify. An action that ends
    the session in anything but a success needs `stated` ("failure" or "infeasible", with an
    optional `stated_reason`): the person `by` (the annotator by default) states the outcome.
    """
    trajectory = step.trajectory
    if step.executed_action is not None:
        raise SessionError(f"step {step.index} has already been executed")
    if trajectory.status != Trajectory.Status.RUNNING:
        raise SessionError(f"the trajectory is {trajectory.get_status_display().lower()}; resume it first")
    name = action.get("action")
    if name in ASKING_ACTIONS and not str(reply or "").strip():
        raise SessionError("a clarify waits for the user's answer: give the answer the user would give")
    statement = None
    if name != "terminate" or action.get("status") in TERMINATE_STATUSES:  # else the executor says what is wrong
        try:
            statement = state_outcome(action, expected_handoff(trajectory), stated, stated_reason)
        except OutcomeNotStated as error:
            raise OutcomeUnconfirmed(str(error)) from error
    verify_ms = round((time.time() - step.timings.get("proposed_at", time.time())) * 1000)
    width, height = step.timings.get("screen") or (1080, 2400)
    cot = {tag: str(cot.get(tag) or "").strip() for tag in TAGS}
    edit = measure_edit(step.proposed_action, action, step.cot, cot, width, height, by_hand=by_hand)
    lease = live_lease(trajectory)
    if lease is None and name not in AGENT_STOPS:  # ending or asking touches no phone
        raise SessionError("this session no longer holds its phone (the lease expired); resume it")
    # The executor confirms the lease before each input and audits each one on the screen as it is
    # then, not on the stored dump the person looked at.
    executor = ActionExecutor(PhoneConnection.for_device(trajectory.device), holder=lease_holder(trajectory),
                              device=trajectory.device, lease=lease, lease_ttl=LEASE_TTL)
    try:
        outcome = recorder.execute(step, action, executor, cot=cot, edit=edit, timings={"verify_ms": verify_ms})
    except recorder.StepBusy as error:
        raise SessionError(str(error)) from error
    if not outcome.ok:
        if outcome.result.lease_lost:
            raise SessionError("this session no longer holds its phone (the lease expired); resume it")
        raise SessionError(f"blocked by the safety audit: {outcome.result.reason}" if outcome.result.blocked
                           else f"the action failed: {outcome.result.error}")
    if outcome.asks:
        recorder.record_answer(outcome.step, str(reply).strip(), by="annotator")
    if outcome.ends:
        finish(trajectory, outcome.stop, statement or (Stated.FAILURE, ""), by=by or trajectory.annotator)
    return {"executed": outcome.result.action, "edit": outcome.step.edit, "finished": outcome.ends}


def stated_outcome_of(trajectory) -> str:
    """What the person stated; for a session ended before outcomes were stated, what its last
    action says, a non-success ending counting as a failure (never filed as a success)."""
    if trajectory.stated_outcome:
        return trajectory.stated_outcome
    last = trajectory.steps.filter(executed_action__isnull=False).order_by("-index").first()
    action = last.executed_action if last else None
    return Stated.FAILURE if needs_statement(action, expected_handoff(trajectory)) else Stated.SUCCESS


def _stated_words(trajectory) -> str:
    who = trajectory.stated_by.get_username() if trajectory.stated_by_id else "the annotator's ending"
    return f"stated by {who}"


def route_verified(trajectory) -> list:
    """Route what the person stated: a failure to the ECDM (the gate is for the SFT pool only); a
    success, or a task stated infeasible (a refusal sample), through the gate into the SFT pool.
    Gate issues are kept on the trajectory for the person to fix."""
    stated = stated_outcome_of(trajectory)
    if stated == Stated.FAILURE:
        with transaction.atomic():
            trajectory.consistency_issues = []
            trajectory.save(update_fields=["consistency_issues"])
            route_trajectory(trajectory, Outcome.FALSE, _stated_words(trajectory))
        return []
    # The person is this line's regenerator: the gate's findings go back to them, nothing rewritten.
    gate = sft.run_gate(trajectory)
    issues = gate.issues
    trajectory.consistency_issues = [{"step": issue.step_index, "rule": issue.rule, "message": issue.message}
                                     for issue in issues]
    outcome = VERDICTS[Stated(stated)]
    if issues:
        trajectory.verdict, trajectory.destination = outcome, Destination.NONE
        trajectory.save(update_fields=["consistency_issues", "verdict", "destination"])
        return issues
    intake = REFUSAL_INTAKE if stated == Stated.INFEASIBLE else SEMI_AUTO_INTAKE
    with transaction.atomic():
        trajectory.verdict, trajectory.destination = outcome, Destination.SFT
        trajectory.save(update_fields=["consistency_issues", "verdict", "destination"])
        sft.admit(trajectory, intake, gate)  # the pool's one door (flywheel/pools/sft.py)
        trajectory_id, words = trajectory.pk, _stated_words(trajectory)
        transaction.on_commit(lambda: announce_routed(trajectory_id, outcome, words))
    return []


def finish(trajectory, stop: Stop, statement: tuple | None = None, by=None) -> list:
    """End the session with the outcome the person `by` stated ((Stated, reason)), then route it."""
    release_phone(trajectory)
    now = timezone.now()
    with transaction.atomic():
        trajectory.status, trajectory.stop_kind, trajectory.stop_reason = "completed", stop.kind, stop.detail
        trajectory.finished_at = now
        fields = ["status", "stop_kind", "stop_reason", "finished_at"]
        if statement is not None:
            stated, reason = statement
            trajectory.stated_outcome, trajectory.stated_reason = stated, reason
            trajectory.stated_by, trajectory.stated_at = by, now
            trajectory.verdict = VERDICTS[Stated(stated)]
            fields += ["stated_outcome", "stated_reason", "stated_by", "stated_at", "verdict"]
        trajectory.save(update_fields=fields)
        Query.objects.filter(pk=trajectory.query_id).update(status=Query.Status.DONE)
        return route_verified(trajectory)


def fix_reasoning(trajectory, step_index: int, cot: dict) -> list:
    """A person corrects the reasoning the gate flagged; the gate runs again."""
    step = trajectory.steps.get(index=step_index, executed_action__isnull=False)
    before = dict(step.cot or {})
    step.cot = {**before, **{tag: str(value).strip() for tag, value in cot.items() if tag in TAGS}}
    step.edit = {**(step.edit or {}), "gate_fixes": [*(step.edit or {}).get("gate_fixes", []),
                                                     {"before": before, "at": time.time()}]}
    step.save(update_fields=["cot", "edit"])
    return route_verified(trajectory)


def mark_not_executable(trajectory, reason: str, stop_kind: StopKind = StopKind.NOT_EXECUTABLE) -> None:
    """The task cannot be done as written: the query goes back to review with the reason."""
    trajectory.status, trajectory.stop_kind, trajectory.stop_reason = "not_executable", stop_kind, reason[:200]
    trajectory.finished_at = timezone.now()
    trajectory.save(update_fields=["status", "stop_kind", "stop_reason", "finished_at"])
    release_phone(trajectory)
    Query.objects.filter(pk=trajectory.query_id).update(status=Query.Status.REVIEW, status_reason=reason)


def interrupt(trajectory, stop: Stop) -> None:
    trajectory.status, trajectory.stop_kind, trajectory.stop_reason = "interrupted", stop.kind, stop.detail[:200]
    trajectory.finished_at = timezone.now()
    trajectory.save(update_fields=["status", "stop_kind", "stop_reason", "finished_at"])
    release_phone(trajectory)
    Query.objects.filter(pk=trajectory.query_id, status=Query.Status.IN_PROGRESS).update(status=Query.Status.READY)
