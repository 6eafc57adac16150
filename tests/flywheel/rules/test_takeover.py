"""Teacher takeover's rules (Xiaomi-GUI-0 §3.4): step scores, "after sustained low scores", and
"for bounded steps"."""
import pytest

from flywheel.rules.takeover import (
    DEFAULT_AFTER,
    DEFAULT_THRESHOLD,
    UNKNOWN_CONFIDENCE,
    step_score,
    takeover_continues,
    takeover_due,
)


def test_a_confident_step_the_teacher_agrees_with_scores_high():
    assert step_score(0.9, teacher_agrees=True, teacher_confidence=0.9) == pytest.approx(0.99)
    assert step_score(0.9) == 0.9                      # no Teacher opinion: the policy's own
    assert step_score(None) == UNKNOWN_CONFIDENCE      # a policy that states no confidence


def test_a_sure_teachers_disagreement_sinks_the_score_an_unsure_one_barely_moves_it():
    sure = step_score(0.9, teacher_agrees=False, teacher_confidence=0.9)
    unsure = step_score(0.9, teacher_agrees=False, teacher_confidence=0.1)
    assert sure < DEFAULT_THRESHOLD < unsure
    assert step_score(0.9, teacher_agrees=False, teacher_confidence=None) == 0.9  # no confidence: no weight


def test_signs_of_a_stuck_agent_lower_the_score():
    clean = step_score(0.7)
    assert step_score(0.7, repeated=True) < clean
    assert step_score(0.7, stalled=True) < clean
    assert step_score(0.7, repeated=True, stalled=True) < DEFAULT_THRESHOLD
    assert step_score(0.1, repeated=True, stalled=True) == 0.0     # never below 0
    assert step_score(3.0) == 1.0 and step_score(-1) == 0.0        # never outside [0, 1]


def test_takeover_after_k_consecutive_low_scores():
    low, high = 0.1, 0.9
    assert not takeover_due([low, low], k=3)
    assert takeover_due([low, low, low], k=3)
    assert takeover_due([high, low, low, low], k=3)
    assert not takeover_due([low, low, high], k=3)             # consecutive: a good step breaks the run
    assert not takeover_due([low, None, low], k=3)             # a step without a score breaks it too
    assert not takeover_due([low] * 10, k=0)                   # K = 0: takeover off
    assert takeover_due([0.39] * DEFAULT_AFTER, k=DEFAULT_AFTER)
    assert not takeover_due([DEFAULT_THRESHOLD] * 3, k=3)      # at the threshold is not low
    assert takeover_due([0.5, 0.5], k=2, threshold=0.6)


def test_the_teacher_acts_for_bounded_steps_only_while_sure_and_never_ends_the_trajectory():
    assert takeover_continues(0, 5, 0.9, ends_trajectory=False)
    assert takeover_continues(4, 5, 0.9, ends_trajectory=False)
    assert not takeover_continues(5, 5, 0.9, ends_trajectory=False)      # M steps spent
    assert not takeover_continues(1, 5, 0.3, ends_trajectory=False)      # unsure: the policy goes on
    assert not takeover_continues(1, 5, None, ends_trajectory=False)
    assert not takeover_continues(1, 5, 0.95, ends_trajectory=True)      # terminate is the policy's call
