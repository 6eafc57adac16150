"""How a trajectory stops, as data: the agent's control actions (Table 3) and the kind of every stop.

A stop is a kind (StopKind, stored as Trajectory.stop_kind) beside the words a person reads
(Trajectory.stop_reason). Code decides on the kind, never on the words; the words are for pages
and exports. Every line (automatic, semi-automatic, env service, ECDM replay) says how its
trajectories stop with these kinds, and the classifications below are what the engine, recovery,
the benchmark and the failure attribution read of them.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# -- the control actions (Table 3): one definition for every line and judge ----------------------

TERMINATE, CALL_USER, CLARIFY = "terminate", "call_user", "clarify"
ENDING_ACTIONS = (TERMINATE, CALL_USER)        # the task is over, or handed back to the user
ASKING_ACTIONS = (CLARIFY,)                    # the agent waits for the user's answer, then goes on
AGENT_STOPS = ENDING_ACTIONS + ASKING_ACTIONS  # a last action that shows the agent itself stopped there
TURNING_TO_THE_USER = (CALL_USER, *ASKING_ACTIONS)  # hands over or asks: a handoff unless the task expects it


def agent_ending(last_action: dict | None, expected_handoff: str = "") -> str:
    """How the agent ended (Table 3, as System C reads it): 'success' (terminate with success, or
    the handover the task expects), 'failure' (terminate with failure), 'handoff' (a call_user or
    clarify the task does not ask for), 'premature_success' (declared done where the user was to
    take over) or 'none'."""
    last = last_action or {}
    name = last.get("action")
    if name == TERMINATE:
        if last.get("status") != "success":
            return "failure"
        return "premature_success" if expected_handoff else "success"
    if name in TURNING_TO_THE_USER:
        return "success" if name == expected_handoff else "handoff"
    return "none"


# -- the kinds of stop -----------------------------------------------------------------------------

class StopKind(StrEnum):
    # The agent's own ending (Table 3).
    SUCCESS = "terminate_success"         # terminate, status success
    FAILURE = "terminate_failure"         # terminate, giving up
    HANDOFF = "call_user"                 # call_user: handed back to the user
    # The automatic lines' stop conditions.
    MAX_STEPS = "max_steps"               # the step budget is spent
    TIMEOUT = "timeout"                   # the time budget is spent
    REPEATED_ACTIONS = "repeated_actions"  # the same action over and over (the repeat limit)
    BLOCKED = "blocked_by_audit"          # the safety audit refused two inputs in a row
    CLARIFY_UNANSWERED = "clarify_unanswered"  # a clarify nobody answered
    CLARIFY_STOPPED = "clarify_stopped"   # the user's answer to a clarify said stop
    # Cut short: the trajectory is interrupted (still judged and routed, never dropped).
    POLICY_ERROR = "policy_error"         # the policy gave no usable proposal (unparseable, misconfigured)
    ENDPOINT_FAILED = "endpoint_failed"   # the model endpoint failed or refused the call
    ACTION_FAILED = "action_failed"       # the executor could not carry the action out
    LEASE_LOST = "lease_lost"             # the holder no longer held the phone
    PHONE_LOST = "phone_lost"             # the phone stopped answering
    RESET_FAILED = "reset_failed"         # the phone could not be reset to the task's start
    CANCELLED = "cancelled"               # its run was cancelled
    ALREADY_DONE = "already_done"         # the success check passed before any action (flagged)
    WORKER_STOPPED = "worker_stopped"     # the worker driving it died; recovery ended it
    CRASHED = "crashed"                   # an unexpected error in the collection code
    # The environment service.
    CLOSED_BY_CLIENT = "closed_by_client"  # the client closed the episode before the agent stopped
    # The semi-automatic line (a person drives the session).
    PAUSED = "paused"                     # paused by the annotator (resumable)
    LEFT_THE_PAGE = "left_the_page"       # the page was closed: paused, the phone freed (resumable)
    NOT_EXECUTABLE = "not_executable"     # the person found the task cannot be done as written
    # Before the task: its prerequisites (accounts, setup recipes) could not be met on the phone.
    PREREQUISITE_UNMET = "prerequisite_unmet"
    # The ECDM.
    REPAIRED_SAMPLE = "repaired_sample"   # a sample made from a failed trajectory's stored steps
    # The hand-back channel (§2.3.7).
    HANDBACK_SAMPLE = "handback_sample"   # a sample of the right behaviour at a state a person must handle

    @property
    def label(self) -> str:
        return LABELS[self]


LABELS = {
    StopKind.SUCCESS: "Terminated: success", StopKind.FAILURE: "Terminated: failure",
    StopKind.HANDOFF: "Handed over to the user", StopKind.MAX_STEPS: "Maximum steps",
    StopKind.TIMEOUT: "Timeout", StopKind.REPEATED_ACTIONS: "Repeated actions",
    StopKind.BLOCKED: "Blocked by the safety audit", StopKind.CLARIFY_UNANSWERED: "Clarify: no answer",
    StopKind.CLARIFY_STOPPED: "Clarify answered: stop", StopKind.POLICY_ERROR: "Policy error",
    StopKind.ENDPOINT_FAILED: "Model endpoint failed", StopKind.ACTION_FAILED: "Action failed",
    StopKind.LEASE_LOST: "Lease lost", StopKind.PHONE_LOST: "Phone lost", StopKind.RESET_FAILED: "Reset failed",
    StopKind.CANCELLED: "Cancelled", StopKind.ALREADY_DONE: "Already done before any action",
    StopKind.WORKER_STOPPED: "Worker stopped", StopKind.CRASHED: "Collection error",
    StopKind.CLOSED_BY_CLIENT: "Closed by the client", StopKind.PAUSED: "Paused",
    StopKind.LEFT_THE_PAGE: "Left the page", StopKind.NOT_EXECUTABLE: "Not executable",
    StopKind.PREREQUISITE_UNMET: "Prerequisite not met",
    StopKind.REPAIRED_SAMPLE: "ECDM repaired sample", StopKind.HANDBACK_SAMPLE: "Hand-back sample",
}


@dataclass(frozen=True)
class Stop:
    """How one trajectory stopped: the kind code decides on, the detail a person reads."""

    kind: StopKind
    detail: str


# Cut short: the trajectory ends interrupted, not completed.
INTERRUPTING = frozenset({
    StopKind.POLICY_ERROR, StopKind.ENDPOINT_FAILED, StopKind.ACTION_FAILED, StopKind.LEASE_LOST,
    StopKind.PHONE_LOST, StopKind.RESET_FAILED, StopKind.CANCELLED, StopKind.ALREADY_DONE,
    StopKind.WORKER_STOPPED, StopKind.CRASHED, StopKind.CLARIFY_UNANSWERED})
# Its holder went away (the phone dropped, the worker died), not the task: collected again.
HOLDER_WENT_AWAY = frozenset({StopKind.PHONE_LOST, StopKind.WORKER_STOPPED})
# No phone is left to read: lost, or no longer ours.
PHONE_GONE = frozenset({StopKind.PHONE_LOST, StopKind.LEASE_LOST})
# Collection was cut short for the device's or the operator's sake (Level 1 of the attribution).
CUT_SHORT_BY_THE_ENVIRONMENT = frozenset({StopKind.PHONE_LOST, StopKind.LEASE_LOST, StopKind.RESET_FAILED,
                                          StopKind.CANCELLED})
# The policy gave no usable action, or the one it gave could not run.
NO_USABLE_ACTION = frozenset({StopKind.POLICY_ERROR, StopKind.ENDPOINT_FAILED, StopKind.ACTION_FAILED})


def interrupts(kind: str) -> bool:
    """Whether a stop of this kind cuts the trajectory short (status interrupted, not completed)."""
    return kind in INTERRUPTING


def holder_went_away(kind: str) -> bool:
    """Whether the trajectory ended because its phone or worker went away, not by its task:
    recovery collects its query again."""
    return kind in HOLDER_WENT_AWAY


def phone_gone(kind: str) -> bool:
    """Whether the phone can no longer be read (lost, or its lease no longer ours)."""
    return kind in PHONE_GONE


def agent_stop(action: dict | None) -> Stop | None:
    """The stop an executed ending action (terminate, call_user) makes; None for any other action."""
    action = action or {}
    name = action.get("action", "")
    if name not in ENDING_ACTIONS:
        return None
    if name == CALL_USER:
        kind = StopKind.HANDOFF
    else:
        kind = StopKind.SUCCESS if action.get("status") == "success" else StopKind.FAILURE
    detail = action.get("status") or action.get("reason") or action.get("question") or ""
    return Stop(kind, f"{name}: {detail}".strip(": ")[:200])
