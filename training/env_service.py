"""The environment service (§3.3): reset / step / close over leased phones, for RL frameworks that
drive our phones from outside (verl's agent loop, ClawGUI, MobileWorld-style clients).

An environment is a Trajectory on the RL line with no collection run: `reset` leases a free phone,
resets it to the query's start state and the phone's recorded baseline (the reset every line uses)
and records the first observation through the one step recorder; each `step` parses the client's
model output with the protocol, executes it through the executor and its safety audit, persists it
and observes the next screen; the episode ends as the automatic line's does (terminate / call_user,
the step budget, the repeat limit, two blocked actions in a row), and the trajectory is then
judged by HTSC and routed like every other rollout. `close` ends an episode the client gives up on.

The lease's holder is `collection:trajectory:<id>`, the name the automatic lines use, so the
existing recovery (flywheel.collection.recovery.recover_interrupted) leaves a live session alone and
interrupts and routes the trajectory of a client that vanished once its lease has expired. Who
opened the session is kept on that lease (its `user`, and `[token]` / `[user:<id>]` in its
purpose): the trajectory has no owner field for a program, and `annotator` would put the session
in its owner's annotation queue. See docs/env-service.md for the HTTP side.
"""
from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from devices import health, leases
from devices.executor import ActionExecutor
from devices.models import Device, Lease
from devices.observation import Observation, observe
from devices.phone import PhoneConnection, PhoneUnavailable
from devices.reset import ResetError, reset_phone
from flywheel.collection import recorder
from flywheel.collection.engine import CollectionConfig, finish_trajectory
from flywheel.collection.launch import NOT_COLLECTABLE
from flywheel.collection.precheck import flag_if_already_done
from flywheel.models import Line, ModelVersion, Outcome, Query, Step, Trajectory
from flywheel.policies import protocol
from flywheel.policies.endpoint import state_messages
from flywheel.policies.protocol import DEFAULT_K, TAGS, ProtocolError
from flywheel.rules.repetition import same_action
from flywheel.rules.stops import Stop, StopKind, phone_gone

# The automatic line's stop conditions: the step budget, the repeat limit.
CONFIG = CollectionConfig()
MAX_UNPARSEABLE = 3           # unparseable outputs in a row on one step end the episode (a policy error)
MAX_BLOCKED_IN_A_ROW = 2      # as the automatic line: the second block in a row ends it
RETRY_AFTER_S = 15            # what a client without a free phone is told to wait
PURPOSE = "env service"
LEASE_LOST = Stop(StopKind.LEASE_LOST, "lease lost")
_OWNER = re.compile(r"^env service \[([^\]]+)\]")


class EnvError(Exception):
    """A refused request: nothing ran on a phone. `status` is the HTTP status the view answers."""

    status = 400

    def __init__(self, message: str, **extra):
        super().__init__(message)
        self.extra = extra


class Forbidden(EnvError):
    status = 403


class NotFound(EnvError):
    status = 404


class Conflict(EnvError):
    status = 409


class NoFreePhone(EnvError):
    status = 503
    retry_after = RETRY_AFTER_S


@dataclass(frozen=True)
class Principal:
    """Who drives: the service token, or a signed-in manager/admin."""

    user: object = None  # None: the token

    @property
    def key(self) -> str:
        return f"user:{self.user.pk}" if self.user is not None else "token"


def lease_ttl() -> timedelta:
    """How long a session keeps its phone without a request (every request extends it)."""
    return timedelta(seconds=settings.ENV_SERVICE_LEASE_SECONDS)


def lease_holder(trajectory_id: int) -> str:
    return f"collection:trajectory:{trajectory_id}"


# -- reset ---------------------------------------------------------------------------------------

