"""The step-level reward model's rules (ClawGUI §3.2.2's dense process reward, as eq. 4's step reward).

Pure functions: which steps the judgements already made say were right or wrong (`judged_step_labels`),
how the model's probability that a step was right becomes an eq. 4 step reward (`process_reward`),
and how held-out predictions are tallied (`step_confusion`). training/reward_model.py reads the
facts out of the database and featurises the steps.

A label is +1 (the step was right) or −1 (it was wrong). No judgement of the pools says a step was
"harmless but useless", so no step is labelled 0: the model learns right against wrong, and eq. 4's
0 is what it gives where it cannot tell (the band).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

RIGHT = 1      # eq. 4's +1 (training/rules/rewards.py NECESSARY)
UNSURE = 0     # eq. 4's 0
WRONG = -1     # eq. 4's −1 (OFF_COURSE)
LABELS = (RIGHT, WRONG)
# p(the step is right) ≥ 0.65 → +1, ≤ 0.35 → −1, in between → 0: a model that cannot tell hands out
# no reward, as majority_vote's ties go to the lower value (§5.3.5: a reward too high by mistake
# keeps being reinforced).
PROCESS_REWARD_BAND = (0.35, 0.65)


class Outcome(StrEnum):
    """How the trajectory was judged, as far as its steps' labels care."""

    VERIFIED_SUCCESS = "verified_success"          # HTSC True
    ADJUDICATED_SUCCESS = "adjudicated_success"    # a person judged the Undetermined trajectory correct
    FAILURE = "failure"                            # HTSC False, or adjudicated wrong
    ENVIRONMENT = "environment"                    # Env_ERROR: the screens were not the policy's doing
    UNDECIDED = "undecided"                        # pending, Undetermined, infeasible


class LabelSource(StrEnum):
    """Which judgement gave a step its label (the first that applies, in this order)."""

    FIRST_ERROR = "first_error"                    # the step the ECDM's attribution located: −1
    SAFETY_VETO = "safety_veto"                    # the safety audit blocked the action: −1
    FALSE_CLAIM = "false_claim"                    # terminate(success) ending a failed trajectory: −1
    ADJUDICATED_SUCCESS = "adjudicated_success"    # a step of an adjudicated-correct trajectory: +1
    VERIFIED_SUCCESS = "verified_success"          # a step of an HTSC-True trajectory: +1
    GOLDEN_PREFIX = "golden_prefix"                # before the attributed first error: +1
    MILESTONE = "milestone"                        # made a System B milestone first hold: +1


WRONG_SOURCES = (LabelSource.FIRST_ERROR, LabelSource.SAFETY_VETO, LabelSource.FALSE_CLAIM)
# What each source is, for people (the reward model's page).
SOURCE_WORDS = {
    LabelSource.FIRST_ERROR: "first error the ECDM located (wrong)",
    LabelSource.SAFETY_VETO: "blocked by the safety audit (wrong)",
    LabelSource.FALSE_CLAIM: "success claimed on a failed task (wrong)",
    LabelSource.ADJUDICATED_SUCCESS: "step of an adjudicated success (right)",
    LabelSource.VERIFIED_SUCCESS: "step of a verified success (right)",
    LabelSource.GOLDEN_PREFIX: "before the first error (right)",
    LabelSource.MILESTONE: "reached a milestone (right)",
}


@dataclass(frozen=True)
class JudgedStep:
    index: int                 # Step.index
    masked: bool = False       # repetition-to-reflection masked: the pools train nothing on it
    blocked: bool = False      # the safety audit blocked the action the policy emitted


@dataclass(frozen=True)
class JudgedTrajectory:
    """What the pools hold about one trajectory: its policy steps (those with an action) in order,
    its outcome, the steps whose action made a milestone first hold, the first error step the
    attribution located (Level 3, the model's; None when none was), and whether the agent ended it
    claiming success (its last step a terminate with status success)."""

    steps: tuple[JudgedStep, ...]
    outcome: Outcome
    milestone_steps: frozenset[int] = field(default_factory=frozenset)
    first_error_step: int | None = None
    claimed_success: bool = False


@dataclass(frozen=True)
class StepLabel:
    label: int                 # RIGHT or WRONG
    source: LabelSource


