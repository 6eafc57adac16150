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
