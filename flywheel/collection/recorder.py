"""The one step recorder of every collection line (§2.3): observe → propose → audit → execute →
persist → feed CPT → memory.

The automatic lines (engine.py) call it in a loop; the semi-automatic line (semi_auto.py) calls it
across requests: observe and propose when the page asks for the next step, execute when the person
confirms. Each stage is written to the Step as soon as it happens, so a crash at any point leaves
an honest record: an observed step without a proposal, a proposal that never ran, an action that
ran with its audit.
"""
from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from devices.db_pool import release_connection
from devices.executor import ActionExecutor, ActionResult
from devices.observation import Observation
from flywheel.blobs import read_blob, store_blob
from flywheel.collection.step_writer import StepWrite, active_writer
from flywheel.events import publish
from flywheel.models import CptEntry, Line, Step, Trajectory
from flywheel.policies import PolicyError
from flywheel.policies.base import PolicyState, Proposal
from flywheel.policies.protocol import ASKING_ACTIONS, ENDING_ACTIONS, TAGS, HistoryEntry, describe_action
from flywheel.pools.cpt import cpt_cleaning_verdict
from flywheel.rules.stops import Stop, agent_stop
from flywheel.step_memo import NextStepMemo

# A claim older than this belongs to a request or worker that died: the step may run again.
CLAIM_TIMEOUT = timedelta(minutes=2)


class StepBusy(Exception):
    """The step has run, or another request is running it: an action never runs twice."""


@dataclass
class StepOutcome:
    step: Step
    result: ActionResult

    @property
    def ok(self) -> bool:
        return self.result.ok

    @property
    def action_name(self) -> str:
        return (self.result.action or {}).get("action", "")

    @property
    def ends(self) -> bool:
        """terminate / call_user: the trajectory is over (Table 3)."""
        return self.ok and self.action_name in ENDING_ACTIONS

    @property
    def asks(self) -> bool:
        """clarify: the trajectory waits for the user's answer, then goes on."""
        return self.ok and self.action_name in ASKING_ACTIONS

    @property
    def stop(self) -> Stop | None:
        """How the trajectory stopped when the action ends it (terminate / call_user); else None."""
        return agent_stop(self.result.action) if self.ends else None


# -- observe -----------------------------------------------------------------------------------

def observation_fields(observation: Observation, anomaly: dict | None = None) -> dict:
    """A Step's observation columns; screenshots and dumps are content-addressed blobs."""
    return {
        "screenshot": store_blob(observation.png, "png"),
        "hierarchy": store_blob(observation.hierarchy_xml.encode("utf-8"), "xml"),
        "foreground_package": observation.foreground.get("package", ""),
        "activity_stack": observation.foreground.get("activity_stack", []),
        "anomaly": anomaly,
        "timings": {**observation.timings, "screen": [observation.width, observation.height]},
    }


def record_observation(trajectory: Trajectory, index: int, observation: Observation, *,
                       anomaly: dict | None = None, replace: bool = True) -> Step | None:
    """Persist the observed screen as step `index`.

    `replace=True` (automatic lines): a redelivered task rewrites the same index, idempotently.
    `replace=False` (a person's page): None when the index exists already, e.g. a second tab
    observed it first.
    """
    fields = observation_fields(observation, anomaly)
    if replace and (writer := active_writer()) is not None:  # a phone host's batched writes
        step = Step(trajectory=trajectory, index=index, **fields)
        writer.write(StepWrite(observed=step))
        return step
    step = _insert_step(trajectory, index, fields)  # a new index, nearly always
    if step is None and replace:
        step, _ = Step.objects.update_or_create(trajectory=trajectory, index=index, defaults=fields)
    return step


def _insert_step(trajectory: Trajectory, index: int, fields: dict) -> Step | None:
    """One INSERT; None when the index exists already. Inside a caller's transaction it takes a
    savepoint to survive the IntegrityError; in autocommit (a worker) the INSERT is a transaction
    of its own, without a BEGIN and a COMMIT sent around it."""
    guard = transaction.atomic() if transaction.get_connection().in_atomic_block else nullcontext()
    try:
        with guard:
            return Step.objects.create(trajectory=trajectory, index=index, **fields)
    except IntegrityError:
        return None


# -- propose -----------------------------------------------------------------------------------

def executed_steps(trajectory: Trajectory) -> list[Step]:
    return list(trajectory.steps.filter(executed_action__isnull=False).order_by("index"))


def history_steps(trajectory: Trajectory) -> list[Step]:
    """The executed steps with what the protocol shows of them. Not their model I/O: read at every
    step, each earlier step's request and reply made the reads grow with the square of the length."""
    return list(trajectory.steps.filter(executed_action__isnull=False).order_by("index")
                .only("trajectory", "index", "cot", "executed_action", "edit", "screenshot"))


# Per trajectory, light copies of the steps this process saw executed, up to the last step it
# recorded (step_memo.py): only used under a host's step writer; an answer to a clarify drops it.
_histories = NextStepMemo(1024)


