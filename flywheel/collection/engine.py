"""One trajectory on one leased phone: observe → decide → act until a stop condition (§2.3.3).

Every step is written as it happens (idempotently, keyed by trajectory and index), every executed
step feeds the CPT pool, and the finished — or interrupted — trajectory is judged and routed.
"""
import logging
import random
import time
from dataclasses import dataclass, field

from django.utils import timezone

from devices import leases
from devices.anomalies import maybe_inject
from devices.executor import ActionExecutor
from devices.phone import PhoneConnection, PhoneUnavailable
from devices.reset import ResetError, reset_phone

from ..cpt_pool import feed_cpt_pool
from ..evaluation.pipeline import evaluate_trajectory
from ..models import Step, Trajectory
from ..policies import PolicyError
from ..repetition import repetition_mask, same_action
from ..stepping import observe, policy_state, store_observation
from .schema import SchemaGuidedPolicy

log = logging.getLogger(__name__)
ENDING = ("terminate", "call_user")
# Stop reasons that cut a trajectory short (it is still judged and routed, never dropped).
INTERRUPTING = ("cancelled", "lease lost", "phone lost", "policy error", "reset failed", "action failed",
                "interrupted", "clarify: no answer")


@dataclass
class CollectionConfig:
    max_steps: int = 25
    timeout_s: float = 300
    repeat_limit: int = 4              # this many identical actions in a row end the trajectory
    screenshots_k: int = 5
    clarify_wait_s: float = 300        # how long a held clarification waits for a person
    anomaly_rates: dict = field(default_factory=dict)
    seed: int = 0

    @classmethod
    def from_dict(cls, data: dict | None):
        data = dict(data or {})
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


class PhoneLost(Exception):
    """The phone stopped answering mid-trajectory (quarantine it, re-queue the query)."""


def write_step(trajectory, index, **fields) -> Step:
    """Idempotent: a redelivered task rewrites the same (trajectory, index), never a duplicate."""
    step, _ = Step.objects.update_or_create(trajectory=trajectory, index=index, defaults=fields)
    return step


def wait_for_a_person(step, config, lease, lease_ttl, should_stop):
    """Hold the phone while a person answers the policy's question on the run page."""
    Step.objects.filter(pk=step.pk).update(edit={"clarify_pending": step.executed_action.get("question", "")})
    deadline = time.monotonic() + config.clarify_wait_s
    while time.monotonic() < deadline and not should_stop():
        answer = (Step.objects.get(pk=step.pk).edit or {}).get("clarify_answer")
        if answer:
            return answer
        if lease is not None:
            leases.heartbeat(lease, ttl=lease_ttl)
        time.sleep(0.5)
    return None


