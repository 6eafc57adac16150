"""A semi-automatic session's outcome is what its annotator states (§2.3.2, §4.3), as pure rules.

The annotator's last action ends the session (terminate or call_user, Table 3). An ending that is
a success by the §4.3 interaction rules (terminate with success, or the handover the task expects)
is stated by executing it. Every other ending (terminate with failure, a handover the task does
not ask for, success declared where the user was to take over) is a failure unless the annotator
confirms it and says which one: a plain failure, or a task that cannot be done at all (infeasible:
the trajectory is then a refusal sample, never a success). The server refuses such an ending
without that statement, so a proposal accepted with one key press can never be filed as success.
"""
from __future__ import annotations

from enum import StrEnum

from flywheel.rules.stops import ENDING_ACTIONS, agent_ending


class Stated(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    INFEASIBLE = "infeasible"   # the task cannot be done: a refusal sample (§4.1.3, §4.3)


# What each statement makes of the trajectory: its verdict (an Outcome value).
VERDICTS = {Stated.SUCCESS: "true", Stated.FAILURE: "false", Stated.INFEASIBLE: "infeasible"}
NON_SUCCESS = (Stated.FAILURE, Stated.INFEASIBLE)
MAX_REASON = 300


class OutcomeNotStated(ValueError):
    """The ending needs the annotator's confirmed statement (the message says what to send)."""


def ends_session(action: dict | None) -> bool:
    return (action or {}).get("action") in ENDING_ACTIONS


def needs_statement(action: dict | None, expected_handoff: str = "") -> bool:
    """True when `action` ends the session in anything but a success (§4.3)."""
    return ends_session(action) and agent_ending(action, expected_handoff) != "success"


def state_outcome(action: dict | None, expected_handoff: str = "", stated: str = "",
                  reason: str = "") -> tuple[Stated, str] | None:
    """(the outcome, its reason) that `action` ends the session with; None when it does not end it.

    `stated` is the annotator's confirmed statement ("failure" or "infeasible") that every
    non-success ending must carry; a success ending is stated by executing it (and may say so).
    Raises OutcomeNotStated when the statement is missing or does not fit the ending."""
    if not ends_session(action):
        return None
    stated = str(stated or "").strip()
    reason = str(reason or "").strip()[:MAX_REASON]
    if not needs_statement(action, expected_handoff):
        if stated and stated != Stated.SUCCESS:
            raise OutcomeNotStated(f"this action ends the task as a success; to end it as {stated}, "
                                   "set terminate's status to failure")
        return Stated.SUCCESS, ""
    if stated not in NON_SUCCESS:
        raise OutcomeNotStated(
            "ending the task this way is not a success: confirm it by sending stated_outcome "
            "'failure' (the task could be done but was not) or 'infeasible' (the task cannot be done; "
            "the trajectory becomes a refusal sample), with an optional stated_reason")
    return Stated(stated), reason
