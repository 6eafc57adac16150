"""What a person would call an element on screen, and the words of a goal it answers to (the offline
policy's, the Teacher's and the compact features' shared reading of a page)."""
from __future__ import annotations

import re

from devices.uitree import UiNode
from flywheel.rules.consistency import words


def stems(text: str) -> set[str]:
    """Content words, crudely singular ("notes" matches "note")."""
    return {w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words(text)}


def label_node(node: UiNode, wanted: set) -> UiNode:
    """The descendant whose own text matches best (a row's title), else the node itself."""
    scored = [(len(stems(n.text or n.desc) & wanted), n) for n in node.walk() if (n.text or n.desc) and n.area]
    scored = [(score, n) for score, n in scored if score]
    return max(scored, key=lambda pair: pair[0])[1] if scored else node


def wanted_toggle_state(goal: str):
    if re.search(r"\b(turn|switch|set)\s+(\w+\s+){0,3}?on\b|\benable\b|\bon\b$", goal, re.I):
        return True
    if re.search(r"\b(turn|switch|set)\s+(\w+\s+){0,3}?off\b|\bdisable\b", goal, re.I):
        return False
    return None


def toggle_state(node: UiNode):
    """checked of the switch / checkbox in a row, or None when the row has none."""
    for n in node.walk():
        if any(kind in n.cls for kind in ("Switch", "CheckBox", "ToggleButton")):
            return n.checked
    return None


def label_of(node: UiNode) -> str:
    """What a person would call the element: its own text, else its first descendant's (a row's title)."""
    first = next((n.text or n.desc for n in node.walk() if n.text or n.desc), "")
    return (first or node.resource_id.rsplit("/", 1)[-1])[:60]


PACKAGE_NOISE = frozenset({"com", "org", "net", "android", "sim", "apps", "app", "google"})


def goal_names_app(goal: str, package: str, label: str = "") -> bool:
    """Does the goal name this app, by the name people call it or its package's own word? A goal-only
    agent is given the phone's apps and finds the one a goal needs this way, as with a user's request."""
    goal_lower = goal.lower()
    names = {label.lower(), *(w.lower() for w in re.split(r"[._]", package or "") if w.lower() not in PACKAGE_NOISE)}
    return any(len(name) > 2 and re.search(rf"\b{re.escape(name)}", goal_lower) for name in names)


def apps_for_goal(goal: str, apps: list[str], labels: dict[str, str] | None = None) -> list[str]:
    """The apps of `apps` the goal names, in the order it names them; a single app offered is the one."""
    named = [app for app in apps if goal_names_app(goal, app, (labels or {}).get(app, ""))]
    if not named and len(apps) == 1:
        return list(apps)
    goal_lower = goal.lower()

    def where(app):
        label = (labels or {}).get(app, "").lower()
        spots = [goal_lower.find(name) for name in (label, app.rsplit(".", 1)[-1].lower()) if name]
        return min([s for s in spots if s >= 0], default=len(goal_lower))
    return sorted(named, key=where)
