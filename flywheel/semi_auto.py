"""The semi-automatic line (§2.3.2): the model proposes, a person verifies every step.

The session's life: take a query → lease a matching phone → reset it → for each step observe,
propose (persisted at once as a pending Step), let the person verify, execute through the
executor and its safety audit, persist the executed step (and its CPT entry) → until terminate,
call_user or clarify → the bi-directional consistency gate → the SFT pool. This module is the
engine; annotation/ holds the pages that drive it.
"""
from __future__ import annotations

import time
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from devices import leases
from devices.executor import ActionExecutor
from devices.models import Device, Lease
from devices.phone import PhoneConnection, PhoneUnavailable
from devices.profiles import satisfies
from devices.reset import ResetError, reset_phone as reset_device
from devices.uitree import page_text, parse_hierarchy

from .agent_protocol import DEFAULT_K, describe_action
from .blobs import read_blob
from .consistency import GateStep, check_bidirectional_consistency
from .cpt_cleaning import cpt_rejection
from .pool_rules import sft_intake_allowed
from .models import CptEntry, ModelVersion, Query, SftEntry, Step, Trajectory
from .policies import OFFLINE_POLICY_NAME, PolicyError, policy_for
from .stepping import measure_edit, observe, policy_state, store_observation

LEASE_TTL = timedelta(seconds=60)   # the page heartbeats every 10 s; a closed tab frees the phone
ENDING_ACTIONS = ("terminate", "call_user", "clarify")
SEMI_AUTO_INTAKE = "semi_auto_verified"
CLAIM_TIMEOUT = timedelta(minutes=2)  # a claim older than this belongs to a request that died


class SessionError(Exception):
    """Something the person must be told (no phone free, lease lost, action blocked)."""


def lease_holder(trajectory) -> str:
    return f"semi-auto:trajectory:{trajectory.pk}"


def default_policy_version() -> ModelVersion:
    version, _ = ModelVersion.objects.get_or_create(name=OFFLINE_POLICY_NAME, defaults={"kind": "offline"})
    return version


def query_requirements(query) -> dict:
    requirements = dict(query.requirements or {})
    requirements["apps"] = sorted(set(requirements.get("apps") or []) | set(query.app_packages))
    return requirements


def next_query_for(user):
    """Assigned to this person first, then the open pool; claimed atomically."""
    for candidates in (Query.objects.filter(assignee=user, status="ready"),
                       Query.objects.filter(assignee__isnull=True, status="ready")):
        for query in candidates.order_by("created_at", "key")[:50]:
            if Query.objects.filter(pk=query.pk, status="ready").update(status="in_progress", assignee=user):
                query.refresh_from_db()
                return query
    return None


def _lease_phone(query, holder, user):
    requirements = query_requirements(query)
    for device in Device.objects.filter(status="idle").order_by("adb_server", "serial"):
        if not satisfies(device.readiness_profile, requirements):
            continue
        try:
            return device, leases.acquire(device, holder=holder, user=user, ttl=LEASE_TTL,
                                          purpose=f"semi-automatic collection of {query.key}")
        except leases.LeaseRefused:
            continue
    return None, None


def reset_phone(phone: PhoneConnection, query) -> dict:
    """The query's reset spec (docs/query-format.md), through devices/reset.py."""
    return reset_device(phone, query.reset or None, apps=query.app_packages)


def start_session(query, user, model_version=None) -> Trajectory:
    """Lease a phone that satisfies the query, reset it and open a running trajectory."""
    with transaction.atomic():
        trajectory = Trajectory.objects.create(
            query=query, line="semi_auto", annotator=user, status="running",
            model_version=model_version or default_policy_version())
    device, lease = _lease_phone(query, lease_holder(trajectory), user)
    if lease is None:
        trajectory.delete()
        Query.objects.filter(pk=query.pk, status="in_progress").update(status="ready")
        raise SessionError(f"no free phone offers {', '.join(query_requirements(query)['apps'])}; "
                           "try again when one is released")
    trajectory.device = device
    trajectory.save(update_fields=["device"])
    try:
        reset_phone(PhoneConnection.for_device(device), query)
    except (PhoneUnavailable, ResetError) as error:
        interrupt(trajectory, f"reset failed: {error}")
        raise SessionError(f"the phone {device.serial} did not answer the reset: {error}") from error
    return trajectory


def live_lease(trajectory):
    if trajectory.device_id is None:
        return None
    return Lease.objects.filter(device_id=trajectory.device_id, holder=lease_holder(trajectory),
                                released_at__isnull=True, expires_at__gt=timezone.now()).first()


def keep_alive(trajectory) -> bool:
    lease = live_lease(trajectory)
    return bool(lease) and leases.heartbeat(lease, ttl=LEASE_TTL)


def release_phone(trajectory) -> None:
    for lease in Lease.objects.filter(holder=lease_holder(trajectory), released_at__isnull=True):
        leases.release(lease)


