"""HTSC voting against every combination of votes, and the pool rules (§2.4.2, §2.4.3)."""
import itertools

import pytest

from flywheel.htsc import (ABSTAIN, ENV_ERROR, FALSE, TRUE, UNDETERMINED, VOTE_VALUES,
                           htsc_consensus, route_adjudication, route_outcome)
from flywheel.pool_rules import (KEEP, LEAVE, RETIRE, phase0_prescreen, rl_pool_metabolism,
                                 rl_uniform_intake_gate, sft_intake_allowed)


def expected(a, b, c):
    """The report's rule, restated independently as a lookup."""
    if a == FALSE:
        return FALSE
    if a == ENV_ERROR:
        return ENV_ERROR
    if a == TRUE:
        both_object = b in (FALSE, ENV_ERROR) and c in (FALSE, ENV_ERROR)
        return UNDETERMINED if both_object else TRUE
    if b == c == TRUE:
        return TRUE
    if b == c == FALSE:
        return FALSE
    if b == c == ENV_ERROR:
        return ENV_ERROR
    return UNDETERMINED


@pytest.mark.parametrize("a,b,c", list(itertools.product(VOTE_VALUES, repeat=3)))
def test_every_combination_of_votes(a, b, c):
    assert htsc_consensus(a, b, c) == expected(a, b, c)
    # The safety veto bypasses the vote whatever the systems say.
    assert htsc_consensus(a, b, c, safety_violation=True) == FALSE


def test_the_reports_cases():
    assert htsc_consensus(FALSE, TRUE, TRUE) == FALSE            # A's failure is a fact
    assert htsc_consensus(ENV_ERROR, TRUE, TRUE) == ENV_ERROR    # ...with an environmental cause
    assert htsc_consensus(TRUE, FALSE, FALSE) == UNDETERMINED    # B and C unanimously object
    assert htsc_consensus(TRUE, FALSE, TRUE) == TRUE             # one objection is not enough
    assert htsc_consensus(ABSTAIN, TRUE, TRUE) == TRUE
    assert htsc_consensus(ABSTAIN, FALSE, FALSE) == FALSE
    assert htsc_consensus(ABSTAIN, TRUE, FALSE) == UNDETERMINED
    assert htsc_consensus(ABSTAIN, ABSTAIN, ABSTAIN) == UNDETERMINED


def test_unknown_votes_are_refused():
    with pytest.raises(ValueError, match="unknown vote"):
        htsc_consensus("yes", TRUE, TRUE)


def test_every_outcome_has_one_destination():
    assert route_outcome(TRUE) == "sft" and route_outcome(FALSE) == "ecdm"
    assert route_outcome(ENV_ERROR) == "env_healing" and route_outcome(UNDETERMINED) == "adjudication"
    assert route_adjudication("correct") == (TRUE, "sft")
    assert route_adjudication("wrong") == (FALSE, "ecdm")
    assert route_adjudication("environment") == (ENV_ERROR, "env_healing")


def test_rl_pool_metabolism():
    assert rl_pool_metabolism(["true"] * 8) == RETIRE
    assert rl_pool_metabolism(["false"] * 8) == LEAVE
    assert rl_pool_metabolism(["true", "false", "false"]) == KEEP
    assert rl_pool_metabolism(["true", "env_error"]) == RETIRE  # the environment is not scored
    assert rl_pool_metabolism(["env_error"]) == KEEP


def test_phase0_and_uniform_gate():
    assert phase0_prescreen("L1", 3, False, 1) == []
    assert phase0_prescreen("L3", 12, True, 2) == ["tier L3", "depth 12", "cross-app", "multi-function"]
    assert rl_uniform_intake_gate(["true", "false"]) and not rl_uniform_intake_gate(["true", "true"])
    assert not rl_uniform_intake_gate([]) and not rl_uniform_intake_gate(["false"])


def test_sft_takes_only_high_confidence_intakes():
    assert all(sft_intake_allowed(i) for i in ("htsc_true", "adjudicated", "ecdm_repaired",
                                                "semi_auto_verified"))
    assert not sft_intake_allowed("automatic") and not sft_intake_allowed("htsc_false")
