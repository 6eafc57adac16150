"""The rewards of agentic RL (report §3.3.2, eqs. 3–4) and how several judge passes agree (§5.3.5).

Pure functions: the judging itself (milestones over the recorded screens, an LLM judge) is done by
training/step_judge.py, which reduces each step to the facts `step_reward` reads.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

ALPHA = 0.5
# Eq. 4: r_t ∈ {+1, 0, −1}.
NECESSARY = 1      # the step was needed for the task
USELESS = 0        # harmless but useless
OFF_COURSE = -1    # the step pushed the task off course
STEP_REWARDS = (NECESSARY, USELESS, OFF_COURSE)
DEFAULT_PASSES = 5  # §5.3.5: "we also judge each trajectory five times"


def trajectory_reward(n_done: int, n_nec: int, steps: int, alpha: float = ALPHA) -> float:
    """Eq. 3: R(τ) = α · N_done/N_nec + (1 − α) · N_nec/T   (progress + quality, α = 0.5).

    Edge cases, decided here once:
    - N_nec = 0 is refused (ValueError): with no necessary sub-goal progress is undefined, and a
      caller without sub-goals must say what it counts instead (step_judge counts the HTSC verdict
      as one sub-goal).
    - N_done > N_nec is refused: a trajectory cannot reach more necessary sub-goals than exist.
    - T = 0 (no step taken) has quality 0: nothing it did was needed, it did nothing.
    - T < N_nec (one action reached several sub-goals, or a short failure) caps the quality at 1,
      so R stays in [0, 1] and no trajectory is paid more than a perfect one. Note the report's
      quality term does not look at success: a trajectory that gives up after one step still earns
      (1 − α); progress is what separates it from a success within the group.
    """
    for name, value in (("n_done", n_done), ("n_nec", n_nec), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], not {alpha!r}")
    if n_nec == 0:
        raise ValueError("no necessary sub-goal (N_nec = 0): the trajectory reward is undefined")
    if n_done > n_nec:
        raise ValueError(f"N_done ({n_done}) exceeds N_nec ({n_nec})")
    progress = n_done / n_nec
    quality = min(1.0, n_nec / steps) if steps else 0.0
    return alpha * progress + (1.0 - alpha) * quality


def majority_vote(values: Sequence[Hashable]):
    """The most frequent value over judge passes (§3.3.2: "query the judge multiple times and take a
    majority vote"). A tie goes to the most conservative of the tied values, the smallest: −1 before
    0 before +1 for a step, False before True, fewer sub-goals before more. A judge that cannot make
    up its mind must not hand out reward (§5.3.5: a score too high by mistake keeps being reinforced).
    """
    if not values:
        raise ValueError("a majority needs at least one pass")
    counts = Counter(values)
    top = max(counts.values())
    return min(value for value, count in counts.items() if count == top)


def majority_step_rewards(passes: Sequence[Sequence[int]]) -> list[int]:
    """Eq. 4 over several passes: per step, the majority of the passes' ratings (ties: the lower)."""
    if not passes:
        raise ValueError("a majority needs at least one pass")
    lengths = {len(ratings) for ratings in passes}
    if len(lengths) != 1:
        raise ValueError(f"every pass must rate every step; the passes rate {sorted(lengths)} steps")
    for ratings in passes:
        for rating in ratings:
            if rating not in STEP_REWARDS or isinstance(rating, bool):
                raise ValueError(f"a step rating is one of {STEP_REWARDS}, not {rating!r}")
    return [majority_vote(column) for column in zip(*passes)]


def majority_done(passes: Sequence[int]) -> int:
    """N_done over several passes: the majority count, a tie going to the smaller count."""
    return majority_vote(list(passes))


def atomic_conditions_hold(conditions_results: Sequence[bool | None]) -> bool:
    """§5.3.5: atomic verification conditions, each bound to its frame, must ALL hold (this replaces
    the disjunctive bypass rules under which any one condition was enough). A condition that could
    not be checked (None) does not hold, and an empty list proves nothing: False."""
    return bool(conditions_results) and all(result is True for result in conditions_results)


@dataclass(frozen=True)
class StepFacts:
    """What the judge established about one step (training/step_judge.py fills it in).

    advanced       an atomic condition (a milestone) first held on the screen this step led to
    completes      the ending (terminate:success or the handover the task expects) of a trajectory
                   whose conditions all hold
    blocked        the safety audit blocked the action the policy emitted
    left_task      the step brought an app to the front that is none of the query's apps (the
                   launcher, the system UI and the permission dialogs are neutral ground)
    stalled        the same action as the step before, and the screen did not change
    false_success  it declared success while the conditions do not all hold (pseudo-completion)
    """

    advanced: bool = False
    completes: bool = False
    blocked: bool = False
    left_task: bool = False
    stalled: bool = False
    false_success: bool = False


def step_reward(facts: StepFacts, judge_rating: int | None = None) -> int:
    """Eq. 4 for one step: +1 necessary, 0 harmless but useless, −1 off course.

    The frame-bound facts come first (§5.3.5: they are measured, not opined): a blocked action is
    −1 whatever else is true (safety before progress); a step that made a condition first hold, or
    that correctly ended a trajectory whose conditions all hold, is +1. Otherwise an LLM judge's
    rating of the pass decides when there is one; without one, leaving the task's apps, repeating
    an action that changed nothing and declaring a success that is not there are −1, anything
    else 0. ("Undid progress" is not detected: milestones record where each first held, not where
    one stopped holding.)
    """
    if facts.blocked:
        return OFF_COURSE
    if facts.advanced or facts.completes:
        return NECESSARY
    if judge_rating is not None:
        if judge_rating not in STEP_REWARDS or isinstance(judge_rating, bool):
            raise ValueError(f"a step rating is one of {STEP_REWARDS}, not {judge_rating!r}")
        return judge_rating
    if facts.left_task or facts.stalled or facts.false_success:
        return OFF_COURSE
    return USELESS
