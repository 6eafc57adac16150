"""Curriculum sampling (Xiaomi-GUI-0 §4.4) and the useful groups with their fallback (§3.3.2–3.3.3)."""
import math

import pytest

from training.rules.curriculum import sample_queries, sampling_weights, smoothed_success_rate
from training.rules.groups import fallback_successes, success_rate, useful_group


def test_success_rates_are_laplace_smoothed():
    assert smoothed_success_rate(0, 0) == 0.5        # (0 + 1) / (0 + 2)
    assert smoothed_success_rate(3, 4) == 4 / 6
    assert smoothed_success_rate(0, 8) == 0.1        # never 0: a hard query keeps a chance
    assert smoothed_success_rate(1, 3, prior_successes=2, prior_attempts=5) == 3 / 8
    with pytest.raises(ValueError):
        smoothed_success_rate(5, 4)


def test_sampling_shifts_from_easy_to_hard_queries():
    # p = [0.8, 0.2], τ = 0.25. Start (α = 1, β = 0): scores [3.2, 0.8], the easy one weighs 1/(1 + e^−2.4).
    easy_first = sampling_weights([0.8, 0.2], progress=0.0)
    assert easy_first == pytest.approx([1 / (1 + math.exp(-2.4)), 1 / (1 + math.exp(2.4))])
    # End (α = 0, β = 1): scores [0.8, 3.2], reversed. Halfway (α = β = 0.5): every score 2, uniform.
    assert sampling_weights([0.8, 0.2], progress=1.0) == pytest.approx(easy_first[::-1])
    assert sampling_weights([0.8, 0.2, 0.5], progress=0.5) == pytest.approx([1 / 3] * 3)


def test_the_temperature_sets_how_sharp_the_preference_is():
    # τ = 1 at the start: scores [0.8, 0.2], weights 1/(1 + e^−0.6)
    assert sampling_weights([0.8, 0.2], 0.0, temperature=1.0)[0] == pytest.approx(1 / (1 + math.exp(-0.6)))
    assert sum(sampling_weights([0.1, 0.9, 0.4, 0.4], 0.3)) == pytest.approx(1.0)
    assert sampling_weights([], 0.5) == []
    with pytest.raises(ValueError):
        sampling_weights([0.5], 1.5)
    with pytest.raises(ValueError):
        sampling_weights([0.5], 0.5, temperature=0)


def test_sampling_is_deterministic_distinct_and_weighted():
    ids, weights = ["a", "b", "c", "d"], [0.4, 0.3, 0.2, 0.1]
    first = sample_queries(ids, weights, 3, seed=7)
    assert first == sample_queries(ids, weights, 3, seed=7)
    assert len(set(first)) == 3 and set(first) <= set(ids)
    assert sample_queries(ids, [1, 0, 1, 0], 4, seed=1) in (["a", "c"], ["c", "a"])  # weight 0: never
    assert sample_queries(ids, weights, 0, seed=1) == []
    # the first draw follows the weights: a 0.9 query comes first in about 90% of seeds
    firsts = sum(sample_queries(["x", "y"], [0.9, 0.1], 1, seed=s) == ["x"] for s in range(2000))
    assert 0.87 < firsts / 2000 < 0.93


def test_groups_without_contrast_are_not_useful():
    assert useful_group([True, False, True])
    assert useful_group(["true", "false"])
    assert not useful_group([True, True, True])
    assert not useful_group(["false", "false"])
    assert not useful_group([])
    assert success_rate(["true", "false", "false", "false"]) == 0.25


def test_the_useful_range_is_inclusive():
    assert useful_group([True, False], low=0.5, high=0.8)
    assert not useful_group([True, False, False], low=0.5, high=0.8)      # 1/3 < 0.5
    assert not useful_group([True] * 9 + [False], low=0.2, high=0.8)      # 0.9 > 0.8
    with pytest.raises(ValueError):
        useful_group([True, False], low=0.8, high=0.2)


def rollout(name, success):
    return {"name": name, "success": success}


def succeeded(item):
    return item["success"]


def test_a_failed_group_borrows_earlier_successes_up_to_the_cap():
    group = [rollout(f"f{i}", False) for i in range(4)]
    earlier = [rollout(f"s{i}", True) for i in range(3)]
    mixed = fallback_successes(group, earlier, cap=2, succeeded=succeeded)
    assert [r["name"] for r in mixed] == ["f0", "f1", "s0", "s1"]   # the last failures replaced, G kept
    assert useful_group([r["success"] for r in mixed])


def test_the_fallback_keeps_one_failure_and_leaves_groups_with_a_success_alone():
    group = [rollout(f"f{i}", False) for i in range(4)]
    earlier = [rollout(f"s{i}", True) for i in range(5)]
    assert [r["name"] for r in fallback_successes(group, earlier, cap=10, succeeded=succeeded)] == [
        "f0", "s0", "s1", "s2"]
    with_success = [rollout("f0", False), rollout("ok", True)]
    assert fallback_successes(with_success, earlier, cap=2, succeeded=succeeded) == with_success
    assert fallback_successes(group, earlier, cap=0, succeeded=succeeded) == group
    assert fallback_successes(group, [], cap=2, succeeded=succeeded) == group
    assert fallback_successes([False, False], [True], cap=1) == [False, True]   # plain flags by default
    with pytest.raises(ValueError):
        fallback_successes(group, earlier, cap=-1, succeeded=succeeded)
