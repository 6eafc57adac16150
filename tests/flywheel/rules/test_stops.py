"""How a trajectory stops, as data (flywheel/rules/stops.py): every kind classified, the agent's
own endings read from its last action, the control actions defined once."""
import pytest

from flywheel.rules.stops import (
    AGENT_STOPS,
    ASKING_ACTIONS,
    CUT_SHORT_BY_THE_ENVIRONMENT,
    ENDING_ACTIONS,
    HOLDER_WENT_AWAY,
    INTERRUPTING,
    LABELS,
    NO_USABLE_ACTION,
    PHONE_GONE,
    Stop,
    StopKind,
    agent_ending,
    agent_stop,
    holder_went_away,
    interrupts,
    phone_gone,
)

# Every kind, and whether it cuts the trajectory short (status interrupted) or completes it.
CUT_SHORT = {
    StopKind.POLICY_ERROR, StopKind.ENDPOINT_FAILED, StopKind.ACTION_FAILED, StopKind.LEASE_LOST,
    StopKind.PHONE_LOST, StopKind.RESET_FAILED, StopKind.CANCELLED, StopKind.ALREADY_DONE,
    StopKind.WORKER_STOPPED, StopKind.CRASHED, StopKind.CLARIFY_UNANSWERED,
}
COMPLETED = {
    StopKind.SUCCESS, StopKind.FAILURE, StopKind.HANDOFF, StopKind.MAX_STEPS, StopKind.TIMEOUT,
    StopKind.REPEATED_ACTIONS, StopKind.BLOCKED, StopKind.CLARIFY_STOPPED, StopKind.CLOSED_BY_CLIENT,
    StopKind.PAUSED, StopKind.LEFT_THE_PAGE, StopKind.NOT_EXECUTABLE, StopKind.REPAIRED_SAMPLE, StopKind.HANDBACK_SAMPLE,
    StopKind.PREREQUISITE_UNMET,
}


def test_every_kind_is_classified_once_and_labelled():
    assert CUT_SHORT | COMPLETED == set(StopKind) and not CUT_SHORT & COMPLETED
    assert set(LABELS) == set(StopKind) and all(LABELS[kind] == kind.label for kind in StopKind)
    assert all(len(kind.value) <= 20 for kind in StopKind)  # Trajectory.stop_kind's max_length


@pytest.mark.parametrize("kind", sorted(StopKind))
def test_a_kind_interrupts_exactly_when_it_cuts_the_trajectory_short(kind):
    assert interrupts(kind) == (kind in CUT_SHORT)
    assert interrupts(kind.value) == interrupts(kind)  # a stored value reads the same as the member


def test_not_stopped_yet_is_no_kind():
    assert not interrupts("") and not holder_went_away("") and not phone_gone("")


def test_the_classifications_name_the_kinds_they_mean():
    assert HOLDER_WENT_AWAY == {StopKind.PHONE_LOST, StopKind.WORKER_STOPPED}
    assert holder_went_away(StopKind.PHONE_LOST) and not holder_went_away(StopKind.LEASE_LOST)
    assert PHONE_GONE == {StopKind.PHONE_LOST, StopKind.LEASE_LOST} and phone_gone("lease_lost")
    assert CUT_SHORT_BY_THE_ENVIRONMENT == {StopKind.PHONE_LOST, StopKind.LEASE_LOST, StopKind.RESET_FAILED,
                                            StopKind.CANCELLED}
    assert NO_USABLE_ACTION == {StopKind.POLICY_ERROR, StopKind.ENDPOINT_FAILED, StopKind.ACTION_FAILED}
    # Every classification is a subset of the kinds; each cut-short class interrupts.
    for group in (HOLDER_WENT_AWAY, PHONE_GONE, CUT_SHORT_BY_THE_ENVIRONMENT, NO_USABLE_ACTION):
        assert group <= INTERRUPTING


@pytest.mark.parametrize(("action", "stop"), [
    ({"action": "terminate", "status": "success"}, Stop(StopKind.SUCCESS, "terminate: success")),
    ({"action": "terminate", "status": "failure"}, Stop(StopKind.FAILURE, "terminate: failure")),
    ({"action": "call_user", "reason": "payment needs you"}, Stop(StopKind.HANDOFF, "call_user: payment needs you")),
    ({"action": "clarify", "question": "which one?"}, None),   # asks, then goes on
    ({"action": "click", "point": [1, 2]}, None),
    (None, None),
])
def test_the_agents_own_ending_is_read_from_its_action(action, stop):
    assert agent_stop(action) == stop


def test_a_long_reason_is_cut_to_the_column():
    assert len(agent_stop({"action": "call_user", "reason": "x" * 500}).detail) == 200


def test_the_control_actions_are_defined_once():
    assert ENDING_ACTIONS == ("terminate", "call_user") and ASKING_ACTIONS == ("clarify",)
    assert AGENT_STOPS == ENDING_ACTIONS + ASKING_ACTIONS
    from flywheel.policies import protocol

    assert protocol.AGENT_STOPS is AGENT_STOPS and protocol.ENDING_ACTIONS is ENDING_ACTIONS


@pytest.mark.parametrize(("last", "handoff", "ending"), [
    ({"action": "terminate", "status": "success"}, "", "success"),
    ({"action": "terminate", "status": "success"}, "call_user", "premature_success"),
    ({"action": "terminate", "status": "failure"}, "", "failure"),
    ({"action": "call_user", "reason": "pay"}, "call_user", "success"),
    ({"action": "call_user", "reason": "pay"}, "", "handoff"),
    ({"action": "clarify", "question": "?"}, "call_user", "handoff"),
    ({"action": "click"}, "", "none"),
    (None, "", "none"),
])
def test_how_the_agent_ended_table_3(last, handoff, ending):
    assert agent_ending(last, handoff) == ending
