"""The bi-directional consistency gate of the structured CoT (§2.3.6), as one pure function.

Label consistency, checked on every executed step before a trajectory enters a pool:
- the [Decision] describes exactly the action that was executed (its kind, its text, its
  coordinates when it states them);
- the [Observation] matches the screen: what it quotes is on the screen, and it names something
  the screen shows;
- every [Memory] item is referenced by a later step.
Forward derivability is approximated by requiring a [Plan] that the [Decision] follows from (both
present). A failure is returned as issues for a person to fix, never silently accepted.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from devices.actions import to_pixels

# Words a decision uses for each action (the report's examples: "Tap the search box at ...").
ACTION_VERBS = {
    "click": ("tap", "click", "press", "select", "choose", "open", "toggle", "touch", "hit"),
    "double_click": ("double",),
    "type": ("type", "enter", "input", "write", "fill", "search"),
    "system_button": ("press", "go back", "back", "home", "button", "key", "return"),
    "swipe": ("swipe", "scroll", "slide", "flick"),
    "drag": ("drag", "move", "slide"),
    "long_press": ("long press", "long-press", "hold", "press and hold"),
    "open": ("open", "launch", "start", "switch to"),
    "set_scroll_widget": ("set", "scroll", "pick", "choose", "select"),
    "take_notes": ("note", "remember", "record", "save"),
    "wait": ("wait", "pause", "load"),
    "terminate": ("finish", "done", "complete", "terminate", "end", "stop", "fail", "give up"),
    "clarify": ("ask", "clarify", "confirm", "question"),
    "call_user": ("hand", "call", "user", "ask", "stop"),
}
COORD_TOLERANCE_PX = 60     # a stated coordinate may be this far from the executed one
STOPWORDS = frozenset("""a an the and or of to in on at for with from by is are be this that it its
there here page screen current currently shows showing shown which what now then i we you my our
has have was were not no none nothing yet will should can""".split())
_QUOTED = re.compile(r"[\"“”„']([^\"“”„']{2,80})[\"“”']")
_COORDS = re.compile(r"\(\s*(\d+(?:\.\d+)?)\s*,\s*(\d+(?:\.\d+)?)\s*\)|\[\s*(\d+(?:\.\d+)?)\s*,\s*(\d+(?:\.\d+)?)\s*\]")
_EMPTY_MEMORY = {"", "none", "nothing", "-", "n/a", "none.", "nothing to remember", "nothing new"}


@dataclass(frozen=True)
class GateStep:
    index: int
    cot: dict               # the five tags
    action: dict            # the executed action (pixel coordinates where it has points)
    screen_text: str = ""   # every text/desc on the screen the step saw ("" when unknown)
    decision_coords: str = "pixel"            # the units of coordinates written in [Decision]
    screen: tuple[int, int] | None = None     # width, height, to read those coordinates


@dataclass(frozen=True)
class ConsistencyIssue:
    step_index: int
    rule: str               # decision_matches_action, observation_matches_screen, memory_referenced, plan_present
    message: str


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[\w']+", (text or "").lower()) if len(w) > 2 and w not in STOPWORDS}


def memory_items(memory: str) -> list[str]:
    if not memory or memory.strip().lower() in _EMPTY_MEMORY:
        return []
    items = [item.strip(" .") for item in re.split(r"[;\n]|(?<=\.)\s", memory)]
    return [item for item in items if item and item.lower() not in _EMPTY_MEMORY and words(item)]


def decision_issue(cot: dict, action: dict, decision_coords: str = "pixel",
                   screen: tuple[int, int] | None = None) -> str | None:
    """Why the [Decision] does not describe the executed action, or None."""
    decision = (cot.get("Decision") or "").lower()
    name = action.get("action", "")
    if not decision:
        return "the [Decision] is empty"
    verbs = ACTION_VERBS.get(name, (name,))
    if not any(verb in decision for verb in verbs) and name.replace("_", " ") not in decision:
        return f"the [Decision] does not describe a {name} (expected words like {', '.join(verbs[:3])})"
    for key in ("text", "app", "button", "value"):
        value = action.get(key)
        if isinstance(value, str) and value.strip() and key != "app" and value.strip().lower() not in decision:
            return f"the [Decision] does not mention the {key} {value!r} of the executed {name}"
    if name == "swipe" and action.get("direction") and action["direction"] not in decision and not _COORDS.search(decision):
        return f"the [Decision] does not say the swipe goes {action['direction']}"
    stated = [tuple(float(v) for v in m.groups() if v is not None) for m in _COORDS.finditer(decision)]
    if decision_coords != "pixel":  # a model reasoning in [0, 1000] writes its points that way
        if not screen:
            stated = []
        else:
            stated = [to_pixels(point, decision_coords, *screen) for point in stated]
    points = [action[key] for key in ("point", "start", "end") if isinstance(action.get(key), list)]
    if stated and points and action.get("coords", "pixel") == "pixel":
        for x, y in stated[:len(points)]:
            if min(math.dist((x, y), point) for point in points) > COORD_TOLERANCE_PX:
                return (f"the [Decision] states ({x:g}, {y:g}) px but the executed {name} is at "
                        f"{points[0]}")
    return None


def observation_issue(cot: dict, screen_text: str) -> str | None:
    observation = cot.get("Observation") or ""
    if not observation.strip():
        return "the [Observation] is empty"
    if not screen_text.strip():
        return None  # nothing to compare against (e.g. a black frame): not the annotator's fault
    screen_lower = screen_text.lower()
    for quoted in _QUOTED.findall(observation):
        if quoted.strip().lower() not in screen_lower:
            return f"the [Observation] quotes {quoted.strip()!r}, which is not on the screen"
    if not words(observation) & words(screen_text):
        return "the [Observation] names nothing that the screen shows"
    return None


def check_bidirectional_consistency(steps: list[GateStep]) -> list[ConsistencyIssue]:
    """Every violation in a trajectory's executed steps; an empty list means it passes."""
    issues = []
    for position, step in enumerate(steps):
        if not (step.cot.get("Plan") or "").strip():
            issues.append(ConsistencyIssue(step.index, "plan_present", "the [Plan] is empty"))
        problem = decision_issue(step.cot, step.action, step.decision_coords, step.screen)
        if problem:
            issues.append(ConsistencyIssue(step.index, "decision_matches_action", problem))
        problem = observation_issue(step.cot, step.screen_text)
        if problem:
            issues.append(ConsistencyIssue(step.index, "observation_matches_screen", problem))
        later_text = words(" ".join(
            " ".join(str(later.cot.get(tag) or "") for tag in ("Observation", "Reflection", "Plan", "Decision"))
            + " " + " ".join(str(v) for v in later.action.values() if isinstance(v, str))
            for later in steps[position + 1:]))
        if position + 1 < len(steps):  # the last step's memory has no later step to be used in
            for item in memory_items(step.cot.get("Memory") or ""):
                if not words(item) & later_text:
                    issues.append(ConsistencyIssue(
                        step.index, "memory_referenced",
                        f"the [Memory] item {item!r} is never referenced by a later step"))
    return issues
