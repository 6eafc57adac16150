"""Reading a uiautomator dump: nodes with bounds, the element under a point, the page's text.

Used by the safety audit (what would this tap hit?) and by composite actions (where is the
wheel picker, which app icons does the launcher show?).
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from functools import lru_cache

_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")


@dataclass
class UiNode:
    text: str = ""
    desc: str = ""
    resource_id: str = ""
    cls: str = ""
    package: str = ""
    bounds: tuple[int, int, int, int] = (0, 0, 0, 0)
    clickable: bool = False
    long_clickable: bool = False
    scrollable: bool = False
    focused: bool = False
    selected: bool = False
    checked: bool = False
    password: bool = False
    enabled: bool = True
    depth: int = 0
    children: list[UiNode] = field(default_factory=list, repr=False)

    @property
    def area(self) -> int:
        x1, y1, x2, y2 = self.bounds
        return max(0, x2 - x1) * max(0, y2 - y1)

    @property
    def center(self) -> tuple[int, int]:
        x1, y1, x2, y2 = self.bounds
        return (x1 + x2) // 2, (y1 + y2) // 2

    def contains(self, x: int, y: int) -> bool:
        x1, y1, x2, y2 = self.bounds
        return x1 <= x < x2 and y1 <= y < y2

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()

    def own_text(self) -> str:
        return " ".join(part for part in (self.text, self.desc) if part)

    def all_text(self) -> str:
        """Its text and desc and those of its descendants (a row's title and summary)."""
        return " ".join(part for node in self.walk() for part in (node.text, node.desc) if part)

    def describe(self) -> dict:
        """A small JSON record of the element, for audit events and step records."""
        return {"text": self.all_text()[:300], "resource_id": self.resource_id, "class": self.cls,
                "package": self.package, "bounds": list(self.bounds), "password": self.password}


def parse_hierarchy(xml: str) -> list[UiNode]:
    """Top-level nodes (one per dumped window). An empty or broken dump gives [].

    The same screen is read by the audit, the policy and three judges: parses are cached (callers
    treat the nodes as read-only).
    """
    if not xml or not xml.strip():
        return []
    return list(_parse_cached(xml))


@lru_cache(maxsize=128)
def _parse_cached(xml: str) -> tuple:
    try:
        root = ElementTree.fromstring(xml.strip().encode("utf-8") if isinstance(xml, str) else xml)
    except ElementTree.ParseError:
        return ()
    return tuple(_node(element, 1) for element in root if element.tag == "node")


def _node(element, depth) -> UiNode:
    attrs = element.attrib
    match = _BOUNDS.search(attrs.get("bounds", ""))
    bounds = tuple(int(v) for v in match.groups()) if match else (0, 0, 0, 0)
    node = UiNode(
        text=attrs.get("text", ""), desc=attrs.get("content-desc", ""), resource_id=attrs.get("resource-id", ""),
        cls=attrs.get("class", ""), package=attrs.get("package", ""), bounds=bounds,
        clickable=attrs.get("clickable") == "true", long_clickable=attrs.get("long-clickable") == "true",
        scrollable=attrs.get("scrollable") == "true", focused=attrs.get("focused") == "true",
        selected=attrs.get("selected") == "true", checked=attrs.get("checked") == "true",
        password=attrs.get("password") == "true", enabled=attrs.get("enabled", "true") != "false", depth=depth)
    node.children = [_node(child, depth + 1) for child in element if child.tag == "node"]
    return node


def all_nodes(roots: list[UiNode]):
    for root in roots:
        yield from root.walk()


def node_at(roots: list[UiNode], x: int, y: int, *, clickable_first: bool = True) -> UiNode | None:
    """The element a touch at (x, y) hits: the smallest clickable node containing the point, else
    the smallest node of any kind (the last window dumped is on top)."""
    for root in reversed(roots):
        inside = [node for node in root.walk() if node.contains(x, y)]
        if not inside:
            continue
        clickable = [node for node in inside if node.clickable or node.long_clickable]
        pool = clickable if clickable_first and clickable else inside
        return min(pool, key=lambda node: (node.area, -node.depth))
    return None


def focused_node(roots: list[UiNode]) -> UiNode | None:
    focused = [node for node in all_nodes(roots) if node.focused]
    return focused[-1] if focused else None


def page_text(roots: list[UiNode]) -> str:
    """Every text and content-desc on the screen, one per line."""
    return "\n".join(part for node in all_nodes(roots) for part in (node.text, node.desc) if part)


def packages(roots: list[UiNode]) -> list[str]:
    return list(dict.fromkeys(node.package for node in all_nodes(roots) if node.package))
