"""Pages whose words exist only in pixels: web views, game canvases and Flutter-like apps.

The screen is laid out and drawn exactly as for a native page (taps hit the real elements), but
`uiautomator dump` sees what it sees on a real phone: a web view or canvas is ONE opaque node with
no text and no children; a Flutter-like app shows its controls as bare clickable `View`s (no text,
description or id). A page is blind by declaration (`render:` in its app file) or by the farm's
`blind_share` switch, which turns a seeded share of ordinary pages into web views or canvases.
"""
import hashlib
from dataclasses import replace

NATIVE, WEBVIEW, CANVAS, FLUTTER = "native", "webview", "canvas", "flutter"
OPAQUE_CLASS = {WEBVIEW: "android.webkit.WebView", CANVAS: "android.view.SurfaceView"}
CONTROLS_ONLY = "canvas"      # Node.dump_as for a Flutter-like window
VIEW = "android.view.View"


def _share_point(*parts) -> float:
    """A number in [0, 1) that is the same in every process for the same parts."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def switched_render(seed: int, share: float, package: str, page_id: str) -> str:
    """The blind-share switch: which ordinary pages are drawn as a web view or canvas (seeded)."""
    if share <= 0 or _share_point(seed, package, page_id, "blind") >= share:
        return NATIVE
    return WEBVIEW if _share_point(seed, package, page_id, "kind") < 0.5 else CANVAS


def page_render(app, page_id: str, seed: int = 0, share: float = 0.0) -> str:
    """How a page is drawn: declared on the page or the app, else by the switch (never a trap page,
    whose spinner or toast must stay what it is)."""
    spec = app.pages.get(page_id) or {}
    declared = spec.get("render") or (app.render if app.render != NATIVE else "")
    if declared:
        return declared
    if spec.get("trap"):
        return NATIVE
    return switched_render(seed, share, app.package, page_id)


def mark(window, body, render: str) -> None:
    """Tell the dump how this app window is seen; the pixels and hit-testing do not change."""
    if render == NATIVE:
        return
    window.truth = window.truth or "blind"
    if render == FLUTTER:
        window.dump_as = CONTROLS_ONLY
        return
    body.dump_as = OPAQUE_CLASS[render]
    # A floating button drawn over the content belongs to the web page / canvas.
    for node in window.children:
        if node.draw == "fab":
            node.in_dump = False


def _bare(node, cls):
    return replace(node, cls=cls, text="", desc="", rid="", children=[], dump_as="", checkable=False,
                   checked=False, password=False, focused=False, selected=False)


def write_blind(node, index, out, depth, write) -> None:
    """hierarchy._write for a node with `dump_as` set."""
    if node.dump_as == CONTROLS_ONLY:
        shell = _bare(node, node.cls)
        shell.children = [_bare(n, VIEW) for n in _dumped_descendants(node)
                          if n.clickable or n.long_clickable or n.scrollable]
        return write(shell, index, out, depth)
    return write(_bare(node, node.dump_as), index, out, depth)


def _dumped_descendants(node):
    for child in node.children:
        if child.in_dump:
            yield child
            yield from _dumped_descendants(child)


def screen_kind(engine) -> str:
    """"trap" while a trap toast or trap page shows, "blind" when the focused window is a blind page,
    else "ordinary" (a dialog, the shade or the launcher in front is what the phone shows)."""
    from simfarm.hierarchy import dumped_windows  # hierarchy imports this module
    root = engine.screen()
    if engine.toast_text and engine.toast_trap:
        return "trap"
    focused = next((w for w in dumped_windows(root) if not w.style.get("always_dump")), None)
    return focused.truth if focused is not None and focused.truth else "ordinary"
