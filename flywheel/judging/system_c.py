"""System C: overall-path plausibility (§2.4.2), by rules when no LLM judge is configured.

Looks at the action–observation history for: environmental interference (pop-up interception,
network failure, missing permission, crash) → Env_ERROR; pseudo-completion (success declared
while the goal state is not on screen), an unbroken loop at the end, or a meaningless detour far
longer than the known shortest path → False; otherwise True.

A handover is an ending too (Table 3): `call_user`/`clarify` where the task's spec expects it
(`verification.handoff`) counts as completion; one the spec does not mention cannot be judged by
rules (abstain); declaring success where the user was to take over is False.

The loop length and the detour factor are thresholds that adjudicators' decisions calibrate
(§2.4.2, flywheel/judging/calibration.py); the defaults (flywheel/judging/thresholds.py)
hold until a round exists.
"""
from flywheel.endpoints.chat import JudgeUnavailable
from flywheel.judging import SystemVote
from flywheel.judging.llm_judge import path_vote
from flywheel.judging.thresholds import DETOUR_FACTOR, LOOP_LENGTH, active_thresholds
from flywheel.judging.trajectory_view import TrajectoryView
from flywheel.rules.repetition import same_action
from flywheel.screens.selectors import find, screen_text

INTERFERENCE = {
    "keeps stopping": "app crash", "isn't responding": "app not responding",
    "network unavailable": "network failure", "no internet connection": "network failure",
    "allow access": "permission dialog", "permission_allow_button": "permission dialog",
}


def trailing_loop(view: TrajectoryView) -> int:
    """Length of the run of repeated actions on an unchanged screen that ends the trajectory."""
    acting = [s for s in view.steps if s.action and s.action.get("action") != "terminate"]
    run = 1
    for previous, current in zip(reversed(acting[:-1]), reversed(acting[1:])):
        if same_action(previous.action, current.action) and previous.hierarchy == current.hierarchy:
            run += 1
        else:
            break
    return run if acting else 0


def interference_seen(view: TrajectoryView) -> str:
    """An environmental obstacle on the final screens that the agent never got past."""
    for xml in view.screens()[-2:]:
        lowered = (xml or "").lower()
        for marker, cause in INTERFERENCE.items():
            if marker in lowered:
                return cause
    return ""


def goal_on_screen(view: TrajectoryView) -> bool | None:
    """Whether the final screen shows the goal state (None when nothing says what it looks like)."""
    milestones = view.verification.get("milestones") or []
    if not milestones:
        return None
    return bool(find(view.final_hierarchy or (view.steps[-1].hierarchy if view.steps else ""),
                     milestones[-1]))


def calibrated_thresholds() -> dict:
    """System C's thresholds: the latest calibration round's, else the defaults."""
    return active_thresholds("C")


def system_c_vote(view: TrajectoryView, judge=None, thresholds: dict | None = None) -> SystemVote:
    """`thresholds`: {"loop_length", "detour_factor"}; None reads the active calibration."""
    if not view.steps:
        return SystemVote("C", "false", "the trajectory has no steps")
    fallback = ""
    if judge is not None:
        try:
            return path_vote(judge, view)
        except JudgeUnavailable as error:
            fallback = f" (rules; the LLM judge failed: {error})"
    vote = rules_vote(view, thresholds)
    vote.rationale += fallback
    return vote


def rules_vote(view: TrajectoryView, thresholds: dict | None = None) -> SystemVote:
    thresholds = thresholds if thresholds is not None else calibrated_thresholds()
    loop_length = int(thresholds.get("loop_length", LOOP_LENGTH))
    detour_factor = float(thresholds.get("detour_factor", DETOUR_FACTOR))
    cause = interference_seen(view)
    if cause:
        return SystemVote("C", "env_error", f"blocked by {cause}", details={"environment": cause})
    last = view.last_action or {}
    ending = view.ending()
    claims_success = ending == "success"
    on_screen = goal_on_screen(view)
    if claims_success and on_screen is False:
        return SystemVote("C", "false", "pseudo-completion: success declared but the goal state "
                                        "is not on the final screen")
    if ending == "premature_success":
        return SystemVote("C", "false", f"declared success where the task hands over to the user "
                                        f"({view.expected_handoff})")
    loop = trailing_loop(view)
    if loop >= loop_length:
        return SystemVote("C", "false", f"stuck in a loop: the same action {loop} times on an "
                                        "unchanged screen", details={"loop": loop})
    shortest = len((view.known_path or {}).get("steps") or [])
    taken = sum(1 for s in view.steps if s.action)
    if shortest and taken > detour_factor * shortest + 2:
        return SystemVote("C", "false", f"meaningless detour: {taken} steps for a path of {shortest}",
                          details={"taken": taken, "shortest": shortest})
    if ending == "handoff":
        return SystemVote("C", "abstain", f"handed over to the user ({last.get('action')}) where the "
                                          "spec expects no handover: rules cannot tell if it was needed")
    if not claims_success:
        return SystemVote("C", "false", f"ended without declaring success ({last.get('action', 'no action')})")
    words = len(screen_text(view.final_hierarchy).split())
    how = f", handing over with {view.expected_handoff} as the task asks" if view.expected_handoff else ""
    return SystemVote("C", "true", f"coherent progress over {taken} steps{how}",
                      details={"taken": taken, "final_screen_words": words})
