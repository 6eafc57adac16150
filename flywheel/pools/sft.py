"""SFT intake: the one door into the SFT pool, below every line (§2.4.3 "purity first", §2.3.6).

Every trajectory that enters the pool (HTSC True, adjudicated, ECDM-repaired, the semi-automatic
line's verified and refusal samples; whatever line collected it: automatic, schema-guided,
external, RL, ECDM) passes the bi-directional consistency gate (flywheel/rules/consistency.py)
here, once, as it enters. A failing step's reasoning is regenerated and checked again, at most
MAX_REGENERATIONS times, when a reasoning regenerator is given; a step that still fails is kept,
with its trajectory and its frames (nothing is lost), but it is no training label
(Step.label_gate in NOT_TRAINING_LABELS, the rules it fails in Step.label_issues) and exports give
it no sample.

No model is configured to regenerate reasoning (the Teacher writes its own action's reasoning,
never one for an action it did not choose), so today such a step is recorded as NO_REGENERATOR.
Rewriting only the [Decision] to describe the executed action (the recorder does that where a
person moved the tap, at collection) is not done here: the [Plan] was written for the model's
action, and words fitted to the action afterwards are the post-hoc rationalisation the gate exists
to keep out. The semi-automatic line asks its person to fix the reasoning instead
(flywheel/collection/semi_auto.py) and admits the trajectory once it passes.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from django.db.models import Count

from devices.uitree import page_text, parse_hierarchy
from flywheel.blobs import read_blob
from flywheel.events import publish
from flywheel.models import NOT_TRAINING_LABELS, LabelGate, SftEntry, Step, Trajectory
from flywheel.rules.consistency import ConsistencyIssue, GateStep, check_bidirectional_consistency
from flywheel.rules.pools import sft_intake_allowed

MAX_REGENERATIONS = 3
# A regenerator: (the failing step, its issues) -> the step's new five tags (coordinates in pixels),
# or None when it has nothing better.
Regenerator = Callable[[GateStep, list[ConsistencyIssue]], "dict | None"]


@dataclass
class GateOutcome:
    """The gate over a trajectory's executed steps: what still fails, and the reasoning that was
    regenerated (by step index, the new tags)."""
    steps: list[Step]
    issues: list[ConsistencyIssue]
    regenerated: dict[int, dict] = field(default_factory=dict)
    could_regenerate: bool = False

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


def gate_step(step: Step) -> GateStep:
    screen = screen_text(step)
    edit = step.edit or {}
    # Coordinates in a [Decision] are the proposal's units unless the decision was rewritten.
    units = "pixel" if edit.get("decision_regenerated") else (step.proposed_action or {}).get("coords", "pixel")
    return GateStep(index=step.index, cot=step.cot or {}, action=step.executed_action, screen_text=screen,
                    decision_coords=units, screen=tuple(step.timings.get("screen") or ()) or None)


def gate_steps(trajectory) -> list[GateStep]:
    return [gate_step(step) for step in executed_steps(trajectory)]


def reasoning_regenerator() -> Regenerator | None:
    """The configured model that regenerates a step's reasoning: none is (module docstring)."""
    return None


def run_gate(trajectory, regenerator: Regenerator | None = None) -> GateOutcome:
    """The gate over the trajectory's executed steps (reads their dumps: call it outside a
    transaction); with a regenerator, failing steps are rewritten and checked again until all pass
    or MAX_REGENERATIONS rounds are spent."""
    steps = executed_steps(trajectory)
    gate = [gate_step(step) for step in steps]
    issues = check_bidirectional_consistency(gate)
    regenerated: dict[int, dict] = {}
    for _ in range(MAX_REGENERATIONS if regenerator else 0):
        failing = {issue.step_index for issue in issues}
        new = {g.index: regenerator(g, [i for i in issues if i.step_index == g.index])
               for g in gate if g.index in failing}
        new = {index: cot for index, cot in new.items() if cot}
        if not new:
            break
        gate = [replace(g, cot=new[g.index], decision_coords="pixel") if g.index in new else g for g in gate]
        regenerated.update(new)
        issues = check_bidirectional_consistency(gate)
    return GateOutcome(steps, issues, regenerated, could_regenerate=regenerator is not None)


def label_gate_of(rules: list[str], regenerated: bool, could_regenerate: bool, was: str) -> str:
    if not rules:
        # A second intake of the same trajectory finds the regenerated words passing: still regenerated.
        return LabelGate.REGENERATED if regenerated or was == LabelGate.REGENERATED else LabelGate.PASSED
    return LabelGate.INCONSISTENT if could_regenerate else LabelGate.NO_REGENERATOR


def record_labels(outcome: GateOutcome) -> None:
    """Write the gate's verdict on every executed step (and its regenerated reasoning), in one statement."""
    failing = outcome.failing()
    for step in outcome.steps:
        if step.index in outcome.regenerated:
            step.cot = outcome.regenerated[step.index]
        step.label_issues = failing.get(step.index, [])
        step.label_gate = label_gate_of(step.label_issues, step.index in outcome.regenerated,
                                        outcome.could_regenerate, step.label_gate)
    Step.objects.bulk_update(outcome.steps, ["cot", "label_gate", "label_issues"])


def admit(trajectory, intake: str, gate: GateOutcome | None = None) -> SftEntry:
    """Enter the trajectory into the SFT pool through the gate (`gate`: already run, outside the
    caller's transaction). Runs in the caller's transaction; a second call is a no-op entry."""
    if not sft_intake_allowed(intake):  # the pool's one intake rule (rules/pools.py)
        raise ValueError(f"{intake!r} may not enter the SFT pool")
    gate = gate if gate is not None else run_gate(trajectory, reasoning_regenerator())
    record_labels(gate)
    open_issues = [{"step": issue.step_index, "rule": issue.rule, "message": issue.message} for issue in gate.issues]
    Trajectory.objects.filter(pk=trajectory.pk).update(consistency_issues=open_issues)
    trajectory.consistency_issues = open_issues
    entry, _ = SftEntry.objects.get_or_create(trajectory=trajectory, intake=intake)
    publish("pools", pool="sft")
    return entry


def not_label_counts() -> dict[str, int]:
    """{label gate: steps} of the steps that are no training labels (a partial index holds them)."""
    rows = (Step.objects.filter(label_gate__in=NOT_TRAINING_LABELS).order_by().values_list("label_gate")
            .annotate(n=Count("pk")))
    return dict(rows)
