"""One trajectory on one leased phone: observe → decide → act until a stop condition (§2.3.3).

Each step goes through the one step recorder (recorder.py); the finished — or interrupted —
trajectory is judged and routed. The step loop (collect_steps) is the one loop of the automatic
lines: the ECDM's replay (flywheel/repair/replay.py) continues a corrected prefix with it too. How a
trajectory stopped is a Stop: its kind (flywheel/rules/stops.py) beside the words a person reads.
"""
import logging
import random
import time
from dataclasses import dataclass, field

from django.utils import timezone

from devices import leases
from devices.anomaly_injection import maybe_inject
from devices.db_pool import release_connection
from devices.executor import ActionExecutor
from devices.observation import observe
from devices.phone import PhoneConnection, PhoneUnavailable
from devices.reset import ResetError, reset_phone
from flywheel.collection import prerequisites, recorder
from flywheel.collection.precheck import flag_if_already_done
from flywheel.collection.schema_guided import SchemaGuidedPolicy
from flywheel.collection.takeover import takeover_for
from flywheel.judging.pipeline import evaluate_trajectory
from flywheel.models import Line, Step, Trajectory
from flywheel.policies import PolicyError
from flywheel.rules.repetition import repetition_mask, same_action
from flywheel.rules.stops import Stop, StopKind, interrupts
from flywheel.rules.takeover import DEFAULT_AFTER, DEFAULT_STEPS, DEFAULT_THRESHOLD

log = logging.getLogger(__name__)
# Lines whose trajectories another app judges instead of HTSC routing: the benchmark scores its own
# and none of them may enter a pool (benchmark/apps.py registers its finisher here).
FINISHERS: dict = {}
LEASE_LOST = Stop(StopKind.LEASE_LOST, "lease lost")


@dataclass
class CollectionConfig:
    max_steps: int = 25
    timeout_s: float = 300
    repeat_limit: int = 4              # this many identical actions in a row end the trajectory
    screenshots_k: int = 5
    clarify_wait_s: float = 300        # how long a held clarification waits for a person
    anomaly_rates: dict = field(default_factory=dict)
    seed: int = 0
    # Teacher takeover (Xiaomi-GUI-0 §3.4, takeover.py): after K low step scores in a row the Teacher
    # acts for at most M steps. The automatic line only; K = 0 turns it off.
    teacher_takeover_after: int = DEFAULT_AFTER
    teacher_takeover_steps: int = DEFAULT_STEPS
    teacher_takeover_threshold: float = DEFAULT_THRESHOLD

    @classmethod
    def from_dict(cls, data: dict | None):
        data = dict(data or {})
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


class PhoneLost(Exception):
    """The phone stopped answering mid-trajectory (quarantine it, re-queue the query)."""


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
        release_connection()  # pooled, a person's minutes must not hold one the host's phones write with
        time.sleep(0.5)
    return None


def answer_clarify(step, query, config, lease, lease_ttl, should_stop, people_answer=True):
    """The query's spec answers when it can; otherwise a person on the run page (when one may)."""
    spec = (query.verification or {}).get("clarify")
    answer = spec.get("answer") if isinstance(spec, dict) else None
    if answer:
        recorder.record_answer(step, answer, by="spec")
        return answer
    return wait_for_a_person(step, config, lease, lease_ttl, should_stop) if people_answer else None


