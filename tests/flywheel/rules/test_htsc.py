"""HTSC voting against every combination of votes and the report's own cases (§2.4.2)."""
import itertools

import pytest

from flywheel.rules.htsc import (
    ABSTAIN,
    ENV_ERROR,
    FALSE,
    TRUE,
    UNDETERMINED,
    VOTE_VALUES,
    htsc_consensus,
    route_adjudication,
    route_outcome,
)


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