def _history_entry(step: Step) -> Step:
    return Step(pk=step.pk, trajectory_id=step.trajectory_id, index=step.index, cot=step.cot,
                executed_action=step.executed_action, edit=step.edit, screenshot=step.screenshot)


def known_history(step: Step) -> list[Step] | None:
    """The executed steps before `step`, from what this host noted (read once where it noted
    nothing); None outside a host's step writer: the caller reads."""
    if active_writer() is None:
        return None
    known = _histories.before(step.trajectory_id, step.index)
    if known is not None:
        return list(known)
    done = history_steps(step.trajectory)
    note_history(step.trajectory_id, step.index - 1, [_history_entry(s) for s in done])
    return done


def note_history(trajectory_id: int, index: int, steps: list[Step]) -> None:
    """What this process knows: the trajectory's executed steps up to step `index`."""
    _histories.note(trajectory_id, index, steps)


def _note_recorded(step: Step) -> None:
    """After this process recorded the step's execution (or its failure): the next index may use it."""
    known = _histories.before(step.trajectory_id, step.index)
    if known is not None:
        note_history(step.trajectory_id, step.index,
                     [*known, _history_entry(step)] if step.executed_action is not None else known)


def policy_state(trajectory: Trajectory, observation: Observation, k: int = 5,
                 done: list[Step] | None = None) -> PolicyState:
    """The protocol's input (§3.1.2): all earlier text, the last K screenshots (the current one last).
    `done`: the executed steps so far, where the caller knows them (known_history).

    Only the schema-guided line (§2.3.4) shows the policy the query's known path; every other line
    gives the goal alone, so its success rate measures the policy, not the path.
    """
    done = history_steps(trajectory) if done is None else done
    history = [HistoryEntry(cot=step.cot or {}, action=step.executed_action,
                            reply=str((step.edit or {}).get("clarify_answer") or ""))
               for step in done]
    earlier = [read_blob(step.screenshot.name) for step in done[-(k - 1):] if step.screenshot] if k > 1 else []
    query = trajectory.query
    return PolicyState(goal=query.text, history=history, screenshots=earlier + [observation.png],
                       hierarchy_xml=observation.hierarchy_xml,
                       screen_size=(observation.width, observation.height),
                       foreground=observation.foreground, known_path=query.known_path if trajectory.line == Line.SCHEMA else None,
                       apps=trajectory.policy_apps, app_labels=trajectory.policy_app_labels)


def propose(step: Step, observation: Observation, policy, k: int = 5) -> Proposal:
    """Ask the policy for this step and persist its proposal; the failed exchange is kept as data
    and raised as PolicyError (a line decides: stop, or let a person act by hand)."""
    started = time.monotonic()
    try:
        try:
            state = policy_state(step.trajectory, observation, k=k, done=known_history(step))
            release_connection()  # while the model thinks (seconds), another phone of this host writes
            proposal = policy.propose(state)
        except (ValueError, TypeError) as error:  # e.g. a model version's malformed sampling config
            raise PolicyError(f"the policy is misconfigured: {error}") from error
    except PolicyError as error:
        step.model_io, step.cot, step.sampled = {**(error.model_io or {}), "error": str(error)}, {}, {}
        step.timings = {**step.timings, "propose_ms": _ms(started), "proposed_at": time.time()}
        _save(step, ("model_io", "cot", "sampled", "timings"))
        raise
    step.cot, step.proposed_action = proposal.cot, proposal.action
    step.confidence, step.model_io = proposal.confidence, proposal.model_io
    step.sampled = proposal.sampled or {}
    step.timings = {**step.timings, "propose_ms": _ms(started), "proposed_at": time.time()}
    _save(step, ("cot", "proposed_action", "confidence", "model_io", "sampled", "timings"))
    return proposal


# -- audit, execute, persist, CPT, memory --------------------------------------------------------

def claim_step(step: Step) -> None:
    """Mark the step as executing; StepBusy when it ran or another live request holds it."""
    now = timezone.now()
    claimed = Step.objects.filter(pk=step.pk, executed_action__isnull=True).filter(
        Q(executing_since__isnull=True) | Q(executing_since__lt=now - CLAIM_TIMEOUT)).update(executing_since=now)
    if not claimed:
        raise StepBusy(f"step {step.index} is being executed already")
    step.executing_since = now


def audit_record(result: ActionResult) -> dict:
    return {"blocked": result.blocked, "reason": result.reason, "element": result.element,
            "error": result.error, "note": result.note}


