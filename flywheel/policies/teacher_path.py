"""Where a trajectory stands on its query's known path, and what the path says to do on this screen.

The position comes from the prefix (which known-path step each earlier action did: with the dumps
of the earlier steps, a tap counts only when it hit that step's target) and is then checked against
the screen: the expected step's target should be visible; if it is not but the next one's is, the
expected step was done already (or was not needed); if an earlier one's is, the prefix went wrong
before. Pure functions over parsed hierarchies (no database).
"""
from __future__ import annotations

from dataclasses import dataclass

from devices.uitree import UiNode, all_nodes, node_at, parse_hierarchy
from flywheel.policies.offline import SYSTEM_PACKAGES, OfflinePolicy
from flywheel.policies.protocol import AGENT_STOPS, ENDING_ACTIONS
from flywheel.screens.selectors import find_target

LOOK_AHEAD = 2              # the steps after the expected one whose target may already be on screen
MAX_SEARCH_SCROLLS = 3      # a target not on screen is looked for this many swipes
TARGETLESS = ("open", "system_button", "wait", "take_notes", *AGENT_STOPS)


@dataclass
class Candidate:
    action: dict
    label: str | None
    confidence: float
    source: str
    rationale: str
    step: int | None = None     # the known-path step it carries out (None: not a path step)


def effective_steps(known_path: dict | None, apps: list[str]) -> list[dict]:
    """The path as it runs from a reset: an open first when the path assumes the app is up, a
    terminate last."""
    steps = [step for step in (known_path or {}).get("steps") or [] if isinstance(step, dict) and step.get("action")]
    if steps and steps[0].get("action") != "open" and apps:
        steps.insert(0, {"action": "open", "app": apps[0]})
    if steps and steps[-1].get("action") not in ENDING_ACTIONS:
        steps.append({"action": "terminate", "status": "success"})
    return steps


def visible_nodes(hierarchy_xml: str) -> list[UiNode]:
    return [node for node in all_nodes(parse_hierarchy(hierarchy_xml or "")) if node.package not in SYSTEM_PACKAGES]


def step_matches(step: dict, action: dict, hierarchy_xml: str = "") -> bool:
    """Did `action` (as executed) carry out this path step? With the dump it ran on, a tap or a
    typed text must land on the step's target; without it, the kind of action decides."""
    name = step.get("action")
    if not action or action.get("action") != name:
        return False
    if name == "open":
        wanted = str(step.get("app", "")).lower()
        return wanted in (str(action.get("app", "")).lower(), str(action.get("package", "")).lower())
    if name == "system_button":
        return action.get("button") == step.get("button")
    if name == "type" and step.get("text") and action.get("text") not in (None, step.get("text")):
        return False
    target, point = step.get("target"), action.get("point")
    if target and point and hierarchy_xml:
        nodes = visible_nodes(hierarchy_xml)
        found = find_target(nodes, target)
        if found is None:
            return False
        hit = node_at(parse_hierarchy(hierarchy_xml), int(point[0]), int(point[1]))
        return found.contains(int(point[0]), int(point[1])) or (hit is not None and hit is found)
    return True


def path_position(steps: list[dict], history: list, history_hierarchies: list[str] | None = None) -> int:
    """The index of the path step the prefix has reached: each earlier action that carries out the
    expected step (or, when the expected one has no target to check, the one after it) moves on;
    scrolls, waits and slips do not."""
    dumps = list(history_hierarchies or [])
    position = 0
    for i, entry in enumerate(history):
        if position >= len(steps):
            break
        action = getattr(entry, "action", entry) or {}
        dump = dumps[i] if i < len(dumps) else ""
        if step_matches(steps[position], action, dump):
            position += 1
        elif (position + 1 < len(steps) and steps[position].get("action") in ("open", "wait")
              and step_matches(steps[position + 1], action, dump)):
            position += 2  # the app was up already / nothing had to load
    return position


def _resolve(step: dict, nodes: list[UiNode], screen) -> tuple[dict | None, str | None]:
    return OfflinePolicy()._path_action(step, nodes, screen)


