"""Same page or new page (§2.2.5): a perceptual hash of the screenshot plus a layout signature of
the UI hierarchy.

The layout is the hierarchy's STRUCTURE: class names, resource-ids, nesting and the
clickable/scrollable/editable flags; never texts or content descriptions (a product page shows
another product's title, it is still the product page). Repeated sibling subtrees (list rows,
cards of a feed) are collapsed to one, so a list of 3 rows and a list of 7 rows have the same
layout. Two observations are the same page when their layouts are (almost) the same and their
screenshots look alike, or their layouts are identical; a different foreground activity, when
both are known, always means a different page.

Thresholds: settings GEM_PHASH_DISTANCE / GEM_LAYOUT_DISTANCE, overridden per app by
App.page_identity {"phash_distance", "layout_distance"}.
"""
from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ElementTree

import imagehash
from django.conf import settings

from flywheel.rules.cpt_cleaning import perceptual_hash

MAX_NODES = 4000          # a page with thousands of nodes: the rest is not read (it is a long list)
MAX_DEPTH = 40
KEYBOARD_PACKAGE_HINTS = ("inputmethod", "keyboard", "ime")


class PageFingerprint:
    """What same_page compares of one observation. Made from a screenshot (`png`), the pHash is
    computed when it is first read and the screenshot let go: same_page reads it only for two
    layouts that are near but not the same, and a page that is stored reads it then (decoding a
    full screenshot was a quarter of an exploration's time)."""

    __slots__ = ("_phash", "_png", "layout_signature", "layout_shape", "node_count", "activity")

    def __init__(self, phash: str | None = None, layout_signature: str = "", layout_shape=None,
                 node_count: int = 0, activity: str = "", png: bytes = b""):
        self._phash, self._png = phash, png
        self.layout_signature, self.layout_shape = layout_signature, list(layout_shape or [])
        self.node_count, self.activity = node_count, activity

    @property
    def phash(self) -> str:
        if self._phash is None:
            self._phash, self._png = screenshot_hash(self._png), b""
        return self._phash

    def without_screenshot(self) -> PageFingerprint:
        """A copy that keeps no screenshot: its pHash if that was computed, else none ('')."""
        return PageFingerprint(phash=self._phash or "", layout_signature=self.layout_signature,
                               layout_shape=self.layout_shape, node_count=self.node_count, activity=self.activity)

    def __repr__(self):
        return (f"PageFingerprint(phash={self.phash!r}, layout_signature={self.layout_signature!r}, "
                f"node_count={self.node_count}, activity={self.activity!r})")


def screenshot_hash(png: bytes) -> str:
    """imagehash's DCT perceptual hash, 64 bits as 16 hex digits ('' for no or a broken image)."""
    if not png:
        return ""
    try:
        return perceptual_hash(png)  # one pHash for CPT cleaning and GEM (flywheel/rules/cpt_cleaning.py)
    except (OSError, ValueError):
        return ""


def phash_distance(a: str, b: str) -> int:
    if not a or not b or len(a) != len(b):
        return 64
    return imagehash.hex_to_hash(a) - imagehash.hex_to_hash(b)