def execute(step: Step, action: dict, executor: ActionExecutor, *, cot: dict | None = None,
            edit: dict | None = None, timings: dict | None = None,
            hierarchy_xml: str | None = None, step_started: float | None = None,
            claim: bool = True) -> StepOutcome:
    """Run `action` for this step through the executor (which audits it first) and persist it.

    `cot` is the reasoning to keep (a person's verified text; the proposal's by default); `edit`
    how a person changed the proposal; `step_started` (monotonic) when the step began, for its
    wall time. A blocked or failed action is recorded on the step, which stays unexecuted. An
    executed one is saved with its CPT sample in one transaction.

    `claim=False` only where no one else can reach the step: an automatic line's worker executes
    the step it just observed (a redelivered task continues at a new index, never this one).

    An executor built with the holder's lease acts only while the lease is held; a lost lease
    comes back as `result.lease_lost`, recorded on the step like a failure, nothing sent.
    """
    if claim:
        claim_step(step)
    # The audit judges the screen as it is just before each input (the executor reads it, or
    # reuses a dump read < 1 s ago), never the step's stored dump, which may be minutes old.
    try:
        result = executor.execute(action, hierarchy_xml=hierarchy_xml)
    except Exception:
        Step.objects.filter(pk=step.pk).update(executing_since=None)
        raise
    step.audit = audit_record(result)
    step.timings = {**step.timings, **(timings or {}), "executed_at": time.time(),
                    **{f"{name}_ms": value for name, value in result.timings.items()}}
    if not result.ok:
        step.executing_since = None
        _save(step, ("audit", "timings", "executing_since"))
        _note_recorded(step)
        return StepOutcome(step, result)
    step.executed_action = result.action
    if cot is not None:
        step.cot = {tag: str(cot.get(tag) or "").strip() for tag in TAGS}
    if edit is not None:
        if not edit.get("action_unchanged") and "Decision" not in edit.get("cot_changed", []):
            # The person moved the tap or changed the action but not the words: keep [Decision]
            # describing what really ran, in pixels (label consistency, §2.3.6).
            step.cot = {**(step.cot or {}), "Decision": describe_action(result.action)}
            edit = {**edit, "decision_regenerated": True}
        step.edit = edit
    screen = tuple(step.timings.get("screen") or executor.window_size())
    release_connection()  # the image work below needs none: pooled, another phone of this host reads
    cpt_sample = clean_for_cpt(step, result.action, screen)  # image work outside the transaction
    if step_started is not None:
        step.timings["step_ms"] = _ms(step_started)
    notes = result.control["text"] if result.control and result.control.get("kind") == "take_notes" else None
    # Only what this stage changed: the proposal's model I/O is not sent and stored again.
    fields = ("audit", "timings", "executed_action", "cot", "edit")
    if (writer := active_writer()) is not None:  # a phone host's batched writes: one transaction too
        if notes is not None:
            step.trajectory.memory = [*step.trajectory.memory, notes]
        writer.write(StepWrite(updated=(step, fields), cpt_sample=cpt_sample,
                               memory=step.trajectory if notes is not None else None))
        _note_recorded(step)
        if cpt_sample is not None:
            publish("pools", throttle_s=1.0, pool="cpt")
    else:
        with transaction.atomic():
            step.save(update_fields=list(fields))
            feed_cpt(cpt_sample)
            if notes is not None:
                remember(step.trajectory, notes)
    return StepOutcome(step, result)


def clean_for_cpt(step: Step, action: dict, screen: tuple) -> CptEntry | None:
    """The step's CPT sample if it passes rule-based cleaning (§2.4.3), None if not; the verdict is
    noted on the step's audit (saved by the caller)."""
    rejection, phash = cpt_cleaning_verdict(step, action, screen)
    step.audit = {**(step.audit or {}), "cpt": rejection or "accepted"}
    return None if rejection else CptEntry(step=step, screenshot=step.screenshot.name, action=action, phash=phash)


def feed_cpt(sample: CptEntry | None) -> None:
    """The CPT pool is fed per step, after cleaning. One INSERT … ON CONFLICT DO NOTHING: a step
    executed again keeps its first sample."""
    if sample is None:
        return
    CptEntry.objects.bulk_create([sample], ignore_conflicts=True)
    publish("pools", throttle_s=1.0, pool="cpt")


def remember(trajectory: Trajectory, note: str) -> None:
    """take_notes: the note joins the trajectory's memory (§3.1.2)."""
    trajectory.memory = [*trajectory.memory, note]
    Trajectory.objects.filter(pk=trajectory.pk).update(memory=trajectory.memory)


def record_answer(step: Step, answer: str, by: str) -> None:
    """The user's answer to a clarify: later steps see it in their history."""
    step.edit = {**(step.edit or {}), "clarify_answer": answer, "by": by}
    step.edit.pop("clarify_pending", None)
    Step.objects.filter(pk=step.pk).update(edit=step.edit)
    _histories.forget(step.trajectory_id)  # the next step's history is read again, with the answer


def _save(step: Step, fields: tuple[str, ...]) -> None:
    """These fields of the stored step: through the host's writer where one runs."""
    if (writer := active_writer()) is not None:
        writer.write(StepWrite(updated=(step, fields)))
    else:
        step.save(update_fields=list(fields))


def _ms(since: float) -> int:
    return round((time.monotonic() - since) * 1000)
