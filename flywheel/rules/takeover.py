"""Teacher takeover (Xiaomi-GUI-0 §3.4): "a teacher also takes over for bounded steps after
sustained low scores to return execution to a workable path".

Pure functions: what one step of the policy scores, and whether the scores so far call for the
Teacher. The collection engine (flywheel/collection/engine.py) feeds them; these steps are then
recorded as recovery demonstrations (Step.takeover).
"""
from __future__ import annotations

DEFAULT_AFTER = 3            # K: this many low scores in a row hand the phone to the Teacher
DEFAULT_STEPS = 5            # M: the Teacher acts for at most this many steps per takeover
DEFAULT_THRESHOLD = 0.4      # a step scoring below this is a low score
UNKNOWN_CONFIDENCE = 0.6     # a policy that states no confidence (an endpoint without logprobs)
REPEATED_PENALTY = 0.3       # the same action as the step before
STALLED_PENALTY = 0.3        # the step before left the screen exactly as it was
MAX_TAKEOVERS = 2            # takeovers per trajectory: after that the policy is on its own
TEACHER_MIN_CONFIDENCE = 0.5  # the Teacher acts only when at least this sure of its action


def _unit(value: float) -> float:
    return min(1.0, max(0.0, float(value)))


def step_score(confidence: float | None = None, teacher_agrees: bool | None = None,
               teacher_confidence: float | None = None, repeated: bool = False, stalled: bool = False) -> float:
    """The Teacher's score of one policy step, in [0, 1].

    `confidence`: the policy's own (None: it stated none). `teacher_agrees`: whether the Teacher
    would take the same action on this screen (None: it had no opinion), weighed by how sure the
    Teacher is (`teacher_confidence`): a sure Teacher's disagreement sinks the score, an unsure
    one barely moves it. `repeated`: the action repeats the step before; `stalled`: the step
    before left the screen unchanged. Both are the signs of a stuck agent.
    """
    score = UNKNOWN_CONFIDENCE if confidence is None else _unit(confidence)
    if teacher_agrees is not None and teacher_confidence:
        weight = _unit(teacher_confidence)
        score = (1 - weight) * score + weight * (1.0 if teacher_agrees else 0.0)
    score -= (REPEATED_PENALTY if repeated else 0.0) + (STALLED_PENALTY if stalled else 0.0)
    return round(_unit(score), 3)


def takeover_due(scores: list[float | None], k: int, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """After K consecutive low step scores the Teacher takes over (K ≤ 0: never).

    `scores` are the policy's steps since the last takeover, oldest first; a step without a score
    breaks the run.
    """
    if k <= 0 or len(scores) < k:
        return False
    return all(score is not None and score < threshold for score in scores[-k:])


def takeover_continues(steps_taken: int, m: int, teacher_confidence: float | None, ends_trajectory: bool,
                       min_confidence: float = TEACHER_MIN_CONFIDENCE) -> bool:
    """Whether the Teacher acts at the next step of a takeover: at most M steps, only while it is
    sure enough of its action, and never to end the trajectory (the policy itself decides to stop)."""
    if steps_taken >= m or ends_trajectory:
        return False
    return teacher_confidence is not None and teacher_confidence >= min_confidence
