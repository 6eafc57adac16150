"""Error explanations and reflective rationales (Xiaomi-GUI-0 §1, §3.4): an ECDM-corrected step
carries why the original step was wrong, in the [Reflection] of the corrected sample.

    error_explanation(ErrorFacts) -> str       from the attribution's evidence: the error class and
                                               level, what the screen showed, the original action
                                               against the corrected one
    teacher_error_explanation(source, ...)     the offline Teacher's own, from how it chose (its
                                               known path, the GEM, a pop-up); '' when it cannot say
    chosen_explanation(annotator, teacher, evidence) -> (text, source)
                                               a person's reason first, then the Teacher's, then
                                               the evidence's (the fallback that always exists)

The sample never shows the wrong action in its history (the correction replaces it), so the
rationale names it as the step not to take here, then the one to take instead.
"""
from __future__ import annotations

from dataclasses import dataclass

from flywheel.rules.attribution_environment import PERMISSION, POPUP
from flywheel.rules.ecdm import CONSTRAINT_VIOLATION, OVER_SCOPED, PERCEPTION_DRIFT, STATE_TRACKING
from flywheel.rules.repetition import same_action
from flywheel.rules.step_words import step_words

ANNOTATOR, TEACHER, EVIDENCE = "annotator", "teacher", "evidence"
POINTED = ("click", "double_click", "long_press")
# Why the original step was wrong, per error class (§2.5.1's causes; Level 1's dismissible interruptions).
# {screen} is 'the "Settings" screen' or 'the screen'; {shown} is ' ("Allow access?")' or ''.
CLASS_REASONS = {
    PERCEPTION_DRIFT: "it misreads {screen}",
    STATE_TRACKING: "it loses track of the task's progress and goes back over pages already visited",
    CONSTRAINT_VIOLATION: "it breaks a condition the task sets",
    OVER_SCOPED: "it stops making progress where the next step is still within reach",
    # Level 1: the environment interrupted; the step at the interruption did not close it.
    POPUP: "a pop-up covers the screen{shown}; it is not part of the task and has to be closed first",
    PERMISSION: "a permission dialog covers the screen{shown}; it is not part of the task and has to be closed first",
}
UNKNOWN_REASON = "it does not lead toward the goal from {screen}"
# How the offline Teacher chose its correction (teacher_path / teacher_gem / dismissal / goal) → why
# the wrong action is not it. "fallback" (going back because nothing fits) explains nothing.
TEACHER_REASONS = {
    "known_path": "it leaves the task's known path, which goes on here with {right}",
    "gem": "it does not lead toward the target page; {right} does",
    "dismissal": "a pop-up covers the screen and has to be closed first ({right})",
    "goal": "it does not match what the goal asks on this screen; {right} does",
}


@dataclass(frozen=True)
class ErrorFacts:
    """What the attribution and the stored step say about the first wrong step."""

    level: int                      # the attribution's level (1 environment, 3 model; 0: none recorded)
    cause: str                      # the error class: a Level-3 cause or a Level-1 interruption
    original: dict | None           # the action that went wrong there (None: no usable action)
    corrected: dict                 # the action that replaces it
    original_label: str = ""        # the element the original acted on, as the screen names it
    corrected_label: str = ""       # the element the correction acts on
    screen_title: str = ""          # what the screen showed: its heading ('' unknown)
    wrong_steps: int = 0            # steps that went wrong from there on (the attribution's count)


def action_words(action: dict | None, label: str = "") -> str:
    """'tap "Display"', 'type "milk" into "Search"', 'press back', 'swipe up', 'open "Notes"',
    'tap at (540, 790)' (no label known), 'finish with success', 'ask "Which one?"'."""
    if not isinstance(action, dict) or not action.get("action"):
        return "no usable action"
    name = action["action"]
    if name == "terminate":
        return "give up" if action.get("status") == "failure" else "finish with success"
    if name in ("clarify", "call_user"):
        asked = str(action.get("question") or action.get("reason") or "").strip()[:80]
        return (f'ask "{asked}"' if asked else "ask the user") if name == "clarify" else "hand over to the user"
    if name == "open":
        return f'open "{label or action.get("app") or "an app"}"'
    if name == "wait":
        return "wait"
    if name == "take_notes":
        return "take a note"
    point = action.get("point")
    if name in POINTED and not label and isinstance(point, (list, tuple)) and len(point) == 2 \
            and all(isinstance(v, (int, float)) for v in point):
        return f"{step_words({'action': name})} at ({point[0]:g}, {point[1]:g})"
    return step_words({"action": name, "target": {"text": label} if label else {}, "text": action.get("text"),
                       "direction": action.get("direction"), "button": action.get("button")})


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _screen(title: str) -> str:
    return f'the "{title}" screen' if title else "the screen"


def error_explanation(facts: ErrorFacts) -> str:
    """Why the original step was wrong, in one or two sentences of the Reflection."""
    screen = _screen(facts.screen_title)
    right = action_words(facts.corrected, facts.corrected_label)
    shown = f' ("{facts.screen_title}")' if facts.screen_title else ""
    reason = CLASS_REASONS.get(facts.cause, UNKNOWN_REASON).format(screen=screen, shown=shown)
    if facts.cause in (POPUP, PERMISSION) and (facts.original is None or same_action(facts.original, facts.corrected)):
        return f"{_cap(reason)}: {right}."  # the step itself closed it: the interruption is the whole story
    if facts.cause == PERCEPTION_DRIFT and facts.corrected_label and facts.corrected_label != facts.original_label:
        reason += f', where the task needs "{facts.corrected_label}"'
    elif facts.cause == CONSTRAINT_VIOLATION and (facts.original or {}).get("action") == "terminate" \
            and facts.original.get("status") == "success":
        reason = "it declares the task done while the task's conditions do not hold yet"
    elif facts.cause == STATE_TRACKING and facts.wrong_steps >= 2:
        reason += f" ({facts.wrong_steps} steps went nowhere from here)"
    if facts.original is None:  # nothing ran: the missing action is the error, whatever the class
        return f"No usable action came on {screen}, where the task goes on: {right}."
    wrong = action_words(facts.original, facts.original_label)
    return f"{_cap(wrong)} is the wrong step here: {reason}. {_cap(right)} instead."


def teacher_error_explanation(source: str, wrong: dict | None, wrong_label: str, right: dict,
                              right_label: str, demoted: bool = False) -> str:
    """The offline Teacher's reason the wrong action is not its answer ('' when it has none: it
    guessed back, or its own first choice was the wrong action itself)."""
    template = TEACHER_REASONS.get(source)
    if template is None or demoted or not isinstance(wrong, dict):
        return ""
    reason = template.format(right=action_words(right, right_label))
    return f"{_cap(action_words(wrong, wrong_label))} is the wrong step here: {reason}."


def chosen_explanation(annotator: str = "", teacher: str = "", evidence: str = "") -> tuple[str, str]:
    """The Reflection of the corrected step and who wrote it: a person's reason, else the Teacher's
    own rationale, else the one written from the attribution's evidence."""
    for text, source in ((annotator, ANNOTATOR), (teacher, TEACHER), (evidence, EVIDENCE)):
        if (text or "").strip():
            return text.strip(), source
    return "", ""
