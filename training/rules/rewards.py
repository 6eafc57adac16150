"""The rewards of agentic RL (report §3.3.2, eqs. 3–4), how several judge passes agree (§5.3.5), and
Xiaomi-GUI-0's cascade reward for step-level RL (§4.3).

Pure functions: the judging itself (milestones over the recorded screens, an LLM judge) is done by
training/step_judge.py, which reduces each step to the facts `step_reward` and `cascade_levels` read.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
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


# Where an RL run's step rewards come from (the run config's "step_reward_source").
MAJORITY = "majority"          # eq. 4 per judge pass, the majority over the passes (the default)
CASCADE = "cascade"            # Xiaomi-GUI-0 §4.3's cascade reward, the majority over the passes
REWARD_MODEL = "reward_model"  # a trained step-level reward model rates each step (ClawGUI §3.2)
STEP_REWARD_SOURCES = (MAJORITY, CASCADE, REWARD_MODEL)

# Xiaomi-GUI-0 §4.3: "a cascade reward that checks response requirements hierarchically and exits at
# the first failure. Rule-based checks reject malformed responses before LLM-as-judge checks".
PARSE = "parse"              # the policy's output parsed into a protocol action
EXECUTION = "execution"      # the executor ran it (neither blocked by the safety audit nor failed)
RULES = "rules"              # the frame-bound rule facts hold (StepFacts: not off the task, no no-op, ...)
JUDGE = "judge"              # the LLM judge rates the step necessary (asked only when the rules passed)
CASCADE_LEVELS = (PARSE, EXECUTION, RULES, JUDGE)
# "−1.0 for parse or execution failures, −0.5 for other failures, and 1.0 when all levels pass"
CASCADE_FAILURE = {PARSE: -1.0, EXECUTION: -1.0, RULES: -0.5, JUDGE: -0.5}
CASCADE_PASS = 1.0


def cascade_failure(levels: Mapping[str, bool | None]) -> str | None:
    """The first level of the cascade that failed, in CASCADE_LEVELS order whatever the mapping's
    order; None when every checked level passed. A level given as None (or absent) was not checked
    (no judge configured, a judge that did not answer) and is passed over; what follows the first
    failure is never looked at, as the cascade exits there."""
    unknown = sorted(set(levels) - set(CASCADE_LEVELS))
    if unknown:
        raise ValueError(f"unknown cascade level {unknown[0]!r}: one of {', '.join(CASCADE_LEVELS)}")
    if all(levels.get(level) is None for level in CASCADE_LEVELS):
        raise ValueError("the cascade needs at least one checked level")
    for level in CASCADE_LEVELS:
        result = levels.get(level)
        if result is None:
            continue
        if not isinstance(result, bool):
            raise ValueError(f"a level passes (True), fails (False) or was not checked (None), not {result!r}")
        if not result:
            return level
    return None


def cascade_reward(levels: Mapping[str, bool | None]) -> float:
    """Xiaomi-GUI-0 §4.3's step reward: −1.0 when the step fails to parse or to execute, −0.5 when a
    later level fails first, 1.0 when every checked level passes (see cascade_failure)."""
    failed = cascade_failure(levels)
    return CASCADE_PASS if failed is None else CASCADE_FAILURE[failed]


def rules_hold(facts: StepFacts) -> bool:
    """The cascade's rule level: a step that made a condition first hold or correctly ended the task
    passes (measured progress, as step_reward counts it); otherwise leaving the task's apps, repeating
    an action that changed nothing and declaring a success that is not there fail it."""
    if facts.advanced or facts.completes:
        return True
    return not (facts.left_task or facts.stalled or facts.false_success)


def cascade_levels(facts: StepFacts, parsed: bool = True, failed: bool = False,
                   judge_rating: int | None = None) -> dict[str, bool | None]:
    """One step's level results. `parsed`: its output parsed into a protocol action; `failed`: the
    executor could not carry out the action (facts.blocked: the audit refused it); `judge_rating`:
    the LLM judge's eq. 4 rating of the step, None when it was not asked or did not answer.

    The levels after the first failure are None (never checked: the judge is asked only when the
    rules passed). A step whose progress is measured on the frames (advanced, completes) passes the
    judge level without its opinion (§5.3.5: frame-bound facts before opinions); otherwise only a
    "necessary" (+1) rating passes it: a step that is harmless but useless does not meet the
    task's requirements."""
    if judge_rating is not None and (judge_rating not in STEP_REWARDS or isinstance(judge_rating, bool)):
        raise ValueError(f"a step rating is one of {STEP_REWARDS}, not {judge_rating!r}")
    levels: dict[str, bool | None] = dict.fromkeys(CASCADE_LEVELS)
    levels[PARSE] = parsed
    if not parsed:
        return levels
    levels[EXECUTION] = not (failed or facts.blocked)
    if not levels[EXECUTION]:
        return levels
    levels[RULES] = rules_hold(facts)
    if not levels[RULES]:
        return levels
    if facts.advanced or facts.completes:
        levels[JUDGE] = True
    elif judge_rating is not None:
        levels[JUDGE] = judge_rating == NECESSARY
    return levels


def judge_asked(facts: StepFacts, parsed: bool = True, failed: bool = False) -> bool:
    """Whether the cascade reaches the judge for this step with an open question: every level before
    it passed and no measured progress decides it already."""
    levels = cascade_levels(facts, parsed, failed)
    return levels[RULES] is True and levels[JUDGE] is None


def majority_cascade_rewards(passes: Sequence[Sequence[float]]) -> list[float]:
    """The cascade reward per step over several passes: the majority (ties: the lower reward)."""
    if not passes:
        raise ValueError("a majority needs at least one pass")
    lengths = {len(rewards) for rewards in passes}
    if len(lengths) != 1:
        raise ValueError(f"every pass must reward every step; the passes reward {sorted(lengths)} steps")
    allowed = {CASCADE_PASS, *CASCADE_FAILURE.values()}
    for rewards in passes:
        for reward in rewards:
            if reward not in allowed or isinstance(reward, bool):
                raise ValueError(f"a cascade reward is one of {sorted(allowed)}, not {reward!r}")
    return [majority_vote(column) for column in zip(*passes)]
