"""SFT intake: the one door into the SFT pool, below every line (§2.4.3 "purity first", §2.3.6).

Every trajectory that enters the pool (HTSC True, adjudicated, ECDM-repaired, the semi-automatic
line's verified and refusal samples; whatever line collected it: automatic, schema-guided,
external, RL, ECDM) passes the bi-directional consistency gate (flywheel/rules/consistency.py)
here, once, as it enters. A step that fails it is kept, with its trajectory and its frames (nothing
is lost), but it is no training label (Step.label_gate in NOT_TRAINING_LABELS, the rules it fails in
Step.label_issues) and exports give it no sample — until its reasoning is regenerated.

Regeneration runs after the intake commits, as its own job (regenerate_reasoning): routing never
waits on a model, and a Teacher busy correcting or taking over is not asked in the middle of
routing. It derives forward, never backward: the Teacher is shown the step's screen and the history
before it (not the action), reasons and chooses; when its choice is the executed action, its five
tags replace the step's (reasoning that leads to that action from the observation, the forward
derivability §2.3.6 asks for; the step's own words are kept in Step.edit) and the gate checks the
trajectory again, at most MAX_REGENERATIONS rounds. When it chooses otherwise the step is
INCONSISTENT. Rewriting only the [Decision] to describe the executed action is not done: the [Plan]
was written for the model's action, and words fitted to the action afterwards are the post-hoc
rationalisation the gate exists to keep out. A step the Teacher itself wrote (a takeover) is not
put back to the Teacher: asked again on the same screen it says the same (TEACHER_FAILS). A Teacher
that does not answer leaves the step waiting for the sweep (regenerate_waiting), and after
MAX_ATTEMPTS it is NO_REGENERATOR. The semi-automatic line asks its person to fix the reasoning
instead (flywheel/collection/semi_auto.py) and admits the trajectory once it passes.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from devices.uitree import page_text, parse_hierarchy
from flywheel import jobs
from flywheel.blobs import read_blob
from flywheel.events import publish
from flywheel.models import NOT_TRAINING_LABELS, LabelGate, SftEntry, Step, Trajectory
from flywheel.policies.base import PolicyError
from flywheel.policies.teacher import context_for_step, same_choice, teacher_for
from flywheel.rules.consistency import ConsistencyIssue, GateStep, check_bidirectional_consistency
from flywheel.rules.pools import sft_intake_allowed

log = logging.getLogger(__name__)

MAX_REGENERATIONS = 3
MAX_ATTEMPTS = 3           # jobs that found no Teacher answering before a step is NO_REGENERATOR
SWEEP_AFTER = timedelta(minutes=30)   # a waiting step older than this is picked up by the sweep
# A regenerator: (the failing step, its issues) -> the step's new five tags (coordinates in the
# regenerator's `coords`, pixels when it has none), or None when it has nothing better.
Regenerator = Callable[[GateStep, list[ConsistencyIssue]], "dict | None"]


@dataclass
class GateOutcome:
    """The gate over a trajectory's executed steps: what still fails, and the reasoning that was
    regenerated (by step index, the new tags). `asked`: a regenerator was asked (the job, not the
    intake); `unanswered`: the steps it could not get an answer for."""
    steps: list[Step]
    issues: list[ConsistencyIssue]
    regenerated: dict[int, dict] = field(default_factory=dict)
    asked: bool = False
    unanswered: set[int] = field(default_factory=set)
    regenerated_by: str = ""
    regenerated_coords: str = "pixel"

    def failing(self) -> dict[int, list[str]]:
        """{step index: the rules it fails}."""
        rules: dict[int, list[str]] = {}
        for issue in self.issues:
            rules.setdefault(issue.step_index, [])
            if issue.rule not in rules[issue.step_index]:
                rules[issue.step_index].append(issue.rule)
        return rules


def executed_steps(trajectory) -> list[Step]:
    return list(trajectory.steps.filter(executed_action__isnull=False).order_by("index"))


def screen_text(step: Step) -> str:
    """Every text on the screen the step saw; "" when its dump is gone or unreadable (the
    [Observation] is then not compared with the screen: routing never fails on a lost file)."""
    if not step.hierarchy:
        return ""
    try:
        return page_text(parse_hierarchy(read_blob(step.hierarchy.name).decode("utf-8", errors="replace")))
    except OSError:
        return ""


def decision_units(step: Step) -> str:
    """The units of coordinates in the step's [Decision]: the proposal's, unless it was rewritten
    (a person moved the tap: pixels) or regenerated (the regenerating Teacher's)."""
    edit = step.edit or {}
    if edit.get("reasoning_regenerated"):
        return edit["reasoning_regenerated"].get("coords") or "pixel"
    if edit.get("decision_regenerated"):
        return "pixel"
    return (step.proposed_action or {}).get("coords", "pixel")


def gate_step(step: Step) -> GateStep:
    return GateStep(index=step.index, cot=step.cot or {}, action=step.executed_action, screen_text=screen_text(step),
                    decision_coords=decision_units(step), screen=tuple(step.timings.get("screen") or ()) or None)


def gate_steps(trajectory) -> list[GateStep]:
    return [gate_step(step) for step in executed_steps(trajectory)]


class TeacherRegenerator:
    """Forward regeneration by the Teacher (module docstring): its own reasoning for the step's
    screen, taken only when its own choice there is the executed action."""

    def __init__(self, trajectory, teacher=None):
        self.trajectory = trajectory
        teacher = teacher or teacher_for()
        self.teacher = teacher.for_query(trajectory.query) if hasattr(teacher, "for_query") else teacher
        self.name = getattr(self.teacher, "name", "teacher")
        endpoint = getattr(self.teacher, "endpoint", None)
        self.coords = getattr(endpoint, "coords", None) or "pixel"
        self.unanswered: set[int] = set()

    def __call__(self, step: GateStep, issues: list[ConsistencyIssue]) -> dict | None:
        context = context_for_step(self.trajectory, step.index)
        if context is None:      # no frame to show: nothing to derive from
            return None
        try:
            answer = self.teacher.suggest(replace(context, wrong_action=None))
        except PolicyError as error:
            log.info("no reasoning regenerated for step %s of trajectory %s: %s", step.index,
                     self.trajectory.pk, error)
            self.unanswered.add(step.index)
            return None
        self.unanswered.discard(step.index)
        if answer is None or not answer.cot or not same_choice(answer.action, step.action, context.hierarchy_xml):
            return None
        return dict(answer.cot)


def run_gate(trajectory, regenerator: Regenerator | None = None, eligible: set[int] | None = None) -> GateOutcome:
    """The gate over the trajectory's executed steps (reads their dumps, a regenerator asks a model:
    call it outside a transaction). With a regenerator, the failing steps in `eligible` (all when
    None) are rewritten and the trajectory checked again until all pass or MAX_REGENERATIONS rounds
    are spent."""
    steps = executed_steps(trajectory)
    gate = [gate_step(step) for step in steps]
    issues = check_bidirectional_consistency(gate)
    regenerated: dict[int, dict] = {}
    coords = getattr(regenerator, "coords", "pixel")
    for _ in range(MAX_REGENERATIONS if regenerator else 0):
        failing = {issue.step_index for issue in issues}
        if eligible is not None:
            failing &= eligible
        new = {g.index: regenerator(g, [i for i in issues if i.step_index == g.index])
               for g in gate if g.index in failing}
        new = {index: cot for index, cot in new.items() if cot and cot != regenerated.get(index)}
        if not new:
            break
        gate = [replace(g, cot=new[g.index], decision_coords=coords) if g.index in new else g for g in gate]
        regenerated.update(new)
        issues = check_bidirectional_consistency(gate)
    return GateOutcome(steps, issues, regenerated, asked=regenerator is not None,
                       unanswered=set(getattr(regenerator, "unanswered", ())),
                       regenerated_by=getattr(regenerator, "name", ""), regenerated_coords=coords)


def label_gate_of(rules: list[str], *, was: str, takeover: bool, regenerated: bool, asked: bool,
                  unanswered: bool, attempts: int) -> str:
    """The gate's verdict on one step (module docstring): at intake (`asked` False) a failing step
    waits for regeneration; after the job it passed, was regenerated, or is no label, and why."""
    if not rules:
        # A second intake of the same trajectory finds the regenerated words passing: still regenerated.
        return LabelGate.REGENERATED if regenerated or was == LabelGate.REGENERATED else LabelGate.PASSED
    if takeover:
        return LabelGate.TEACHER_FAILS
    if not asked:
        return LabelGate.REGENERATING
    if unanswered:
        return LabelGate.REGENERATING if attempts < MAX_ATTEMPTS else LabelGate.NO_REGENERATOR
    return LabelGate.INCONSISTENT


def record_labels(outcome: GateOutcome) -> None:
    """Write the gate's verdict on every executed step (and its regenerated reasoning, keeping the
    step's own words in its edit), in one statement."""
    failing = outcome.failing()
    now = timezone.now().isoformat()
    for step in outcome.steps:
        edit = dict(step.edit or {})
        if step.index in outcome.regenerated:
            edit["reasoning_regenerated"] = {"by": outcome.regenerated_by, "coords": outcome.regenerated_coords,
                                             "cot_before": step.cot or {}, "at": now}
            step.cot = outcome.regenerated[step.index]
        unanswered = step.index in outcome.unanswered
        if unanswered:
            edit["regeneration_attempts"] = int(edit.get("regeneration_attempts") or 0) + 1
        if outcome.asked and step.label_gate == LabelGate.REGENERATING:
            edit["regeneration_tried_at"] = now
        step.edit = edit
        step.label_issues = failing.get(step.index, [])
        step.label_gate = label_gate_of(
            step.label_issues, was=step.label_gate, takeover=step.takeover,
            regenerated=step.index in outcome.regenerated, asked=outcome.asked, unanswered=unanswered,
            attempts=int(edit.get("regeneration_attempts") or 0))
    Step.objects.bulk_update(outcome.steps, ["cot", "edit", "label_gate", "label_issues"])


def _record_issues(trajectory, outcome: GateOutcome) -> None:
    open_issues = [{"step": issue.step_index, "rule": issue.rule, "message": issue.message} for issue in outcome.issues]
    Trajectory.objects.filter(pk=trajectory.pk).update(consistency_issues=open_issues)
    trajectory.consistency_issues = open_issues


def admit(trajectory, intake: str, gate: GateOutcome | None = None) -> SftEntry:
    """Enter the trajectory into the SFT pool through the gate (`gate`: already run, outside the
    caller's transaction). Runs in the caller's transaction; a second call is a no-op entry. Steps
    that fail have their reasoning regenerated by a job once this commits."""
    if not sft_intake_allowed(intake):  # the pool's one intake rule (rules/pools.py)
        raise ValueError(f"{intake!r} may not enter the SFT pool")
    gate = gate if gate is not None else run_gate(trajectory)
    record_labels(gate)
    _record_issues(trajectory, gate)
    entry, _ = SftEntry.objects.get_or_create(trajectory=trajectory, intake=intake)
    if any(step.label_gate == LabelGate.REGENERATING for step in gate.steps):
        trajectory_id = trajectory.pk
        transaction.on_commit(lambda: jobs.task(jobs.REGENERATE_REASONING).delay(trajectory_id))
    publish("pools", pool="sft")
    return entry


def regenerate_reasoning(trajectory_id: int, teacher=None) -> dict:
    """The job: regenerate the reasoning of the trajectory's steps waiting for it (module docstring).
    Idempotent: a second job finds nothing waiting, or what the first left waiting."""
    trajectory = Trajectory.objects.select_related("query").filter(pk=trajectory_id).first()
    waiting = set(Step.objects.filter(trajectory_id=trajectory_id, label_gate=LabelGate.REGENERATING)
                  .values_list("index", flat=True)) if trajectory else set()
    if not waiting:
        return {"waiting": 0}
    outcome = run_gate(trajectory, TeacherRegenerator(trajectory, teacher), eligible=waiting)
    with transaction.atomic():
        still = set(Step.objects.select_for_update().filter(trajectory_id=trajectory_id, label_gate=LabelGate.REGENERATING)
                    .values_list("index", flat=True))
        if still != waiting:     # another job wrote first: its labels stand
            return {"waiting": len(still), "raced": True}
        record_labels(outcome)
        _record_issues(trajectory, outcome)
    publish("pools", pool="sft")
    labels = Step.objects.filter(trajectory_id=trajectory_id, index__in=waiting).values_list("label_gate", flat=True)
    return {"waiting": len(waiting), "regenerated": sum(label == LabelGate.REGENERATED for label in labels),
            "unanswered": len(outcome.unanswered)}


def regenerate_waiting(limit: int = 100) -> list[int]:
    """The sweep: trajectories with steps left waiting (a lost job, a Teacher that did not answer)
    for longer than SWEEP_AFTER since they entered or were last tried get their job again."""
    cutoff = timezone.now() - SWEEP_AFTER
    due = []
    rows = (Step.objects.filter(label_gate=LabelGate.REGENERATING, created_at__lt=cutoff)
            .order_by("trajectory_id").values_list("trajectory_id", "edit"))
    for trajectory_id, edit in rows:
        tried = (edit or {}).get("regeneration_tried_at")
        if trajectory_id not in due and (not tried or tried < cutoff.isoformat()):
            due.append(trajectory_id)
        if len(due) >= limit:
            break
    for trajectory_id in due:
        jobs.task(jobs.REGENERATE_REASONING).delay(trajectory_id)
    return due


def not_label_counts() -> dict[str, int]:
    """{label gate: steps} of the steps that are no training labels (a partial index holds them)."""
    rows = (Step.objects.filter(label_gate__in=NOT_TRAINING_LABELS).order_by().values_list("label_gate")
            .annotate(n=Count("pk")))
    return dict(rows)
