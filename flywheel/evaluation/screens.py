"""Selectors over uiautomator hierarchies, for milestones, veto conditions and known paths.

Parsing lives in devices.uitree; this adds the selector language of docs/query-format.md.
"""
import xml.etree.ElementTree as ET

from devices.uitree import all_nodes, page_text, parse_hierarchy


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