def judged_step_labels(trajectory: JudgedTrajectory) -> dict[int, StepLabel]:
    """{Step.index: label} for the steps a judgement speaks about; a step none speaks about has none.

    - Env_ERROR: nothing (the environment broke the task; §4's environment-broken trajectories are
      not scored either).
    - −1: the attributed first error of a failed trajectory (ECDM: that step was wrong); an action
      the safety audit blocked; the success claim that ended a failed trajectory (its last step: the
      agent said the task was done and the judges say it is not — Table 3's terminate is earned).
    - +1: every step of a verified or adjudicated success (the SFT pool takes them as right), the
      steps before the attributed first error of a failure (ECDM's golden prefix), a step that made
      a milestone first hold. A masked step (a repeat that changed nothing) is no success's or
      prefix's +1: the pools do not train on it either.
    - A step with both a −1 and a +1 judgement is −1 (conservative, as step_reward puts a blocked
      action first).
    """
    if trajectory.outcome == Outcome.ENVIRONMENT:
        return {}
    success = {Outcome.VERIFIED_SUCCESS: LabelSource.VERIFIED_SUCCESS,
               Outcome.ADJUDICATED_SUCCESS: LabelSource.ADJUDICATED_SUCCESS}.get(trajectory.outcome)
    first_error = trajectory.first_error_step if trajectory.outcome == Outcome.FAILURE else None
    false_claim = trajectory.steps[-1].index if (
        trajectory.outcome == Outcome.FAILURE and trajectory.claimed_success and trajectory.steps) else None
    labels = {}
    for step in trajectory.steps:
        sources = []
        if first_error is not None and step.index == first_error:
            sources.append(LabelSource.FIRST_ERROR)
        if step.blocked:
            sources.append(LabelSource.SAFETY_VETO)
        if step.index == false_claim:
            sources.append(LabelSource.FALSE_CLAIM)
        if success is not None and not step.masked:
            sources.append(success)
        if first_error is not None and step.index < first_error and not step.masked:
            sources.append(LabelSource.GOLDEN_PREFIX)
        if step.index in trajectory.milestone_steps:
            sources.append(LabelSource.MILESTONE)
        if sources:
            first = min(sources, key=list(LabelSource).index)
            labels[step.index] = StepLabel(WRONG if first in WRONG_SOURCES else RIGHT, first)
    return labels


def process_reward(probability: float, band: tuple[float, float] = PROCESS_REWARD_BAND) -> int:
    """Eq. 4's r_t from the model's p(the step is right): +1 at or above the band's top, −1 at or
    below its bottom, 0 inside it."""
    low, high = band
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"the band is (low, high) with 0 ≤ low ≤ high ≤ 1, not {band!r}")
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"a probability lies in [0, 1], not {probability!r}")
    if probability >= high:
        return RIGHT
    if probability <= low:
        return WRONG
    return UNSURE


def step_confusion(labels: Sequence[int], rewards: Sequence[int]) -> dict:
    """Held-out labels (±1) against the rewards given (+1/0/−1): counts[label][reward] (keys as
    strings, JSON's), accuracy over the steps the model decided (reward ≠ 0), and coverage (the
    share it decided). None where there is nothing to divide."""
    if len(labels) != len(rewards):
        raise ValueError(f"{len(labels)} labels and {len(rewards)} rewards")
    counts = {str(label): {str(reward): 0 for reward in (RIGHT, UNSURE, WRONG)} for label in LABELS}
    for label, reward in zip(labels, rewards):
        if label not in LABELS or reward not in (RIGHT, UNSURE, WRONG):
            raise ValueError(f"a label is ±1 and a reward +1/0/−1, not {label!r}, {reward!r}")
        counts[str(label)][str(reward)] += 1
    decided = sum(1 for reward in rewards if reward != UNSURE)
    agreed = sum(1 for label, reward in zip(labels, rewards) if label == reward)
    return {"counts": counts, "decided": decided,
            "accuracy_decided": round(agreed / decided, 4) if decided else None,
            "coverage": round(decided / len(labels), 4) if labels else None}


def source_counts(labels: Iterable[StepLabel]) -> dict[str, int]:
    """How many labelled steps each source gave (every source named, zeros included)."""
    counts = {source.value: 0 for source in LabelSource}
    for label in labels:
        counts[label.source.value] += 1
    return counts