def reset(principal: Principal, query_id: int, model_version_id: int | None = None,
          hierarchy: bool = False, k: int = DEFAULT_K) -> dict:
    """Lease a phone for the query, reset it and observe the first screen."""
    query = Query.objects.filter(pk=query_id).first()
    if query is None:
        raise NotFound(f"no query {query_id}")
    if query.evaluation_only:
        raise Forbidden(f"query {query.key} is held out for evaluation: the benchmark's tasks are never "
                        "trained on")
    if query.status in NOT_COLLECTABLE:
        raise Conflict(f"query {query.key} is {query.get_status_display().lower()}: only approved queries "
                       "are collected")
    model_version = None
    if model_version_id is not None:
        model_version = ModelVersion.objects.filter(pk=model_version_id).first()
        if model_version is None:
            raise NotFound(f"no model version {model_version_id}")
    with transaction.atomic():
        trajectory = Trajectory.objects.create(query=query, line=Line.RL, model_version=model_version,
                                               status=Trajectory.Status.RUNNING)
    device, lease = _lease_phone(trajectory, principal)
    if lease is None:
        trajectory.delete()  # nothing happened on any phone: no rollout to keep
        raise NoFreePhone(f"no free phone offers {', '.join(query.phone_requirements()['apps']) or 'this task'}; "
                          f"try again in {RETRY_AFTER_S} s")
    trajectory.device = device
    trajectory.save(update_fields=["device"])
    phone = PhoneConnection.for_device(device)
    try:
        reset_phone(phone, query.reset or None, apps=query.app_packages, baseline=device.baseline)
        already_done = flag_if_already_done(trajectory, phone)
        if already_done:
            _finish(trajectory, Stop(StopKind.ALREADY_DONE, already_done), phone)
            raise Conflict(f"the task was already done on {device.serial} before any action; trajectory "
                           f"#{trajectory.pk} goes to a person. Reset again", trajectory=trajectory.pk)
        observation = observe(phone)
    except (ResetError, PhoneUnavailable) as error:
        if isinstance(error, PhoneUnavailable):
            health.quarantine(device, by="auto", reason=f"lost in an env reset: {error}")
        _finish(trajectory, Stop(StopKind.RESET_FAILED, f"reset failed: {error}"), None)
        raise NoFreePhone(f"the phone {device.serial} failed its reset ({error}); try again",
                          trajectory=trajectory.pk) from error
    recorder.record_observation(trajectory, 0, observation)
    return {"env_id": trajectory.pk, "observation": observation_view(trajectory, 0, observation, hierarchy),
            "messages": messages_for(trajectory, observation, k),
            "limits": {"max_steps": CONFIG.max_steps, "repeat_limit": CONFIG.repeat_limit,
                       "lease_seconds": int(lease_ttl().total_seconds())}}


def _lease_phone(trajectory: Trajectory, principal: Principal):
    return leases.acquire_fitting(trajectory.query.phone_requirements(), lease_holder(trajectory.pk),
                                  user=principal.user, ttl=lease_ttl(),
                                  purpose=f"{PURPOSE} [{principal.key}] {trajectory.query.key}"[:200])


# -- step ----------------------------------------------------------------------------------------

def step(principal: Principal, env_id: int, output: str | None = None, action: dict | None = None,
         cot: dict | None = None, hierarchy: bool = False, k: int = DEFAULT_K) -> dict:
    """One action: the model's raw `output` text, or a structured `action` (with optional `cot`)."""
    trajectory = session(principal, env_id)
    require_running(trajectory)
    lease = _live_lease(trajectory)
    if lease is None or not leases.heartbeat(lease, ttl=lease_ttl()):
        _finish(trajectory, Stop(StopKind.LEASE_LOST, "lease lost: no request came within the lease"), None)
        raise Conflict(f"environment {env_id} lost its phone: no request came for "
                       f"{int(lease_ttl().total_seconds())} s. Its trajectory is judged and routed; reset a new one",
                       done=True, trajectory=trajectory.pk)
    pending = trajectory.steps.order_by("-index").first()
    if pending is None or pending.executed_action is not None:
        raise Conflict(f"environment {env_id} has no observed step waiting for an action")
    screen = tuple(pending.timings.get("screen") or (1080, 2400))
    try:
        parsed_cot, parsed_action, notes = _parse(output, action, cot, screen)
    except ProtocolError as error:
        raise _unparseable(trajectory, pending, output if output is not None else action, str(error)) from None
    try:  # claimed before the proposal is written: a second request at once cannot overwrite it
        recorder.claim_step(pending)
    except recorder.StepBusy as error:
        raise Conflict(f"{error}: one request at a time per environment") from error
    earlier_errors = (pending.model_io or {}).get("errors", [])
    pending.cot, pending.proposed_action = parsed_cot, parsed_action
    pending.model_io = {"source": PURPOSE, "output": output, "action": action, "parse_notes": notes,
                        **({"errors": earlier_errors} if earlier_errors else {})}
    pending.timings = {**pending.timings, "proposed_at": timezone.now().timestamp()}
    pending.save(update_fields=["cot", "proposed_action", "model_io", "timings"])
    phone = PhoneConnection.for_device(trajectory.device)
    executor = ActionExecutor(phone, holder=lease_holder(trajectory.pk), device=trajectory.device,
                              lease=lease, lease_ttl=lease_ttl())
    with leases.kept_alive(lease, ttl=lease_ttl()):  # a composite action may outlast the lease
        outcome = recorder.execute(pending, parsed_action, executor, claim=False)
    info = {"audit": outcome.step.audit, "executed_action": outcome.result.action if outcome.ok else None,
            "step": pending.index, "note": outcome.result.note}
    stop = _stop(trajectory, outcome)
    if stop is None:
        try:
            observation = observe(phone)
        except PhoneUnavailable as error:
            stop = _phone_lost(trajectory, error)
        else:
            index = trajectory.steps.count()
            recorder.record_observation(trajectory, index, observation, replace=False)
            return {"observation": observation_view(trajectory, index, observation, hierarchy),
                    "messages": messages_for(trajectory, observation, k), "done": False,
                    "reward": 0.0, "info": {**info, "stop_kind": "", "stop_reason": ""}}
    return _done(trajectory, stop, phone, info)


