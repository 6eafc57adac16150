"""uiautomator XML from the screen tree, in the exact shape `uiautomator dump` writes.

As on a real phone only the focused window is dumped (a dialog's dump shows the dialog, not
the app behind it), plus windows that uiautomator also reports (a heads-up notification).
Drawn-only nodes (status bar, keyboard, toast, decorations) are never in the dump.
"""
import re

from simfarm import blind

_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")
HEADER = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>"


def _attr(value) -> str:
    value = _INVALID_XML.sub("", str(value))
    return (value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("\n", "&#10;"))


def _bool(value) -> str:
    return "true" if value else "false"


def dumped_windows(root) -> list:
    windows = [w for w in root.children if w.window and w.in_dump]
    focused = [w for w in windows if not w.style.get("always_dump")]
    chosen = focused[-1:] + [w for w in windows if w.style.get("always_dump")]
    return chosen


def _write(node, index, out, depth):
    if node.dump_as:
        return blind.write_blind(node, index, out, depth, _write)
    x1, y1, x2, y2 = node.bounds
    out.append(
        f'<node index="{index}" text="{_attr(node.text)}" resource-id="{_attr(node.rid)}" '
        f'class="{_attr(node.cls)}" package="{_attr(node.package)}" content-desc="{_attr(node.desc)}" '
        f'checkable="{_bool(node.checkable)}" checked="{_bool(node.checked)}" clickable="{_bool(node.clickable)}" '
        f'enabled="{_bool(node.enabled)}" focusable="{_bool(node.focusable or node.clickable)}" '
        f'focused="{_bool(node.focused)}" scrollable="{_bool(node.scrollable)}" '
        f'long-clickable="{_bool(node.long_clickable)}" password="{_bool(node.password)}" '
        f'selected="{_bool(node.selected)}" bounds="[{x1},{y1}][{x2},{y2}]"')
    children = [child for child in node.children if child.in_dump]
    if not children:
        out.append(" />")
        return
    out.append(">")
    for i, child in enumerate(children):
        _write(child, i, out, depth + 1)
    out.append("</node>")


def dump_xml(root, rotation: int = 0) -> str:
    out = [HEADER, f'<hierarchy rotation="{rotation}">']
    for i, window in enumerate(dumped_windows(root)):
        _write(window, i, out, 1)
    out.append("</hierarchy>")
    return "".join(out)