def run_trajectory(trajectory: Trajectory, phone: PhoneConnection, policy, config: CollectionConfig,
                   lease=None, should_stop=lambda: False, device=None, lease_ttl=leases.DEFAULT_TTL) -> Stop:
    """Reset the phone, then drive it for this trajectory; return how it stopped. Raises PhoneLost."""
    query = trajectory.query
    if trajectory.line == Line.SCHEMA:
        policy = SchemaGuidedPolicy(policy)
    # With the lease, the executor confirms it right before every input: a lost lease never acts.
    executor = ActionExecutor(phone, holder=f"collection:trajectory:{trajectory.pk}", device=device,
                              seed=config.seed, lease=lease, lease_ttl=lease_ttl)
    started = time.monotonic()
    if lease is not None and not leases.heartbeat(lease, ttl=lease_ttl):
        return LEASE_LOST  # the reset acts on the phone too
    try:
        reset_phone(phone, query.reset or None, apps=query.app_packages,
                    baseline=device.baseline if device is not None else None)
        if query.prerequisites and (unmet := prerequisites.prepare(trajectory, phone, executor, device)):
            return unmet
        if already_done := flag_if_already_done(trajectory, phone):
            return Stop(StopKind.ALREADY_DONE, already_done)
    except PhoneUnavailable as error:
        raise PhoneLost(str(error)) from error
    except ResetError as error:
        return Stop(StopKind.RESET_FAILED, f"reset failed: {error}")
    # A redelivered task continues after what is stored.
    return collect_steps(trajectory, phone, policy, config, executor, trajectory.steps.count(), lease=lease,
                         should_stop=should_stop, lease_ttl=lease_ttl, started=started)


def collect_steps(trajectory: Trajectory, phone: PhoneConnection, policy, config: CollectionConfig,
                  executor: ActionExecutor, index: int, executed: list | None = None, lease=None,
                  should_stop=lambda: False, lease_ttl=leases.DEFAULT_TTL, started: float | None = None,
                  people_answer: bool = True) -> Stop:
    """The step loop of every automatic line, from step `index` on a phone already in place: observe,
    propose, execute through the one step recorder until a stop condition; return how it stopped.

    `executed`: the actions that already count toward the step budget and the repeat limit (the
    ECDM's replayed prefix); `started` (monotonic): when the time budget began; `people_answer`:
    whether a clarify the spec does not answer waits for a person (a repair worker does not).
    Raises PhoneLost."""
    query = trajectory.query
    rng = random.Random(f"{config.seed}:{trajectory.pk}")
    takeover = takeover_for(trajectory, config)  # None off the automatic line
    executed = list(executed or [])
    started = time.monotonic() if started is None else started
    blocked_in_a_row = 0
    try:
        while True:
            if should_stop():
                return Stop(StopKind.CANCELLED, "cancelled")
            if len(executed) >= config.max_steps or index >= config.max_steps * 2:
                return Stop(StopKind.MAX_STEPS, f"maximum steps ({config.max_steps})")
            if time.monotonic() - started > config.timeout_s:
                return Stop(StopKind.TIMEOUT, f"timeout ({config.timeout_s:.0f} s)")
            if lease is not None and not leases.heartbeat(lease, ttl=lease_ttl):
                return LEASE_LOST
            release_connection()  # the screen capture below needs none: pooled, another phone writes
            step_started = time.monotonic()
            # A model call may outlast the lease (3 tries of 60 s against a 60 s lease), and so may
            # a slow screen capture or a composite action: a background heartbeat keeps it meanwhile.
            with leases.kept_alive(lease, ttl=lease_ttl) as keeper:
                anomaly = maybe_inject(phone, config.anomaly_rates, rng) if config.anomaly_rates else None
                observation = observe(phone)
                step = recorder.record_observation(trajectory, index, observation, anomaly=anomaly)
                index += 1
                proposal = takeover.propose(step, observation, config.screenshots_k) if (
                    takeover is not None and takeover.active) else None
                if proposal is None:
                    try:
                        proposal = recorder.propose(step, observation, policy, k=config.screenshots_k)
                    except PolicyError as error:
                        return policy_error_stop(error)
                    if takeover is not None:
                        takeover.score(step, observation, proposal)
                if keeper.lost:
                    return LEASE_LOST
                outcome = recorder.execute(step, proposal.action, executor, hierarchy_xml=observation.hierarchy_xml,
                                           step_started=step_started, claim=False)
            release_connection()  # while the phone shows the next screen, another phone of this host writes
            if not outcome.ok:
                if outcome.result.lease_lost:
                    return LEASE_LOST
                if outcome.result.phone_lost:
                    raise PhoneLost(outcome.result.error)
                if not outcome.result.blocked:
                    return Stop(StopKind.ACTION_FAILED, f"action failed: {outcome.result.error}"[:200])
                blocked_in_a_row += 1
                if blocked_in_a_row >= 2:
                    return Stop(StopKind.BLOCKED, f"blocked by the safety audit: {outcome.result.reason}"[:200])
                continue  # the policy gets another look at the same screen
            blocked_in_a_row = 0
            executed.append(outcome.result.action)
            if takeover is not None:
                takeover.executed(observation, outcome.result.action)
            if outcome.ends:
                return outcome.stop
            if outcome.asks:
                answer = answer_clarify(step, query, config, lease, lease_ttl, should_stop, people_answer)
                if answer is None:
                    return Stop(StopKind.CLARIFY_UNANSWERED, "clarify: no answer from a person"
                                + ("" if people_answer else " (replay)"))
                if str(answer).lower() in ("no", "cancel", "stop"):
                    return Stop(StopKind.CLARIFY_STOPPED, f"clarify answered '{answer}': stopped")
            if len(executed) >= config.repeat_limit and all(
                    same_action(executed[-1], a) for a in executed[-config.repeat_limit:]):
                return Stop(StopKind.REPEATED_ACTIONS, f"{config.repeat_limit} repeated actions")
    except PhoneUnavailable as error:
        raise PhoneLost(str(error)) from error


