"""What a page shows, offers and exchanges, read offline from its UI hierarchy (§2.2.5).

`read_page` lists a page's title, visible texts and actionable elements, each element with a
selector in the query format (docs/query-format.md: resource_id, text, content_desc, index) that
finds it again on the same page. `describe_io` says what the page consumes ("text: search
products" for a search field) and yields ("text: Results item title" for a list, "text:
shared/copied text" for a share or copy button). Generic: no app is known by name.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field

MAX_NODES = 4000      # a page with thousands of nodes: read the first ones only
MAX_ELEMENTS = 150    # actionable elements kept per page
MAX_TEXTS = 60
MAX_TEXT_LENGTH = 120
KEYBOARD_PACKAGE_HINTS = ("inputmethod", "keyboard", "ime")
DIALOG_IDS = ("android:id/parentPanel", "android:id/alertTitle", "android:id/buttonPanel")
_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")
SHARE_WORDS = re.compile(r"\bshare\b|分享|转发", re.IGNORECASE)
COPY_WORDS = re.compile(r"\bcopy\b|复制|拷贝", re.IGNORECASE)
SEARCH_WORDS = re.compile(r"search|find|搜索|查找", re.IGNORECASE)


@dataclass
class PageReading:
    title: str = ""
    texts: list[str] = field(default_factory=list)
    elements: list[dict] = field(default_factory=list)
    package: str = ""
    is_dialog: bool = False
    node_count: int = 0
    list_rows: list[str] = field(default_factory=list)   # texts of repeated rows (list items)
    scrollable: bool = False


@dataclass
class _Node:
    attrs: dict
    depth: int
    parent: _Node | None = None
    children: list = field(default_factory=list)

    @property
    def text(self):
        return self.attrs.get("text", "")

    @property
    def desc(self):
        return self.attrs.get("content-desc", "")

    @property
    def rid(self):
        return self.attrs.get("resource-id", "")

    @property
    def cls(self):
        return self.attrs.get("class", "")

    def flag(self, name):
        return self.attrs.get(name) == "true"

    @property
    def bounds(self):
        match = _BOUNDS.search(self.attrs.get("bounds", ""))
        return [int(v) for v in match.groups()] if match else [0, 0, 0, 0]

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()

    def label(self) -> str:
        """What a person would call it: its own text or desc, else its first descendant's."""
        for node in self.walk():
            if node.text or node.desc:
                return (node.text or node.desc)[:MAX_TEXT_LENGTH]
        return ""


def _parse(hierarchy_xml: str) -> list[_Node]:
    try:
        root = ElementTree.fromstring(hierarchy_xml.encode("utf-8"))
    except (ElementTree.ParseError, AttributeError):
        return []
    nodes: list[_Node] = []

    def visit(element, depth, parent):
        if len(nodes) >= MAX_NODES:
            return
        node = _Node(dict(element.attrib), depth, parent)
        nodes.append(node)
        if parent is not None:
            parent.children.append(node)
        for child in element:
            if child.tag == "node":
                visit(child, depth + 1, node)

    for window in root:
        if window.tag == "node" and not any(hint in window.attrib.get("package", "").lower()
                                            for hint in KEYBOARD_PACKAGE_HINTS):
            visit(window, 0, None)
    return nodes


def is_editable(node) -> bool:
    return "EditText" in node.cls or "AutoCompleteTextView" in node.cls


def _selector(node: _Node, nodes: list[_Node], counts: dict) -> dict | None:
    """A query-format selector that finds `node` again (the first match of it is the node)."""
    if node.rid and counts["rid"].get(node.rid) == 1:
        return {"resource_id": node.rid}
    own = node.text or next((n.text for n in node.walk() if n.text), "")
    if own and counts["text"].get(own) == 1 and not is_editable(node):
        return {"text": own}
    if node.desc and counts["desc"].get(node.desc) == 1:
        return {"content_desc": node.desc}
    if node.rid:
        same = [n for n in nodes if n.rid == node.rid]
        return {"resource_id": node.rid, "index": same.index(node)}
    return None


def _title(nodes: list[_Node], is_dialog: bool) -> str:
    if is_dialog:
        title = next((n.text for n in nodes if n.rid == "android:id/alertTitle" and n.text), "")
        if title:
            return title
    bars = [n for n in nodes if n.rid.endswith(":id/toolbar") or n.rid.endswith(":id/action_bar")]
    for bar in bars:
        text = next((n.text for n in bar.walk() if n.text and not n.flag("clickable")), "")
        if text:
            return text[:MAX_TEXT_LENGTH]
    top = [n for n in nodes if n.text and "TextView" in n.cls and not n.flag("clickable")]
    return top[0].text[:MAX_TEXT_LENGTH] if top else ""


