"""Calibration that compounds (§2.4.2): thresholds chosen by agreement with people, consensus rate
per round, rising or not."""
from flywheel.rules.calibration import (
    FALLING,
    LEVEL,
    RISING,
    agreement,
    consensus_rate,
    consensus_trend,
    retroactively_calibrated_threshold,
)


def test_the_threshold_that_agrees_most_with_the_adjudicators_wins():
    tallies = {3: (4, 6), 4: (8, 2), 5: (8, 2), 2: (3, 7)}
    # 4 and 5 agree equally; candidates are listed nearest the current value first
    assert retroactively_calibrated_threshold([3, 4, 2, 5], tallies, current=3) == 4


def test_fewer_disagreements_break_a_tie_in_agreements():
    assert retroactively_calibrated_threshold([1.0, 0.9, 0.8], {1.0: (5, 3), 0.9: (5, 1), 0.8: (5, 2)}, 1.0) == 0.9


def test_the_current_value_stays_unless_the_people_say_otherwise():
    assert retroactively_calibrated_threshold([3, 4, 2], {3: (6, 1), 4: (6, 1), 2: (5, 2)}, current=3) == 3
    assert retroactively_calibrated_threshold([], {}, current=3) == 3
    # no evidence at all: nothing moves
    assert retroactively_calibrated_threshold([3, 4], {}, current=3) == 3
    # works for joint thresholds too
    pairs = [(3, 3.0), (4, 3.0), (3, 4.0)]
    assert retroactively_calibrated_threshold(pairs, {(4, 3.0): (9, 0)}, current=(3, 3.0)) == (4, 3.0)


def test_consensus_rate_is_the_share_not_undetermined():
    assert consensus_rate(["true", "false", "undetermined", "env_error"]) == 0.75
    assert consensus_rate([]) is None


def test_consensus_trend_per_round():
    assert consensus_trend([0.6, 0.7, 0.7, None, 0.65]) == ["", RISING, LEVEL, "", FALLING]
    assert consensus_trend([]) == []


def test_agreement_of_votes_with_people():
    pairs = [("true", "true"), ("false", "true"), ("abstain", "false"), ("env_error", "env_error")]
    assert agreement(pairs) == {"cases": 4, "agreed": 2, "disagreed": 1, "abstained": 1, "rate": 0.667}
    assert agreement([("abstain", "true")])["rate"] is None