def pause(trajectory, reason="paused by the annotator") -> None:
    """The phone goes back to the pool; resume leases the same phone again."""
    if trajectory.status == "running":
        trajectory.status, trajectory.stop_reason = "paused", reason
        trajectory.save(update_fields=["status", "stop_reason"])
    release_phone(trajectory)


def resume(trajectory) -> None:
    if trajectory.status not in ("paused", "running"):
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
    trajectory.status, trajectory.stop_reason = "running", ""
    trajectory.save(update_fields=["status", "stop_reason"])


def pending_step(trajectory):
    return trajectory.steps.filter(executed_action__isnull=True).order_by("-index").first()


def prepare_step(trajectory) -> Step:
    """The step awaiting verification: observed and proposed now, persisted before anyone acts."""
    step = pending_step(trajectory)
    if step is not None:
        return step
    if live_lease(trajectory) is None:
        raise SessionError("this session no longer holds its phone (the lease expired); resume it")
    phone = PhoneConnection.for_device(trajectory.device)
    observation = observe(phone)
    index = trajectory.steps.count()
    step = Step(trajectory=trajectory, index=index)
    store_observation(step, observation)
    started = time.monotonic()
    try:
        policy = policy_for(trajectory.model_version)
        state = policy_state(trajectory, observation, k=getattr(policy, "k", DEFAULT_K))
        proposal = policy.propose(state)
        step.cot, step.proposed_action = proposal.cot, proposal.action
        step.confidence, step.model_io = proposal.confidence, proposal.model_io
    except PolicyError as error:  # the person acts by hand; the failed exchange is kept as data
        step.model_io = {**(error.model_io or {}), "error": str(error)}
        step.cot = {}
    except (ValueError, TypeError) as error:  # e.g. a model version's malformed sampling config
        step.model_io = {"error": f"the policy is misconfigured: {error}"}
        step.cot = {}
    step.timings = {**observation.timings, "propose_ms": round((time.monotonic() - started) * 1000),
                    "proposed_at": time.time(), "screen": [observation.width, observation.height]}
    try:
        with transaction.atomic():
            step.save()
    except IntegrityError:  # a second tab observed the same step first: show that one
        return pending_step(trajectory)
    return step


def execute_step(step, action: dict, cot: dict, by_hand: bool = False) -> dict:
    """Run the verified action; persist what ran, the edit and timings. Returns a summary."""
    trajectory = step.trajectory
    if step.executed_action is not None:
        raise SessionError(f"step {step.index} has already been executed")
    if trajectory.status != "running":
        raise SessionError(f"the trajectory is {trajectory.get_status_display().lower()}; resume it first")
    verify_ms = round((time.time() - step.timings.get("proposed_at", time.time())) * 1000)
    width, height = step.timings.get("screen") or (1080, 2400)
    cot = {tag: str(cot.get(tag) or "").strip() for tag in ("Observation", "Reflection", "Plan", "Decision", "Memory")}
    edit = measure_edit(step.proposed_action, action, step.cot, cot, width, height, by_hand=by_hand)
    if live_lease(trajectory) is None and action.get("action") not in ENDING_ACTIONS:
        raise SessionError("this session no longer holds its phone (the lease expired); resume it")
    # Claim the step so a double submit (two tabs, two workers) cannot run the action twice.
    now = timezone.now()
    claimed = Step.objects.filter(pk=step.pk, executed_action__isnull=True).filter(
        Q(executing_since__isnull=True) | Q(executing_since__lt=now - CLAIM_TIMEOUT)).update(executing_since=now)
    if not claimed:
        raise SessionError(f"step {step.index} is being executed already")
    phone = PhoneConnection.for_device(trajectory.device)
    executor = ActionExecutor(phone, holder=lease_holder(trajectory), device=trajectory.device)
    hierarchy = read_blob(step.hierarchy.name).decode("utf-8") if step.hierarchy else None
    try:
        result = executor.execute(action, hierarchy_xml=hierarchy)
    except Exception:
        Step.objects.filter(pk=step.pk).update(executing_since=None)
        raise
    step.audit = {"blocked": result.blocked, "reason": result.reason, "element": result.element,
                  "error": result.error, "note": result.note}
    if not result.ok:
        step.executing_since = None
        step.save(update_fields=["audit", "executing_since"])
        raise SessionError(f"blocked by the safety audit: {result.reason}" if result.blocked
                           else f"the action failed: {result.error}")
    if not edit["action_unchanged"] and "Decision" not in edit["cot_changed"]:
        # The person moved the tap or changed the action but not the words: keep [Decision]
        # describing what really ran, in pixels (label consistency, §2.3.6).
        cot["Decision"] = describe_action(result.action)
        edit["decision_regenerated"] = True
    step.executed_action, step.cot, step.edit = result.action, cot, edit
    step.timings = {**step.timings, "verify_ms": verify_ms, "execute_ms": result.timings.get("total"),
                    "executed_at": time.time()}
    rejection, phash = _cpt_cleaning(step, result.action, (width, height))
    step.audit["cpt"] = rejection or "accepted"
    with transaction.atomic():
        step.save()
        if not rejection:  # the CPT pool is fed per step, after rule-based cleaning (§2.4.3)
            CptEntry.objects.get_or_create(step=step, defaults={
                "screenshot": step.screenshot.name, "action": result.action, "phash": phash})
        if result.control and result.control.get("kind") == "take_notes":
            trajectory.memory = [*trajectory.memory, result.control["text"]]
            trajectory.save(update_fields=["memory"])
    name = result.action["action"]
    if name in ENDING_ACTIONS:
        detail = result.action.get("status") or result.action.get("question") or result.action.get("reason") or ""
        finish(trajectory, f"{name}: {detail}"[:200])
    return {"executed": result.action, "edit": edit, "finished": name in ENDING_ACTIONS}


