"""Eq. 3 and eq. 4 (report §3.3.2), the majority over judge passes (§5.3.5) and Xiaomi-GUI-0's cascade
reward (§4.3), hand-computed."""
import pytest

from training.rules.rewards import (
    CASCADE_LEVELS,
    EXECUTION,
    JUDGE,
    NECESSARY,
    OFF_COURSE,
    PARSE,
    RULES,
    STEP_REWARDS,
    USELESS,
    StepFacts,
    atomic_conditions_hold,
    cascade_failure,
    cascade_levels,
    cascade_reward,
    judge_asked,
    majority_cascade_rewards,
    majority_done,
    majority_step_rewards,
    majority_vote,
    step_reward,
    trajectory_reward,
)


def test_the_trajectory_reward_is_half_progress_half_quality():
    # 2 of 4 sub-goals in 8 steps: 0.5 · 2/4 + 0.5 · 4/8 = 0.25 + 0.25
    assert trajectory_reward(2, 4, 8) == 0.5
    # every sub-goal, one step each: 0.5 · 1 + 0.5 · 1
    assert trajectory_reward(4, 4, 4) == 1.0
    # a detour: 4 of 4 in 16 steps: 0.5 + 0.5 · 0.25
    assert trajectory_reward(4, 4, 16) == 0.625
    # α = 0.25: 0.25 · 1/4 + 0.75 · 4/8 = 0.0625 + 0.375
    assert trajectory_reward(1, 4, 8, alpha=0.25) == 0.4375


def test_quality_is_capped_at_one_and_zero_steps_have_no_quality():
    # 3 of 4 in 2 steps: the quality 4/2 counts as 1, so 0.5 · 0.75 + 0.5 · 1
    assert trajectory_reward(3, 4, 2) == 0.875
    assert trajectory_reward(0, 4, 0) == 0.0
    assert trajectory_reward(1, 1, 0) == 0.5


@pytest.mark.parametrize("args, message", [
    ((0, 0, 3), "N_nec = 0"), ((3, 2, 5), "exceeds"), ((-1, 2, 5), "n_done"), ((1, 2, -5), "steps"),
    ((True, 2, 5), "n_done"), ((1.0, 2, 5), "n_done"),
])
def test_impossible_counts_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        trajectory_reward(*args)


def test_alpha_must_be_a_weight():
    with pytest.raises(ValueError, match="alpha"):
        trajectory_reward(1, 2, 3, alpha=1.5)


def test_step_rewards_are_the_three_values_of_eq_4():
    assert STEP_REWARDS == (1, 0, -1) == (NECESSARY, USELESS, OFF_COURSE)


def test_the_majority_wins_and_a_tie_goes_to_the_conservative_value():
    assert majority_vote([1, 1, 0, -1, 1]) == 1
    assert majority_vote([1, 1, 0, 0, -1]) == 0      # 1 and 0 tie at two: 0
    assert majority_vote([1, -1]) == -1
    assert majority_vote([True, False]) is False
    with pytest.raises(ValueError):
        majority_vote([])


def test_step_rewards_are_voted_step_by_step_over_five_passes():
    passes = [[1, 0, -1], [1, -1, -1], [0, 0, 1], [1, 0, -1], [1, 1, -1]]
    # step 0: four 1s; step 1: three 0s; step 2: four −1s
    assert majority_step_rewards(passes) == [1, 0, -1]
    assert majority_step_rewards([[1, 0], [0, 1]]) == [0, 0]   # ties: the lower rating
    assert majority_step_rewards([[1, 0, -1]] * 5) == [1, 0, -1]  # deterministic passes agree


def test_passes_must_rate_the_same_steps_with_eq_4_values():
    with pytest.raises(ValueError, match="every step"):
        majority_step_rewards([[1, 0], [1]])
    with pytest.raises(ValueError, match="one of"):
        majority_step_rewards([[2, 0]])
    with pytest.raises(ValueError):
        majority_step_rewards([])


def test_done_counts_take_the_majority_and_the_smaller_count_on_a_tie():
    assert majority_done([2, 2, 2, 1, 3]) == 2
    assert majority_done([3, 3, 2, 4, 4]) == 3


def test_atomic_conditions_must_all_hold():
    assert atomic_conditions_hold([True, True, True])
    assert not atomic_conditions_hold([True, False, True])  # not disjunctive: one miss fails
    assert not atomic_conditions_hold([True, None])          # unchecked does not hold
    assert not atomic_conditions_hold([])                    # nothing checked proves nothing


def test_frame_bound_facts_decide_before_the_judge_and_safety_before_progress():
    assert step_reward(StepFacts(blocked=True, advanced=True)) == OFF_COURSE
    assert step_reward(StepFacts(advanced=True), judge_rating=-1) == NECESSARY
    assert step_reward(StepFacts(completes=True)) == NECESSARY
    assert step_reward(StepFacts(blocked=True), judge_rating=1) == OFF_COURSE


