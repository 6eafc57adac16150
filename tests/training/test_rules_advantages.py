"""Eq. 5 (GRPO), GiGPO's anchor-state advantages and eq. 6's clipped objective, hand-computed."""
import math

import pytest

from training.rules.advantages import (
    discounted_returns,
    gigpo_advantages,
    group_advantages,
    grpo_advantages,
    population_std,
)
from training.rules.objective import clipped_term, grpo_objective, kl_k3, step_term


def approx(rows):
    return [pytest.approx(row, abs=1e-12) for row in rows]


def test_eq_5_for_a_group_of_three():
    # R = [1, 0.5, 0]: mean 0.5, population std √(0.5/3) = 1/√6, so (R − 0.5)·√6 = ±0.5√6 = ±√1.5.
    # Steps of trajectory 0, [1, 1, 0, 1]: mean 0.75, std √(0.1875) = √3/4: 0.25/(√3/4) = 1/√3, −0.75/(√3/4) = −√3.
    # Trajectory 1, [1, −1]: mean 0, std 1. Trajectory 2, [0, 0, 0]: equal steps, step term 0.
    advantages = grpo_advantages([1.0, 0.5, 0.0], [[1, 1, 0, 1], [1, -1], [0, 0, 0]])
    e = math.sqrt(1.5)
    assert advantages == approx([[e + 1 / math.sqrt(3)] * 2 + [e - math.sqrt(3), e + 1 / math.sqrt(3)],
                                 [1.0, -1.0],
                                 [-e, -e, -e]])


def test_lambda_weighs_the_step_term():
    advantages = grpo_advantages([1.0, 0.5, 0.0], [[1, 1, 0, 1], [1, -1], [0, 0, 0]], lam=0.5)
    assert advantages[1] == pytest.approx([0.5, -0.5])
    assert grpo_advantages([1.0, 0.0], [[1, -1], [0, 1]], lam=0.0) == [[1.0, 1.0], [-1.0, -1.0]]


def test_a_group_of_equal_rewards_gives_zero_not_nan():
    # 0.1 three times: the float mean is 0.10000000000000002, yet the term is exactly 0
    advantages = grpo_advantages([0.1, 0.1, 0.1], [[1, 0], [0, 0], [-1, -1]])
    assert advantages == [[1.0, -1.0], [0.0, 0.0], [0.0, 0.0]]
    assert grpo_advantages([0.7], [[1]]) == [[0.0]]  # a group of one


def test_std_is_the_population_std():
    assert population_std([1.0, 0.0]) == 0.5        # the sample std would be 0.7071


def test_a_group_must_match_its_steps():
    with pytest.raises(ValueError):
        grpo_advantages([1.0, 0.0], [[1]])
    with pytest.raises(ValueError, match="no steps"):
        grpo_advantages([1.0, 0.0], [[1], []])


def test_discounted_returns():
    # γ = 0.5: G2 = 2, G1 = 0 + 0.5·2 = 1, G0 = 1 + 0.5·1 = 1.5
    assert discounted_returns([1, 0, 2], 0.5) == [1.5, 1.0, 2.0]
    assert discounted_returns([1, 1], 1.0) == [2.0, 1.0]


def test_gigpo_normalises_returns_within_anchor_states():
    # A: anchors [s0, s1, s2], rewards [0, 1, 1]; γ = 0.5 → returns [0.75, 1.5, 1].
    # B: anchors [s0, s1, s3], rewards [−1, 0, 0] → returns [−1, 0, 0].
    # s0: {0.75, −1}, mean −0.125, std 0.875 → ±1. s1: {1.5, 0}, mean 0.75, std 0.75 → ±1.
    # s2 and s3 hold one step each → 0. Episode: R = [1, 0.25] → ±1. ω = 1.
    advantages = gigpo_advantages([1.0, 0.25], [[0, 1, 1], [-1, 0, 0]],
                                  [["s0", "s1", "s2"], ["s0", "s1", "s3"]], gamma=0.5)
    assert advantages == approx([[2.0, 2.0, 1.0], [-2.0, -2.0, -1.0]])


def test_gigpo_mean_norm_and_omega():
    # no division by std: episode ±0.375, s0 ±0.875, s1 ±0.75; ω = 2 doubles the step level
    advantages = gigpo_advantages([1.0, 0.25], [[0, 1, 1], [-1, 0, 0]],
                                  [["s0", "s1", "s2"], ["s0", "s1", "s3"]], gamma=0.5, scale=False, omega=2.0)
    assert advantages == approx([[0.375 + 1.75, 0.375 + 1.5, 0.375], [-0.375 - 1.75, -0.375 - 1.5, -0.375]])