def policy_error_stop(error: PolicyError) -> Stop:
    """A proposal that failed: the model endpoint failing is a fact of its own (the benchmark pauses
    on it), apart from a policy that answered nothing usable."""
    kind = StopKind.ENDPOINT_FAILED if error.endpoint_failed else StopKind.POLICY_ERROR
    return Stop(kind, f"policy error: {error}"[:200])


def crashed(error: Exception) -> Stop:
    """Whatever broke in the collection code: the trajectory so far is still judged and routed."""
    return Stop(StopKind.CRASHED, f"interrupted: {type(error).__name__}: {error}")


def finish_trajectory(trajectory: Trajectory, stop: Stop, phone: PhoneConnection | None):
    """Record how it ended, mask repeated steps, then judge and route it (nothing is dropped)."""
    if not end_trajectory(trajectory, stop):
        return None
    return route_ended(trajectory, phone)


def end_trajectory(trajectory: Trajectory, stop: Stop) -> bool:
    """Record how it ended; False when it had ended already: recovery routed it while its worker
    was cut off (a host that lost its link, a worker that was replaced), and routing it again
    would judge it twice."""
    status = Trajectory.Status.INTERRUPTED if interrupts(stop.kind) else Trajectory.Status.COMPLETED
    if stop.kind == StopKind.PREREQUISITE_UNMET:
        status = Trajectory.Status.NOT_EXECUTABLE  # nothing the model did: never judged as a failure
    reason = stop.detail[:200]
    if not Trajectory.objects.filter(pk=trajectory.pk, status=Trajectory.Status.RUNNING).update(
            status=status, stop_kind=stop.kind, stop_reason=reason, finished_at=timezone.now()):
        trajectory.refresh_from_db(fields=["status", "stop_kind", "stop_reason"])
        return False
    trajectory.status, trajectory.stop_kind, trajectory.stop_reason = status, stop.kind, reason
    return True


def route_ended(trajectory: Trajectory, phone: PhoneConnection | None):
    """Mask repeated steps, then judge and route the ended trajectory."""
    steps = recorder.executed_steps(trajectory)
    for step, masked in zip(steps, repetition_mask([s.executed_action for s in steps])):
        if step.label_masked != masked:
            Step.objects.filter(pk=step.pk).update(label_masked=masked)
    if trajectory.line in FINISHERS:
        return FINISHERS[trajectory.line](trajectory, phone)
    if trajectory.status == Trajectory.Status.NOT_EXECUTABLE:
        return None  # its prerequisites were not met: the model never acted; the stop reason says why
    try:
        return evaluate_trajectory(trajectory, phone=phone)
    except PhoneUnavailable:
        return evaluate_trajectory(trajectory, phone=None)