def _parse(output, action, cot, screen) -> tuple[dict, dict, list]:
    """The protocol's parser judges both forms, so a structured action means what the text would."""
    if output is not None:
        parsed = protocol.parse_output(output, screen=screen)
        return parsed.cot, parsed.action, parsed.notes
    raw = json.dumps(action, ensure_ascii=False).replace("</", "<\\/")  # a "</tool_call>" inside a text
    parsed = protocol.parse_output(f"[Observation] -\n[Plan] -\n[Decision] -\n<tool_call>{raw}</tool_call>", screen=screen)
    given = {tag: str((cot or {}).get(tag) or "").strip() for tag in TAGS}
    given["Decision"] = given["Decision"] or protocol.describe_action(parsed.action)
    return given, parsed.action, parsed.notes


def _unparseable(trajectory, pending: Step, given, message: str) -> EnvError:
    """Nothing runs; the failed exchange is kept on the step, as the automatic line keeps it. The
    client may sample again; MAX_UNPARSEABLE in a row end the episode as a policy error."""
    errors = [*(pending.model_io or {}).get("errors", []), message][-MAX_UNPARSEABLE:]
    given = given if isinstance(given, str) else json.dumps(given, ensure_ascii=False)
    model_io = {"source": PURPOSE, "given": given[:protocol.MAX_OUTPUT_CHARS], "errors": errors,
                "error": f"the model's output does not follow the protocol: {message}"}
    if not Step.objects.filter(pk=pending.pk, executed_action__isnull=True, executing_since__isnull=True).update(
            model_io=model_io, cot={}):  # never over a step another request is executing
        return Conflict(f"step {pending.index} is being executed already: one request at a time per environment")
    done = len(errors) >= MAX_UNPARSEABLE
    if done:
        _finish(trajectory, Stop(StopKind.POLICY_ERROR, f"policy error: {len(errors)} outputs in a row do not "
                                 f"follow the protocol: {message}"[:200]), PhoneConnection.for_device(trajectory.device))
    return EnvError(f"the output does not follow the protocol: {message}", done=done,
                    unparseable_in_a_row=len(errors))


def _stop(trajectory: Trajectory, outcome) -> Stop | None:
    """The automatic line's stop conditions after one action (engine.collect_steps); None: go on."""
    result = outcome.result
    if not outcome.ok:
        if result.lease_lost:
            return LEASE_LOST
        if result.phone_lost:
            return _phone_lost(trajectory, result.error)
        if not result.blocked:
            return Stop(StopKind.ACTION_FAILED, f"action failed: {result.error}"[:200])
        blocked = 0
        for earlier in trajectory.steps.order_by("-index")[:MAX_BLOCKED_IN_A_ROW]:
            if earlier.executed_action is not None or not (earlier.audit or {}).get("blocked"):
                break
            blocked += 1
        if blocked < MAX_BLOCKED_IN_A_ROW:
            return None
        return Stop(StopKind.BLOCKED, f"blocked by the safety audit: {result.reason}"[:200])
    if outcome.ends:
        return outcome.stop
    if outcome.asks:
        spec = (trajectory.query.verification or {}).get("clarify")
        answer = spec.get("answer") if isinstance(spec, dict) else None
        if not answer:  # no person waits on an RL rollout
            return Stop(StopKind.CLARIFY_UNANSWERED, "clarify: no answer from a person")
        recorder.record_answer(outcome.step, str(answer), by="spec")
        if str(answer).lower() in ("no", "cancel", "stop"):
            return Stop(StopKind.CLARIFY_STOPPED, f"clarify answered '{answer}': stopped")
    executed = [s.executed_action for s in recorder.executed_steps(trajectory)]
    if len(executed) >= CONFIG.repeat_limit and all(
            same_action(executed[-1], a) for a in executed[-CONFIG.repeat_limit:]):
        return Stop(StopKind.REPEATED_ACTIONS, f"{CONFIG.repeat_limit} repeated actions")
    if len(executed) >= CONFIG.max_steps or trajectory.steps.count() >= CONFIG.max_steps * 2:
        return Stop(StopKind.MAX_STEPS, f"maximum steps ({CONFIG.max_steps})")
    return None


