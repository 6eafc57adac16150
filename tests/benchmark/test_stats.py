"""The success rate's interval and the paired test, on cases worked by hand."""
import pytest

from benchmark.stats import bootstrap_ci, mcnemar_exact, paired_difference


def test_an_evaluation_that_always_or_never_succeeds_has_no_spread():
    assert bootstrap_ci([True] * 12) == (1.0, 1.0)
    assert bootstrap_ci([False] * 12) == (0.0, 0.0)
    assert bootstrap_ci([]) == (None, None)


def test_the_interval_holds_the_rate_is_seeded_and_narrows_with_more_tasks():
    half = [True, False] * 50  # SR 0.5 over 100 tasks: the normal interval is 0.5 ± 1.96·0.05 = 0.40..0.60
    lo, hi = bootstrap_ci(half)
    assert 0.38 <= lo <= 0.42 and 0.58 <= hi <= 0.62
    assert bootstrap_ci(half) == (lo, hi)  # the same seed, the same interval
    small_lo, small_hi = bootstrap_ci([True, False] * 5)
    assert small_lo < lo < 0.5 < hi < small_hi
    narrow_lo, narrow_hi = bootstrap_ci(half, level=0.5)
    assert lo < narrow_lo < 0.5 < narrow_hi < hi


def test_the_same_outcomes_twice_differ_by_nothing():
    outcomes = [True, False, True, True, False]
    found = paired_difference(outcomes, outcomes)
    assert found == {"tasks": 5, "gained": 0, "lost": 0, "p_value": 1.0, "delta": 0.0, "ci95": (0.0, 0.0)}


def test_ten_tasks_all_gained_is_the_sign_test_two_tails():
    found = paired_difference([False] * 10 + [True] * 5, [True] * 15)
    assert found["gained"] == 10 and found["lost"] == 0
    assert found["p_value"] == pytest.approx(2 * 0.5 ** 10)
    assert found["delta"] == pytest.approx(10 / 15)
    lo, hi = found["ci95"]
    assert 0 < lo < 10 / 15 < hi <= 1  # every task can only be gained: the interval stays above 0


def test_mcnemar_by_hand():
    # 3 gained, 1 lost: P(X <= 1) for X ~ Bin(4, 1/2) is (1 + 4)/16, both tails 10/16.
    assert mcnemar_exact(3, 1) == pytest.approx(10 / 16)
    assert mcnemar_exact(1, 3) == mcnemar_exact(3, 1)
    assert mcnemar_exact(2, 2) == 1.0  # the two tails overlap: capped at 1
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 1) == 1.0


def test_a_loss_is_negative_and_mismatched_or_empty_inputs_are_handled():
    found = paired_difference([True, True, True, False], [False, True, True, False])
    assert found["delta"] == -0.25 and found["lost"] == 1 and found["p_value"] == 1.0
    assert found["ci95"][0] < 0 and found["ci95"][1] == 0.0
    assert paired_difference([], []) == {"tasks": 0, "gained": 0, "lost": 0, "p_value": 1.0, "delta": None,
                                         "ci95": (None, None)}
    with pytest.raises(ValueError, match="same tasks"):
        paired_difference([True], [True, False])