def _short_class(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _flags(attrs) -> str:
    flags = ""
    if attrs.get("clickable") == "true":
        flags += "c"
    if attrs.get("long-clickable") == "true":
        flags += "l"
    if attrs.get("scrollable") == "true":
        flags += "s"
    if attrs.get("checkable") == "true":
        flags += "k"
    if "EditText" in attrs.get("class", ""):
        flags += "e"
    return flags


class _Budget:
    def __init__(self, limit):
        self.left = limit
        self.seen = 0


def _structure(element, depth: int, budget: _Budget) -> tuple[str, list[str]]:
    """(a canonical string of this subtree's structure, its tokens), repeated children collapsed."""
    budget.seen += 1
    budget.left -= 1
    attrs = element.attrib
    own = f"{_short_class(attrs.get('class', ''))}#{attrs.get('resource-id', '')}!{_flags(attrs)}"
    children, tokens, seen = [], [], set()
    if depth < MAX_DEPTH:
        for child in element:
            if child.tag != "node" or budget.left <= 0:
                continue
            text, child_tokens = _structure(child, depth + 1, budget)
            if text in seen:  # a repeated row: one stands for all
                continue
            seen.add(text)
            children.append(text)
            tokens.extend(child_tokens)
    tokens = [f"{depth}:{own}", *tokens]
    return own + ("(" + ",".join(children) + ")" if children else ""), tokens


def _windows(root):
    """Top-level windows of the dump, without the on-screen keyboard."""
    return [node for node in root if node.tag == "node"
            and not any(hint in node.attrib.get("package", "").lower() for hint in KEYBOARD_PACKAGE_HINTS)]


def layout_of(hierarchy_xml: str) -> tuple[str, list[str], int]:
    """(layout signature, shape tokens, node count) of a uiautomator dump; a dump that does not
    parse gives an empty layout."""
    try:
        root = ElementTree.fromstring(hierarchy_xml.encode("utf-8") if isinstance(hierarchy_xml, str)
                                      else hierarchy_xml)
    except (ElementTree.ParseError, AttributeError):
        return "", [], 0
    budget = _Budget(MAX_NODES)
    parts, tokens = [], []
    for window in _windows(root):
        if budget.left <= 0:
            break
        text, window_tokens = _structure(window, 0, budget)
        parts.append(text)
        tokens.extend(window_tokens)
    canonical = "|".join(parts)
    signature = hashlib.sha256(canonical.encode("utf-8")).hexdigest() if canonical else ""
    node_count = budget.seen if budget.left > 0 else sum(1 for _ in root.iter("node"))
    return signature, list(dict.fromkeys(tokens)), node_count


def fingerprint(png: bytes, hierarchy_xml: str, activity: str = "") -> PageFingerprint:
    signature, shape, node_count = layout_of(hierarchy_xml or "")
    return PageFingerprint(phash=None if png else "", layout_signature=signature, layout_shape=shape,
                           node_count=node_count, activity=activity or "", png=png or b"")


def layout_distance(a_shape, b_shape) -> float:
    """1 - Jaccard similarity of two shapes' token sets (0: same structure, 1: nothing shared)."""
    a, b = set(a_shape or ()), set(b_shape or ())
    if not a and not b:
        return 0.0
    return 1.0 - len(a & b) / len(a | b)


def default_thresholds() -> dict:
    return {"phash_distance": int(settings.GEM_PHASH_DISTANCE),
            "layout_distance": float(settings.GEM_LAYOUT_DISTANCE)}


def thresholds_for(app) -> dict:
    """The same-page thresholds of an app (App or None): its overrides over the settings."""
    thresholds = default_thresholds()
    overrides = getattr(app, "page_identity", None) or {}
    for key, cast in (("phash_distance", int), ("layout_distance", float)):
        if overrides.get(key) is not None:
            try:
                thresholds[key] = cast(overrides[key])
            except (TypeError, ValueError):
                pass  # a bad override keeps the setting
    return thresholds


def same_page(a, b, thresholds: dict | None = None) -> bool:
    """Whether two fingerprints (PageFingerprint or GemPage: phash, layout_signature, layout_shape,
    activity) are the same page."""
    thresholds = thresholds or default_thresholds()
    activity_a, activity_b = getattr(a, "activity", ""), getattr(b, "activity", "")
    if activity_a and activity_b and activity_a != activity_b:
        return False
    if a.layout_signature and a.layout_signature == b.layout_signature:
        return True
    limit = float(thresholds.get("layout_distance", settings.GEM_LAYOUT_DISTANCE))
    distance = layout_distance(a.layout_shape, b.layout_shape)
    if distance > limit:
        return False
    # Nearly the same structure: the same page unless it also looks different (a half-way
    # structure match with another picture is another page with a similar skeleton).
    looks_alike = phash_distance(a.phash, b.phash) <= int(thresholds.get("phash_distance",
                                                                           settings.GEM_PHASH_DISTANCE))
    return looks_alike or distance <= limit / 2


def match_page(candidate, pages, thresholds: dict | None = None):
    """The known page (of `pages`) that `candidate` is, preferring the closest layout, or None."""
    best, best_distance = None, None
    for page in pages:
        if same_page(candidate, page, thresholds):
            distance = layout_distance(candidate.layout_shape, page.layout_shape)
            if best is None or distance < best_distance:
                best, best_distance = page, distance
    return best
