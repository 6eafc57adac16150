"""A session's outcome is what its annotator states: the rule that decides which endings need it."""
import pytest

from flywheel.rules.stated_outcome import OutcomeNotStated, Stated, needs_statement, state_outcome

FAILURE = {"action": "terminate", "status": "failure"}
SUCCESS = {"action": "terminate", "status": "success"}
CALL_USER = {"action": "call_user", "reason": "pay?"}


@pytest.mark.parametrize("action, handoff, needs", [
    (SUCCESS, "", False), (FAILURE, "", True), (CALL_USER, "", True), (CALL_USER, "call_user", False),
    (SUCCESS, "call_user", True),  # success declared where the user was to take over (§4.3)
    ({"action": "click", "point": [1, 2]}, "", False), ({"action": "clarify", "question": "?"}, "", False),
])
def test_every_ending_but_a_success_needs_the_annotators_statement(action, handoff, needs):
    assert needs_statement(action, handoff) is needs


def test_an_unstated_failure_is_refused_and_a_stated_one_kept_with_its_reason():
    with pytest.raises(OutcomeNotStated, match="stated_outcome 'failure'"):
        state_outcome(FAILURE)
    with pytest.raises(OutcomeNotStated):
        state_outcome(FAILURE, stated="success")        # a failure is never stated a success
    assert state_outcome(FAILURE, stated="failure") == (Stated.FAILURE, "")
    assert state_outcome(CALL_USER, stated="infeasible", reason="  no such setting ") == (
        Stated.INFEASIBLE, "no such setting")


def test_a_success_is_stated_by_executing_it_and_cannot_be_stated_otherwise():
    assert state_outcome(SUCCESS) == (Stated.SUCCESS, "")
    assert state_outcome(CALL_USER, expected_handoff="call_user") == (Stated.SUCCESS, "")
    with pytest.raises(OutcomeNotStated, match="status to failure"):
        state_outcome(SUCCESS, stated="infeasible")
    assert state_outcome({"action": "wait", "seconds": 1}, stated="failure") is None  # no ending, no statement