def run_trajectory(trajectory: Trajectory, phone: PhoneConnection, policy, config: CollectionConfig,
                   lease=None, should_stop=lambda: False, device=None, lease_ttl=leases.DEFAULT_TTL) -> str:
    """Drive the phone for this trajectory; return the stop reason. Raises PhoneLost."""
    query = trajectory.query
    schema_line = trajectory.line == "schema"
    if schema_line:
        policy = SchemaGuidedPolicy(policy)
    clarify_spec = (query.verification or {}).get("clarify")
    executor = ActionExecutor(phone, holder=f"collection:trajectory:{trajectory.pk}", device=device,
                              seed=config.seed)
    rng = random.Random(f"{config.seed}:{trajectory.pk}")
    started, executed, blocked_in_a_row = time.monotonic(), [], 0
    try:
        reset_phone(phone, query.reset or None, apps=query.app_packages)
        index = trajectory.steps.count()  # a redelivered task continues after what is stored
        while True:
            if should_stop():
                return "cancelled"
            if len(executed) >= config.max_steps or index >= config.max_steps * 2:
                return f"maximum steps ({config.max_steps})"
            if time.monotonic() - started > config.timeout_s:
                return f"timeout ({config.timeout_s:.0f} s)"
            if lease is not None and not leases.heartbeat(lease, ttl=lease_ttl):
                return "lease lost"
            step_started = time.monotonic()
            anomaly = maybe_inject(phone, config.anomaly_rates, rng) if config.anomaly_rates else None
            observation = observe(phone)
            step = Step(trajectory=trajectory, index=index)
            store_observation(step, observation)
            fields = {"screenshot": step.screenshot.name, "hierarchy": step.hierarchy.name,
                      "foreground_package": step.foreground_package, "activity_stack": step.activity_stack,
                      "anomaly": anomaly, "timings": dict(observation.timings)}
            step = write_step(trajectory, index, **fields)
            propose_started = time.monotonic()
            try:
                proposal = policy.propose(policy_state(trajectory, observation, k=config.screenshots_k))
            except PolicyError as error:
                write_step(trajectory, index, model_io={**(error.model_io or {}), "error": str(error)})
                return f"policy error: {error}"[:200]
            result = executor.execute(proposal.action, hierarchy_xml=observation.hierarchy_xml)
            timings = {**fields["timings"], "propose_ms": round((time.monotonic() - propose_started) * 1000),
                       **{f"{k}_ms": v for k, v in result.timings.items()}}
            step_fields = {"cot": proposal.cot, "proposed_action": proposal.action,
                           "confidence": proposal.confidence, "model_io": proposal.model_io,
                           "audit": {"blocked": result.blocked, "reason": result.reason,
                                     "element": result.element, "error": result.error, "note": result.note},
                           "timings": timings}
            if not result.ok:
                write_step(trajectory, index, **step_fields)
                index += 1
                if result.phone_lost:
                    raise PhoneLost(result.error)
                blocked_in_a_row = blocked_in_a_row + 1 if result.blocked else 0
                if blocked_in_a_row >= 2:
                    return f"blocked by the safety audit: {result.reason}"[:200]
                if not result.blocked:
                    return f"action failed: {result.error}"[:200]
                continue
            blocked_in_a_row = 0
            step = write_step(trajectory, index, executed_action=result.action, **step_fields)
            step.audit["cpt"] = feed_cpt_pool(step, result.action, (observation.width, observation.height))
            step.timings["step_ms"] = round((time.monotonic() - step_started) * 1000)
            Step.objects.filter(pk=step.pk).update(audit=step.audit, timings=step.timings)
            executed.append(result.action)
            index += 1
            name = result.action["action"]
            if result.control and result.control.get("kind") == "take_notes":
                trajectory.memory = [*trajectory.memory, result.control["text"]]
                trajectory.save(update_fields=["memory"])
            if name in ENDING:
                detail = result.action.get("status") or result.action.get("reason") or ""
                return f"{name}: {detail}".strip(": ")
            if name == "clarify":
                answer = (clarify_spec or {}).get("answer") if isinstance(clarify_spec, dict) else None
                if answer:
                    Step.objects.filter(pk=step.pk).update(edit={"clarify_answer": answer, "by": "spec"})
                else:
                    answer = wait_for_a_person(step, config, lease, lease_ttl, should_stop)
                    if answer is None:
                        return "clarify: no answer from a person"
                if str(answer).lower() in ("no", "cancel", "stop"):
                    return f"clarify answered '{answer}': stopped"
            if len(executed) >= config.repeat_limit and all(
                    same_action(executed[-1], a) for a in executed[-config.repeat_limit:]):
                return f"{config.repeat_limit} repeated actions"
    except PhoneUnavailable as error:
        raise PhoneLost(str(error)) from error
    except ResetError as error:
        return f"reset failed: {error}"


def finish_trajectory(trajectory: Trajectory, stop_reason: str, phone: PhoneConnection | None):
    """Record how it ended, mask repeated steps, then judge and route it (nothing is dropped)."""
    status = "interrupted" if stop_reason.startswith(INTERRUPTING) else "completed"
    Trajectory.objects.filter(pk=trajectory.pk).update(status=status, stop_reason=stop_reason[:200],
                                                       finished_at=timezone.now())
    trajectory.status, trajectory.stop_reason = status, stop_reason
    steps = list(trajectory.steps.filter(executed_action__isnull=False).order_by("index"))
    for step, masked in zip(steps, repetition_mask([s.executed_action for s in steps])):
        if step.label_masked != masked:
            Step.objects.filter(pk=step.pk).update(label_masked=masked)
    try:
        return evaluate_trajectory(trajectory, phone=phone)
    except PhoneUnavailable:
        return evaluate_trajectory(trajectory, phone=None)