def _checked(node) -> bool | None:
    """The state of a switch: the node's own, else its first checkable child's; None if neither is one."""
    for candidate in (node, *node.children):
        if candidate.flag("checkable"):
            return candidate.flag("checked")
    return None


def _check_class(node) -> str:
    """The class of the switch, check box or radio button a row carries ("" when none)."""
    return next((c.cls.rsplit(".", 1)[-1] for c in (node, *node.children) if c.flag("checkable")), "")


def read_page(hierarchy_xml: str, max_elements: int = MAX_ELEMENTS) -> PageReading:
    """Title, texts (title first), actionable elements with selectors, dialog or not."""
    nodes = _parse(hierarchy_xml or "")
    if not nodes:
        return PageReading()
    counts = {"rid": {}, "text": {}, "desc": {}}
    for node in nodes:
        for key, value in (("rid", node.rid), ("text", node.text), ("desc", node.desc)):
            if value:
                counts[key][value] = counts[key].get(value, 0) + 1
    is_dialog = any(node.rid in DIALOG_IDS or node.rid.startswith("android:id/button") for node in nodes)
    title = _title(nodes, is_dialog)
    texts = list(dict.fromkeys([title] + [(n.text or n.desc)[:MAX_TEXT_LENGTH]
                                          for n in nodes if (n.text or n.desc) and not is_editable(n)]))
    texts = [text for text in texts if text][:MAX_TEXTS]
    elements = []
    for node in nodes:
        interactive = (node.flag("clickable") or node.flag("long-clickable") or node.flag("checkable")
                       or is_editable(node))
        if not interactive:
            continue
        selector = _selector(node, nodes, counts)
        if selector is None:
            continue
        elements.append({
            "selector": selector, "text": node.label(), "class": node.cls.rsplit(".", 1)[-1],
            "resource_id": node.rid, "bounds": node.bounds, "clickable": node.flag("clickable"),
            "long_clickable": node.flag("long-clickable"), "editable": is_editable(node),
            "checkable": node.flag("checkable") or any(n.flag("checkable") for n in node.children),
            "checked": _checked(node), "check_class": _check_class(node),
            "enabled": node.attrs.get("enabled", "true") != "false",
            "hint": (node.attrs.get("hint") or node.text) if is_editable(node) else "",
            "repeated": counts["rid"].get(node.rid, 0) > 1 if node.rid else False,
        })
        if len(elements) >= max_elements:
            break
    rows = [element["text"] for element in elements if element["repeated"] and element["text"]]
    return PageReading(title=title, texts=texts, elements=elements, package=nodes[0].attrs.get("package", ""),
                       is_dialog=is_dialog, node_count=len(nodes), list_rows=rows,
                       scrollable=any(node.flag("scrollable") for node in nodes))


def _phrase(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()[:60]


def describe_io(elements: list[dict], texts: list[str] | None = None, title: str = "") -> tuple[list, list]:
    """(inputs, outputs) as "kind: description" strings, from a page's elements and texts."""
    inputs, outputs = [], []
    for element in elements:
        if element.get("editable"):
            hint = _phrase(element.get("hint") or element.get("text") or "")
            if not hint:
                rid = (element.get("resource_id") or "").rsplit("/", 1)[-1].replace("_", " ")
                hint = _phrase(rid) or "free text"
            kind = "text"
            inputs.append(f"{kind}: {hint}")
    headline = _phrase(title)
    if any(element.get("repeated") and element.get("text") for element in elements):
        outputs.append(f"text: {headline + ' ' if headline else ''}item title")
    for element in elements:
        label = f"{element.get('text', '')} {(element.get('selector') or {}).get('content_desc', '')}"
        if SHARE_WORDS.search(label):
            outputs.append("text: shared text")
        elif COPY_WORDS.search(label):
            outputs.append("text: copied text")
    if not outputs and texts:
        body = [text for text in texts[1:] if len(text) > 2]
        if body:
            outputs.append(f"text: {headline or 'page'} content")
    return list(dict.fromkeys(inputs)), list(dict.fromkeys(outputs))


def is_search_input(element: dict) -> bool:
    return bool(element.get("editable") and SEARCH_WORDS.search(
        f"{element.get('hint', '')} {element.get('resource_id', '')}"))