def _cpt_cleaning(step, action, screen_size):
    previous = (CptEntry.objects.filter(step__trajectory_id=step.trajectory_id, step__index__lt=step.index)
                .order_by("-step__index").values_list("phash", flat=True).first())
    png = read_blob(step.screenshot.name) if step.screenshot else None
    return cpt_rejection(png, action, screen_size, previous_hash=previous or "")


def gate_steps(trajectory) -> list[GateStep]:
    gate = []
    for step in trajectory.steps.filter(executed_action__isnull=False).order_by("index"):
        screen = page_text(parse_hierarchy(read_blob(step.hierarchy.name).decode("utf-8"))) if step.hierarchy else ""
        edit = step.edit or {}
        # Coordinates in a [Decision] are the proposal's units unless the decision was rewritten.
        units = "pixel" if edit.get("decision_regenerated") else (step.proposed_action or {}).get("coords", "pixel")
        gate.append(GateStep(index=step.index, cot=step.cot or {}, action=step.executed_action, screen_text=screen,
                             decision_coords=units, screen=tuple(step.timings.get("screen") or ()) or None))
    return gate


def route_verified(trajectory) -> list:
    """The gate, then the SFT pool; issues are kept on the trajectory for the person to fix."""
    issues = check_bidirectional_consistency(gate_steps(trajectory))
    trajectory.consistency_issues = [{"step": issue.step_index, "rule": issue.rule, "message": issue.message}
                                     for issue in issues]
    if issues:
        trajectory.destination = ""
        trajectory.save(update_fields=["consistency_issues", "destination"])
        return issues
    with transaction.atomic():
        trajectory.verdict, trajectory.destination = "true", "sft"
        trajectory.save(update_fields=["consistency_issues", "verdict", "destination"])
        if sft_intake_allowed(SEMI_AUTO_INTAKE):  # the pool's one intake gate (pool_rules.py)
            SftEntry.objects.get_or_create(trajectory=trajectory, intake=SEMI_AUTO_INTAKE)
    return []


def finish(trajectory, stop_reason: str) -> list:
    trajectory.status, trajectory.stop_reason = "completed", stop_reason
    trajectory.finished_at = timezone.now()
    trajectory.save(update_fields=["status", "stop_reason", "finished_at"])
    release_phone(trajectory)
    Query.objects.filter(pk=trajectory.query_id).update(status="done")
    return route_verified(trajectory)


def fix_reasoning(trajectory, step_index: int, cot: dict) -> list:
    """A person corrects the reasoning the gate flagged; the gate runs again."""
    step = trajectory.steps.get(index=step_index, executed_action__isnull=False)
    before = dict(step.cot or {})
    step.cot = {**before, **{tag: str(value).strip() for tag, value in cot.items()
                             if tag in ("Observation", "Reflection", "Plan", "Decision", "Memory")}}
    step.edit = {**(step.edit or {}), "gate_fixes": [*(step.edit or {}).get("gate_fixes", []),
                                                     {"before": before, "at": time.time()}]}
    step.save(update_fields=["cot", "edit"])
    return route_verified(trajectory)


def mark_not_executable(trajectory, reason: str) -> None:
    """The task cannot be done as written: the query goes back to review with the reason."""
    trajectory.status, trajectory.stop_reason = "not_executable", reason[:200]
    trajectory.finished_at = timezone.now()
    trajectory.save(update_fields=["status", "stop_reason", "finished_at"])
    release_phone(trajectory)
    Query.objects.filter(pk=trajectory.query_id).update(status="review", status_reason=reason)


def interrupt(trajectory, reason: str) -> None:
    trajectory.status, trajectory.stop_reason = "interrupted", reason[:200]
    trajectory.finished_at = timezone.now()
    trajectory.save(update_fields=["status", "stop_reason", "finished_at"])
    release_phone(trajectory)
    Query.objects.filter(pk=trajectory.query_id, status="in_progress").update(status="ready")