def _trailing_scrolls(history) -> int:
    count = 0
    for entry in reversed(history):
        if (getattr(entry, "action", entry) or {}).get("action") != "swipe":
            break
        count += 1
    return count


def path_candidates(known_path: dict | None, apps: list[str], history: list, hierarchy_xml: str,
                    screen, foreground: dict | None = None,
                    history_hierarchies: list[str] | None = None) -> list[Candidate]:
    """What the known path says to do on this screen, best first (empty: the path does not say)."""
    steps = effective_steps(known_path, apps)
    if not steps:
        return []
    nodes = visible_nodes(hierarchy_xml)
    position = min(path_position(steps, history, history_hierarchies), len(steps) - 1)
    summary = (known_path or {}).get("summary") or f"{len(steps)} steps"
    package = (foreground or {}).get("package", "")
    out: list[Candidate] = []

    def add(index, confidence, why):
        action, label = _resolve(steps[index], nodes, screen)
        if action is not None and not any(c.action == action for c in out):
            out.append(Candidate(action, label, confidence, "known_path",
                                 f"known path ({summary}), step {index + 1} of {len(steps)}: {why}", index))
        return action is not None

    def on_screen(index):
        target = steps[index].get("target")
        return bool(target) and find_target(nodes, target) is not None

    step = steps[position]
    ahead = [j for j in range(position + 1, min(len(steps), position + 1 + LOOK_AHEAD)) if on_screen(j)]
    if step.get("target"):
        if on_screen(position):
            add(position, 0.9, "its target is on the screen")
        elif ahead:
            add(ahead[0], 0.7, f"step {position + 1}'s target is gone and this one's is here (done already)")
        else:
            behind = [j for j in range(position - 1, max(-1, position - 1 - LOOK_AHEAD), -1) if on_screen(j)]
            scrollable = any(node.scrollable for node in nodes)
            if scrollable and _trailing_scrolls(history) < MAX_SEARCH_SCROLLS:
                out.append(Candidate({"action": "swipe", "direction": "up", "distance": 0.4}, None, 0.5, "known_path",
                                     f"known path ({summary}): step {position + 1}'s target {step['target']} is not "
                                     "visible; scroll to look for it", position))
            if behind:
                add(behind[0], 0.45, "the prefix seems to have missed it (its target is still here)")
    else:
        name = step.get("action")
        app = str(step.get("app", "")).lower()
        if name == "open" and package and app in (package.lower(),) and ahead:
            add(ahead[0], 0.8, "the app is open already")
        else:
            add(position, 0.85 if name != "open" else 0.9, "the next step of the path")
        for j in ahead:
            add(j, 0.4, "its target is on the screen")
    return out


def hits_step(action: dict, step: dict, hierarchy_xml: str) -> bool:
    """Does `action` do what the path step asks on this screen (the measurement's yardstick):
    a tap inside the target's bounds, the same app, the same text, the same key."""
    if not action or action.get("action") != step.get("action"):
        return False
    name = step["action"]
    if name == "open":
        return str(step.get("app", "")).lower() in (str(action.get("app", "")).lower(),
                                                    str(action.get("package", "")).lower())
    if name == "type":
        if str(action.get("text", "")) != str(step.get("text", "")):
            return False
    if name in ("system_button",):
        return action.get("button") == step.get("button")
    if name == "terminate":
        return action.get("status") == step.get("status", "success")
    target = step.get("target")
    if target and name in ("click", "double_click", "long_press", "set_scroll_widget"):
        node = find_target(visible_nodes(hierarchy_xml), target)
        point = action.get("point")
        return node is not None and bool(point) and node.contains(int(point[0]), int(point[1]))
    if name == "swipe":
        return action.get("direction") == step.get("direction", "up")
    return True


def path_step_action(step: dict, hierarchy_xml: str, screen) -> dict | None:
    """The concrete action that carries out a known-path step on this screen (None: its target is
    not on it): what the schema-guided line and setup recipes run."""
    return _resolve(step, visible_nodes(hierarchy_xml), screen)[0]
