"""What a failed trajectory's stored steps show: the frames, the dump, the page's heading and the
screen size, as the ECDM's paths read them (a frame that cannot be read counts as missing)."""
from __future__ import annotations

from devices.uitree import all_nodes, node_at, parse_hierarchy
from flywheel.blobs import read_blob
from flywheel.models import Step
from flywheel.screens.labels import label_of
from flywheel.screens.page_identity import fingerprint

DEFAULT_SCREEN = (1080, 2400)
HEADING_BAND = 0.2  # a page's title sits in the top fifth of the screen


def screen_of(step: Step) -> tuple[int, int]:
    screen = (step.timings or {}).get("screen")
    try:
        width, height = int(screen[0]), int(screen[1])
        return (width, height) if width > 0 and height > 0 else DEFAULT_SCREEN
    except (TypeError, ValueError, IndexError):
        return DEFAULT_SCREEN


def stored_hierarchy(step: Step) -> str:
    if not step.hierarchy:
        return ""
    try:
        return read_blob(step.hierarchy.name).decode("utf-8", "replace")
    except OSError:
        return ""


def stored_screenshot(step: Step) -> bytes:
    if not step.screenshot:
        return b""
    try:
        return read_blob(step.screenshot.name)
    except OSError:
        return b""


def has_screenshot(step: Step) -> bool:
    return bool(stored_screenshot(step))


def stored_print(step: Step):
    """The step's page fingerprint (flywheel/screens/page_identity.py)."""
    return fingerprint(stored_screenshot(step), stored_hierarchy(step))


def missing_screenshots(trajectory, upto: int) -> list[int]:
    """Indices of the kept steps (executed, before `upto`) and of step `upto` with no screenshot."""
    return [s.index for s in trajectory.steps.filter(index__lte=upto).order_by("index")
            if (s.index == upto or s.executed_action is not None) and not has_screenshot(s)]


def no_screenshot_reason(missing: list[int]) -> str:
    shown = ", ".join(str(i) for i in missing[:8]) + ("…" if len(missing) > 8 else "")
    return (f"no screenshot stored for step{'s' if len(missing) > 1 else ''} {shown}: the sample would have "
            "no screen to learn from; a person decides")


def screen_heading(xml: str, package: str = "", height: int = DEFAULT_SCREEN[1]) -> str:
    """The page's title as shown: the highest text in the top band (not a button), else the first text."""
    nodes = [n for n in all_nodes(parse_hierarchy(xml))
             if n.text.strip() and 1 < len(n.text.strip()) <= 60 and (not package or n.package == package)]
    band = [n for n in nodes if not n.clickable and n.bounds[1] < height * HEADING_BAND]
    if band:
        return min(band, key=lambda n: (n.bounds[1], -(n.bounds[3] - n.bounds[1]))).text.strip()
    return nodes[0].text.strip() if nodes else ""


def label_at(roots, action) -> str:
    """What a person calls the element a pointed action hits: a clickable element's label, a
    plain element's own text; '' for a tap between elements or an action with no point."""
    point = action.get("point") if isinstance(action, dict) else None
    if not isinstance(point, (list, tuple)) or len(point) != 2:
        return ""
    try:
        node = node_at(roots, int(point[0]), int(point[1]))
    except (TypeError, ValueError):
        return ""
    if node is None:
        return ""
    return (label_of(node) if node.clickable or node.long_clickable else (node.text or node.desc)).strip()[:60]