def test_without_a_fact_the_judge_rates_and_without_a_judge_the_rule_does():
    assert step_reward(StepFacts(left_task=True), judge_rating=0) == USELESS
    assert step_reward(StepFacts(), judge_rating=1) == NECESSARY
    assert step_reward(StepFacts(left_task=True)) == OFF_COURSE
    assert step_reward(StepFacts(stalled=True)) == OFF_COURSE
    assert step_reward(StepFacts(false_success=True)) == OFF_COURSE
    assert step_reward(StepFacts()) == USELESS
    with pytest.raises(ValueError):
        step_reward(StepFacts(), judge_rating=5)


# -- the cascade reward (Xiaomi-GUI-0 §4.3) --------------------------------------------------------

def test_the_cascade_pays_minus_one_for_parse_or_execution_minus_a_half_for_the_rest_one_when_all_pass():
    assert CASCADE_LEVELS == (PARSE, EXECUTION, RULES, JUDGE)
    assert cascade_reward({PARSE: True, EXECUTION: True, RULES: True, JUDGE: True}) == 1.0
    assert cascade_reward({PARSE: False}) == -1.0
    assert cascade_reward({PARSE: True, EXECUTION: False}) == -1.0
    assert cascade_reward({PARSE: True, EXECUTION: True, RULES: False}) == -0.5
    assert cascade_reward({PARSE: True, EXECUTION: True, RULES: True, JUDGE: False}) == -0.5


def test_the_cascade_exits_at_the_first_failure_in_its_own_order():
    # parse failed: what a later level says is never read (the mapping's order does not matter)
    assert cascade_failure({JUDGE: False, RULES: False, EXECUTION: True, PARSE: False}) == PARSE
    assert cascade_reward({JUDGE: True, RULES: True, EXECUTION: False, PARSE: True}) == -1.0
    assert cascade_failure({PARSE: True, EXECUTION: True, RULES: False, JUDGE: False}) == RULES
    assert cascade_failure({PARSE: True, EXECUTION: True, RULES: True, JUDGE: True}) is None


def test_a_level_not_checked_is_passed_over():
    # no judge configured (or it did not answer): the rules are the last word
    assert cascade_reward({PARSE: True, EXECUTION: True, RULES: True, JUDGE: None}) == 1.0
    assert cascade_reward({PARSE: True, EXECUTION: True, RULES: True}) == 1.0
    assert cascade_reward({PARSE: True, EXECUTION: True, RULES: None, JUDGE: False}) == -0.5
    assert cascade_failure({PARSE: True, EXECUTION: True, RULES: None, JUDGE: False}) == JUDGE


@pytest.mark.parametrize("levels, message", [
    ({}, "at least one checked"), ({PARSE: None, JUDGE: None}, "at least one checked"),
    ({"format": True}, "unknown cascade level 'format'"), ({PARSE: 1}, "not 1"), ({RULES: "yes"}, "not 'yes'"),
])
def test_malformed_level_results_are_refused(levels, message):
    with pytest.raises(ValueError, match=message):
        cascade_reward(levels)


def test_a_steps_facts_become_the_cascades_levels():
    # output that did not parse: nothing after it is checked
    assert cascade_levels(StepFacts(), parsed=False) == {PARSE: False, EXECUTION: None, RULES: None, JUDGE: None}
    # blocked by the audit, or failed in the executor: an execution failure, the rules not looked at
    assert cascade_levels(StepFacts(blocked=True, advanced=True)) == {PARSE: True, EXECUTION: False,
                                                                       RULES: None, JUDGE: None}
    assert cascade_reward(cascade_levels(StepFacts(), failed=True)) == -1.0
    # off the task's apps, a repeated no-op, a false success: the rules fail, the judge is not asked
    for facts in (StepFacts(left_task=True), StepFacts(stalled=True), StepFacts(false_success=True)):
        assert cascade_levels(facts, judge_rating=1) == {PARSE: True, EXECUTION: True, RULES: False, JUDGE: None}
        assert cascade_reward(cascade_levels(facts)) == -0.5 and not judge_asked(facts)
    # measured progress passes the rules and the judge whatever it says
    assert cascade_levels(StepFacts(advanced=True, left_task=True), judge_rating=-1)[JUDGE] is True
    assert cascade_reward(cascade_levels(StepFacts(completes=True), judge_rating=0)) == 1.0
    assert not judge_asked(StepFacts(advanced=True))
    # otherwise the judge decides: only "necessary" passes; without a rating the rules' pass stands
    assert judge_asked(StepFacts())
    assert [cascade_reward(cascade_levels(StepFacts(), judge_rating=r)) for r in (1, 0, -1)] == [1.0, -0.5, -0.5]
    assert cascade_reward(cascade_levels(StepFacts())) == 1.0
    with pytest.raises(ValueError, match="one of"):
        cascade_levels(StepFacts(), judge_rating=2)


def test_the_cascade_rewards_take_the_majority_over_passes():
    passes = [[1.0, -0.5, -1.0], [-0.5, -0.5, -1.0], [1.0, 1.0, -1.0]]
    assert majority_cascade_rewards(passes) == [1.0, -0.5, -1.0]
    assert majority_cascade_rewards([[1.0], [-0.5]]) == [-0.5]     # a tie: the lower reward
    with pytest.raises(ValueError, match="one of"):
        majority_cascade_rewards([[0.0]])
    with pytest.raises(ValueError, match="every step"):
        majority_cascade_rewards([[1.0], [1.0, 1.0]])