def test_a_state_revisited_within_one_trajectory_is_its_own_comparison():
    # A loops on s0 twice: rewards [−1, 1] → returns (γ = 1) [0, 1]; s0 = {0, 1, B's 1} → mean 2/3,
    # std √(2/9): (0 − 2/3)/√(2/9) = −√2, (1 − 2/3)/√(2/9) = 1/√2. Equal R: the episode level is 0.
    advantages = gigpo_advantages([0.5, 0.5], [[-1, 1], [1]], [["s0", "s0"], ["s0"]], gamma=1.0)
    assert advantages == approx([[-math.sqrt(2), 1 / math.sqrt(2)], [1 / math.sqrt(2)]])


def test_the_run_config_selects_the_advantage():
    rewards, steps, anchors = [1.0, 0.0], [[1, 0], [0, -1]], [["a", "b"], ["a", "c"]]
    assert group_advantages("grpo", rewards, steps) == grpo_advantages(rewards, steps)
    assert group_advantages("gigpo", rewards, steps, anchors, gamma=0.9) == gigpo_advantages(
        rewards, steps, anchors, gamma=0.9)
    with pytest.raises(ValueError, match="anchor"):
        group_advantages("gigpo", rewards, steps)
    with pytest.raises(ValueError, match="unknown advantage"):
        group_advantages("ppo", rewards, steps)
    with pytest.raises(ValueError, match="anchors"):
        gigpo_advantages(rewards, steps, [["a"], ["a", "c"]])


def test_the_clip_stops_the_gain_above_one_plus_epsilon():
    assert clipped_term(math.log(1.5), 2.0) == pytest.approx(2.4)     # min(3, 1.2·2)
    assert clipped_term(math.log(1.1), 1.0) == pytest.approx(1.1)     # inside the band: ρA


def test_the_clip_stops_the_relief_below_one_minus_epsilon():
    assert clipped_term(math.log(0.5), -1.0) == pytest.approx(-0.8)   # min(−0.5, 0.8·−1)


def test_the_min_keeps_the_pessimistic_side_unclipped():
    assert clipped_term(math.log(1.5), -1.0) == pytest.approx(-1.5)   # min(−1.5, −1.2)
    assert clipped_term(math.log(0.5), 1.0) == pytest.approx(0.5)     # min(0.5, 0.8)
    assert clipped_term(math.log(1.5), 2.0, epsilon=0.0) == pytest.approx(2.0)


def test_kl_k3_is_zero_when_equal_and_positive_otherwise():
    assert kl_k3(-1.3, -1.3) == 0.0
    # logp = log 0.5, ref = log 0.25: d = log 0.5, so 0.5 − log 0.5 − 1 = log 2 − 0.5
    assert kl_k3(math.log(0.5), math.log(0.25)) == pytest.approx(math.log(2) - 0.5)
    assert kl_k3(-2.0, -0.5) > 0 and kl_k3(-0.5, -2.0) > 0


def test_eq_6_averages_steps_then_trajectories():
    # trajectory 0: (ρ = 1, A = 1) → 1 and (ρ = 1.5, A = 2) → 2.4, mean 1.7; trajectory 1: (ρ = 0.5, A = −1) → −0.8
    groups = [[(0.0, 1.0), (math.log(1.5), 2.0)], [(math.log(0.5), -1.0)]]
    assert grpo_objective(groups) == pytest.approx((1.7 - 0.8) / 2)
    with pytest.raises(ValueError):
        grpo_objective([])
    with pytest.raises(ValueError, match="no steps"):
        grpo_objective([[(0.0, 1.0)], []])


def test_a_steps_ratio_per_response_gspo_or_per_token_grpo():
    """Two tokens with ratios 1.5 and 0.5, ε = 0.2. Per token (GRPO): A = 1 gives min(1.5, 1.2) = 1.2 and
    min(0.5, 0.8) = 0.5, mean 0.85; A = −1 gives −1.5 and −0.8, mean −1.15. Per response (GSPO): the
    geometric mean √0.75 ≈ 0.866 is inside the clip, so ±0.866 either way."""
    tokens = [math.log(1.5), math.log(0.5)]
    assert step_term(tokens, 1.0, 0.2, "token") == pytest.approx(0.85)
    assert step_term(tokens, -1.0, 0.2, "token") == pytest.approx(-1.15)
    assert step_term(tokens, 1.0, 0.2, "sequence") == pytest.approx(math.sqrt(0.75))
    assert step_term(tokens, -1.0, 0.2, "sequence") == pytest.approx(-math.sqrt(0.75))
    # Every token at the same ratio: the two agree (here 1.5 for all: clipped to 1.2 · A with A > 0).
    assert step_term([math.log(1.5)] * 3, 2.0, 0.2, "token") == pytest.approx(2.4)
    assert step_term([math.log(1.5)] * 3, 2.0, 0.2, "sequence") == pytest.approx(2.4)
    with pytest.raises(ValueError, match="importance_ratio"):
        step_term(tokens, 1.0, 0.2, "trajectory")
    with pytest.raises(ValueError, match="at least one"):
        step_term([], 1.0)