def _phone_lost(trajectory: Trajectory, error) -> Stop:
    device = Device.objects.get(pk=trajectory.device_id)
    health.quarantine(device, by="auto", reason=f"lost in env session {trajectory.pk}: {error}")
    return Stop(StopKind.PHONE_LOST, f"phone lost: {error}"[:200])


def _done(trajectory: Trajectory, stop: Stop, phone, info: dict) -> dict:
    phone = None if phone_gone(stop.kind) else phone
    _finish(trajectory, stop, phone)
    trajectory.refresh_from_db(fields=["status", "verdict", "destination"])
    return {"observation": None, "messages": None, "done": True, "reward": reward_of(trajectory),
            "info": {**info, "stop_kind": stop.kind.value, "stop_reason": stop.detail, "status": trajectory.status,
                     "verdict": trajectory.verdict, "destination": trajectory.destination}}


# -- close ---------------------------------------------------------------------------------------

def close(principal: Principal, env_id: int) -> dict:
    """End the episode (judged and routed as it stands) and free the phone; again: the same answer."""
    trajectory = session(principal, env_id)
    if trajectory.status == Trajectory.Status.RUNNING:
        lease = _live_lease(trajectory)
        phone = PhoneConnection.for_device(trajectory.device) if lease is not None else None
        _finish(trajectory, Stop(StopKind.CLOSED_BY_CLIENT, "closed by the client before the agent stopped"), phone)
    else:
        _release(trajectory)
    trajectory.refresh_from_db()
    return {"trajectory": trajectory.pk, "status": trajectory.status, "stop_kind": trajectory.stop_kind,
            "stop_reason": trajectory.stop_reason,
            "verdict": trajectory.verdict, "judged": trajectory.verdict != Outcome.PENDING,
            "destination": trajectory.destination, "reward": reward_of(trajectory),
            "steps": len(recorder.executed_steps(trajectory))}


def reward_of(trajectory: Trajectory) -> float:
    """The outcome reward: 1 for an HTSC True verdict, else 0 (pending counts 0 until judged)."""
    return 1.0 if trajectory.verdict == Outcome.TRUE else 0.0


def _finish(trajectory: Trajectory, stop: Stop, phone) -> None:
    """Judge and route while the phone still shows the terminal state (System A reads it), then free it."""
    try:
        if Trajectory.objects.filter(pk=trajectory.pk, status=Trajectory.Status.RUNNING).exists():
            try:
                finish_trajectory(trajectory, stop, phone)
            except PhoneUnavailable:
                finish_trajectory(trajectory, stop, None)
    finally:
        _release(trajectory)


def _release(trajectory: Trajectory) -> None:
    for lease in Lease.objects.filter(holder=lease_holder(trajectory.pk), released_at__isnull=True):
        leases.release(lease)


# -- sessions ------------------------------------------------------------------------------------

def session(principal: Principal, env_id: int) -> Trajectory:
    """The principal's environment, or NotFound / Forbidden / Conflict (finished)."""
    trajectory = (Trajectory.objects.select_related("query", "device").filter(
        pk=env_id, line=Line.RL, run__isnull=True).first())
    opened = Lease.objects.filter(holder=lease_holder(env_id), purpose__startswith=PURPOSE + " [").order_by(
        "acquired_at").first()
    if trajectory is None or opened is None:
        raise NotFound(f"no environment {env_id}")
    match = _OWNER.match(opened.purpose)
    if match is None or match.group(1) != principal.key:
        raise Forbidden(f"environment {env_id} was opened by another client")
    return trajectory


def require_running(trajectory: Trajectory) -> None:
    if trajectory.status != Trajectory.Status.RUNNING:
        raise Conflict(f"environment {trajectory.pk} is finished ({trajectory.status}: {trajectory.stop_reason}); "
                       "reset a new one", done=True, trajectory=trajectory.pk)


def _live_lease(trajectory: Trajectory):
    return Lease.objects.live().filter(holder=lease_holder(trajectory.pk)).first()


# -- what a client sees --------------------------------------------------------------------------

def observation_view(trajectory: Trajectory, index: int, observation: Observation, hierarchy: bool) -> dict:
    """The goal alone (never the known path), the screen and where the phone is."""
    view = {"goal": trajectory.query.text, "step": index,
            "screenshot": base64.b64encode(observation.png).decode("ascii"),
            "screen_size": [observation.width, observation.height],
            "foreground": observation.foreground.get("package", ""),
            "activity": observation.foreground.get("activity", "")}
    if hierarchy:
        view["hierarchy"] = observation.hierarchy_xml
    return view


def messages_for(trajectory: Trajectory, observation: Observation, k: int) -> list[dict]:
    """The protocol's chat messages for this step, as the endpoint policy of every line sends them:
    the full text history, the last `k` screenshots, the foreground app as context."""
    return state_messages(recorder.policy_state(trajectory, observation, k=k), k=k)
