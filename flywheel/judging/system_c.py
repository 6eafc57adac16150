"""System C: overall-path plausibility (§2.4.2), by rules when no LLM judge is configured.

System C reads PIXELS ONLY (System B reads the UI dump), so the two cannot share one blind spot: a
web view or canvas hides its words from the dump, a dump taken mid-animation can show a page that
is not on screen. From the screenshots (flywheel/judging/frames.py): environmental interference
(a crash or "not responding" dialog, no network, a permission prompt) in the OCR of the last
frames → Env_ERROR; pseudo-completion (success declared while the final milestone's words are not
in the OCR of the final frame), an unbroken run of actions that changed nothing on screen at the
end (the same action repeated — a loop — or taps that landed with no effect — a stall), or a
meaningless detour far longer than the known shortest path → False; otherwise True.

A handover is an ending too (Table 3): `call_user`/`clarify` where the task's spec expects it
(`verification.handoff`) counts as completion; one the spec does not mention cannot be judged by
rules (abstain); declaring success where the user was to take over is False.

A frame it needs that cannot be read (not stored, missing from the store, OCR failed or timed out,
tesseract not installed) makes it abstain with the reason: never a guess.

The loop length and the detour factor are thresholds that adjudicators' decisions calibrate
(§2.4.2, flywheel/judging/calibration.py); the defaults (flywheel/judging/thresholds.py)
hold until a round exists.
"""
import re

from flywheel.endpoints.chat import JudgeUnavailable
from flywheel.judging import SystemVote
from flywheel.judging.frames import Frames, FrameUnreadable, contains_sequence, tokens
from flywheel.judging.llm_judge import path_vote
from flywheel.judging.thresholds import DETOUR_FACTOR, LOOP_LENGTH, active_thresholds
from flywheel.judging.trajectory_view import TAPS, TrajectoryView, screen_point
from flywheel.rules.repetition import same_action
from flywheel.rules.step_words import target_name
from flywheel.rules.stops import AGENT_STOPS

# Words on screen (as tokens(): lower case, no punctuation) → the environmental cause they show.
INTERFERENCE = {
    ("keeps", "stopping"): "app crash", ("isnt", "responding"): "app not responding",
    ("no", "internet", "connection"): "network failure", ("network", "unavailable"): "network failure",
    ("dont", "allow"): "permission dialog", ("while", "using", "the", "app"): "permission dialog",
    ("only", "this", "time"): "permission dialog",
}
PERMISSION_PROMPT = re.compile(r"\ballow \w+(?: \w+){0,3} to (?:access|take|record|send|make|use)\b")
# The goal state is looked for on the last frames: the final one may be a few steps past it (a
# dialog closed, a toast gone, the list a saved note returned to).
GOAL_FRAMES = 5


def calibrated_thresholds() -> dict:
    """System C's thresholds: the latest calibration round's, else the defaults."""
    return active_thresholds("C")


def interference_seen(view: TrajectoryView, frames: Frames) -> str:
    """An environmental obstacle in the pixels of the last two steps' frames (the final one
    included) that the agent never got past; '' when none."""
    last = len(view.steps)
    for i in range(max(0, last - 2), last):
        seen = frames.tokens(i)
        for marker, cause in INTERFERENCE.items():
            if contains_sequence(seen, list(marker)):
                return cause
        if PERMISSION_PROMPT.search(" ".join(seen)):
            return "permission dialog"
    return ""


def final_milestone_words(view: TrajectoryView) -> tuple[str, str]:
    """(the final milestone's name, the words it shows); words '' for an id-only milestone."""
    milestones = view.verification.get("milestones") or []
    if not milestones or not isinstance(milestones[-1], dict):
        return "", ""
    final = milestones[-1]
    words = str(final.get("text") or final.get("text_contains") or "")
    return str(final.get("name") or words or final), words


def names(line: list[str], needle: list[str], from_id: bool) -> bool:
    """A line of words on screen names the element: it is mostly the element's words, and holds half
    of them (OCR misreads a name beside an avatar: "Priya Patel" as "j Patel") — or, for a name made
    of a resource id's words (save_note), it says the id's verb ("Save"). "Delete chat" does not name
    "Delete": a line that is mostly something else names something else."""
    if "".join(line) == "".join(needle):
        return True   # OCR ran the words together ("Sam Lee" read as "SamLee")
    overlap = len(set(line) & set(needle))
    if 2 * overlap < len(set(line)):
        return False
    if from_id:
        return len(needle[0]) >= 3 and needle[0] in line
    return 2 * overlap >= len(needle)


