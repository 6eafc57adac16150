"""Reading uiautomator hierarchies: the text on a screen and the elements that match a selector."""
import re
import xml.etree.ElementTree as ET
from functools import lru_cache

BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")


@lru_cache(maxsize=256)
def parse(xml: str):
    try:
        return ET.fromstring(xml.encode("utf-8") if isinstance(xml, str) else xml)
    except ET.ParseError:
        return None


def nodes(xml: str):
    root = parse(xml) if xml else None
    return [] if root is None else list(root.iter("node"))


def screen_text(xml: str) -> str:
    """All visible text and content descriptions of a screen, one per line."""
    parts = []
    for node in nodes(xml):
        for attribute in ("text", "content-desc"):
            value = node.get(attribute)
            if value:
                parts.append(value)
    return "\n".join(parts)


def bounds(node):
    match = BOUNDS.match(node.get("bounds", ""))
    return tuple(int(v) for v in match.groups()) if match else None


def matches(node, selector: dict) -> bool:
    if "text" in selector and node.get("text") != selector["text"]:
        return False
    if "text_contains" in selector and selector["text_contains"].lower() not in (
            node.get("text") or "").lower():
        return False
    if "resource_id" in selector and node.get("resource-id") != selector["resource_id"]:
        return False
    if "content_desc" in selector and node.get("content-desc") != selector["content_desc"]:
        return False
    return any(k in selector for k in ("text", "text_contains", "resource_id", "content_desc"))


def find(xml: str, selector: dict):
    """Nodes of the screen that a milestone/veto/path selector names."""
    if "xpath" in selector:
        root = parse(xml) if xml else None
        if root is None:
            return []
        try:
            return root.findall(selector["xpath"] if selector["xpath"].startswith(".")
                                else "." + selector["xpath"])
        except SyntaxError:
            return []
    return [node for node in nodes(xml) if matches(node, selector)]


def element_at(xml: str, x: int, y: int):
    """The smallest node containing the point (what a tap there hits)."""
    best, best_area = None, None
    for node in nodes(xml):
        box = bounds(node)
        if box and box[0] <= x < box[2] and box[1] <= y < box[3]:
            area = (box[2] - box[0]) * (box[3] - box[1])
            if best_area is None or area <= best_area:
                best, best_area = node, area
    return best
