"""Selectors over uiautomator hierarchies, for milestones, veto conditions and known paths.

Parsing lives in devices.uitree; this adds the selector language of docs/query-format.md.
"""
import xml.etree.ElementTree as ET

from devices.uitree import UiNode, all_nodes, page_text, parse_hierarchy

SELECTOR_KEYS = ("text", "text_contains", "resource_id", "content_desc")


def screen_text(xml: str) -> str:
    return page_text(parse_hierarchy(xml))


def matches(node, selector: dict) -> bool:
    checks = {
        "text": lambda v: node.text == v,
        "text_contains": lambda v: v.lower() in node.text.lower(),
        "resource_id": lambda v: node.resource_id == v,
        "content_desc": lambda v: node.desc == v,
    }
    named = [key for key in checks if key in selector]
    return bool(named) and all(checks[key](selector[key]) for key in named)


def find(xml: str, selector: dict) -> list:
    """Elements of the screen a selector names (XPath selectors return XML elements)."""
    if "xpath" in selector:
        try:
            root = ET.fromstring(xml.encode("utf-8")) if xml else None
            path = selector["xpath"]
            return [] if root is None else root.findall(path if path.startswith(".") else "." + path)
        except (ET.ParseError, SyntaxError):
            return []
    return [node for node in all_nodes(parse_hierarchy(xml)) if matches(node, selector)]


def find_target(nodes: list[UiNode], target: dict) -> UiNode | None:
    """A known-path `target` (docs/query-format.md) in the hierarchy; `index` picks the n-th match."""
    tests = {"text": lambda n, v: n.text == v,
             "text_contains": lambda n, v: v.lower() in n.text.lower(),
             "resource_id": lambda n, v: n.resource_id == v,
             "content_desc": lambda n, v: n.desc == v}
    used = [key for key in SELECTOR_KEYS if key in target]
    if not used:
        return None
    found = [node for node in nodes if all(tests[key](node, target[key]) for key in used)]
    index = target.get("index", 0)
    return found[index] if isinstance(index, int) and 0 <= index < len(found) else None