def untaken_ending(view: TrajectoryView, frames: Frames) -> str:
    """Pseudo-completion in the pixels: the task ends by tapping an element whose words are on screen
    where the last tap was taken (it landed elsewhere) or at the end (never tapped). '' when the last
    tap landed on it, or when the pixels cannot tell (an icon without words, a path ending otherwise)."""
    end = view.path_end()
    if end is None:
        return ""
    name = target_name(end["target"])
    from_id = not (end["target"].get("text") or end["target"].get("content_desc"))
    needle = tokens(name)
    if not needle:
        return ""

    def shown(i):
        return any(names(line, needle, from_id) for line in frames.lines(i))
    taps = view.taps()
    if taps:
        i, step = taps[-1]
        if any(names(line, needle, from_id) for line in frames.lines_at(i, screen_point(step.action, frames.size(i)))):
            return ""
        if shown(i):
            return f"the last tap landed away from \"{name}\", the element the task ends on"
    if shown(len(frames) - 1):
        return f"\"{name}\", the element the task ends on, is on the final screen and was never tapped"
    return ""


def no_effect(frames: Frames, before: int, after: int) -> bool:
    """The action taken on frame `before` changed nothing: the next frame is the same picture."""
    return frames.unchanged(before, after)


def stuck_run(view: TrajectoryView, frames: Frames) -> tuple[int, str]:
    """The run of actions that ends the trajectory, each on the frame the one before left unchanged:
    ("loop", n) when it repeats one action, ("stall", n) when taps landed on different places with
    no effect. Actions on different frames, or a swipe after a tap, break the run; so does a last
    action whose next frame (when one was recorded) differs: it got out."""
    acting = [(i, s.action) for i, s in enumerate(view.steps)
              if s.action and s.action.get("action") not in AGENT_STOPS]
    if not acting:
        return 0, "loop"
    last = acting[-1][0]
    if last + 1 < len(frames) and not no_effect(frames, last, last + 1):
        return 0, "loop"
    run, kind = 1, "loop"
    for (before, previous), (after, current) in zip(reversed(acting[:-1]), reversed(acting[1:])):
        same = same_action(previous, current)
        taps = previous.get("action") in TAPS and current.get("action") in TAPS
        if not (same or taps) or not no_effect(frames, before, after):
            break
        run += 1
        if not same:
            kind = "stall"
    return run, kind


def trailing_loop(view: TrajectoryView, frames: Frames | None = None) -> int:
    """Length of the run of actions that changed nothing on screen and ends the trajectory (0 when
    the frames it needs cannot be read: System C abstains then)."""
    try:
        return stuck_run(view, frames or Frames(view))[0]
    except FrameUnreadable:
        return 0


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


def rules_vote(view: TrajectoryView, thresholds: dict | None = None, frames: Frames | None = None) -> SystemVote:
    """System C's rules over the trajectory's pixels. `frames`: the view's Frames when the caller
    re-votes one trajectory (calibration), so each frame is read once."""
    if not view.steps:
        return SystemVote("C", "false", "the trajectory has no steps")
    try:
        return _rules_vote(view, thresholds if thresholds is not None else calibrated_thresholds(),
                           frames or Frames(view))
    except FrameUnreadable as error:
        return SystemVote("C", "abstain", f"the pixels cannot be read: {error}", details={"unreadable": str(error)})


def _rules_vote(view: TrajectoryView, thresholds: dict, frames: Frames) -> SystemVote:
    loop_length = int(thresholds.get("loop_length", LOOP_LENGTH))
    detour_factor = float(thresholds.get("detour_factor", DETOUR_FACTOR))
    cause = interference_seen(view, frames)
    if cause:
        return SystemVote("C", "env_error", f"blocked by {cause} (read on screen)", details={"environment": cause})
    last = view.last_action or {}
    ending = view.ending()
    claims_success = ending == "success"
    final = len(frames) - 1
    name, words = final_milestone_words(view)
    unchecked = ""
    if claims_success and name and not words:
        unchecked = f"; the final milestone \"{name}\" names no words (id only): not checked in pixels"
    elif claims_success and words and not any(frames.shows(i, words) for i in range(final, max(-1, final - GOAL_FRAMES), -1)):
        return SystemVote("C", "false", f"pseudo-completion: success declared but \"{words}\" (milestone "
                                        f"{name}) is not on the last {GOAL_FRAMES} frames", details={"missing": words})
    untaken = untaken_ending(view, frames) if claims_success else ""
    if untaken:
        return SystemVote("C", "false", f"pseudo-completion: {untaken}", details={"untaken": untaken})
    if ending == "premature_success":
        return SystemVote("C", "false", f"declared success where the task hands over to the user "
                                        f"({view.expected_handoff})")
    run, kind = stuck_run(view, frames)
    if run >= loop_length:
        what = ("the same action {n} times on an unchanged screen" if kind == "loop"
                else "{n} taps in a row that changed nothing on screen")
        return SystemVote("C", "false", f"stuck in a {kind}: " + what.format(n=run),
                          details={"loop": run, "kind": kind})
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
    how = f", handing over with {view.expected_handoff} as the task asks" if view.expected_handoff else ""
    return SystemVote("C", "true", f"coherent progress over {taken} steps{how}{unchecked}",
                      details={"taken": taken, "final_frame_words": len(frames.words(final))})
