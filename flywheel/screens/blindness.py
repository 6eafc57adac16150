"""Whether a UI dump can be read at all: a web view or a game/Flutter canvas exposes one opaque node
(or controls with no text, description or id), and its words exist only in pixels.

Whatever reads the hierarchy (System B, the offline policy's candidates) asks this first and, on a
blind screen, abstains or falls back to the pixels instead of guessing from an empty tree.
"""
from dataclasses import dataclass

from devices.uitree import all_nodes, parse_hierarchy

# Windows drawn by the system, readable on every phone; they say nothing about the app's page.
SYSTEM_PACKAGES = frozenset({"com.android.systemui"})
# Classes that draw their own content: the dump shows the box, never what is inside it.
OPAQUE_CLASSES = frozenset({"android.webkit.WebView", "android.view.SurfaceView", "android.view.TextureView",
                            "io.flutter.embedding.android.FlutterView"})
# An opaque box at least this share of the app's window hides the page.
BLIND_SHARE = 0.5


@dataclass(frozen=True)
class Readability:
    blind: bool
    readable_nodes: int                      # app nodes with text, a description or a resource id
    opaque_regions: tuple = ()               # bounds of opaque boxes with nothing readable inside


def _readable(node) -> bool:
    return bool(node.text.strip() or node.desc.strip() or node.resource_id.strip())


def readability(xml: str) -> Readability:
    """How much of the app's page the dump shows (an empty or unparsable dump is blind)."""
    roots = parse_hierarchy(xml or "")
    app = [n for n in all_nodes(roots) if n.package not in SYSTEM_PACKAGES]
    if not app:
        return Readability(True, 0)
    window = max(app, key=lambda n: n.area)
    readable = sum(1 for n in app if _readable(n))
    opaque = tuple(n.bounds for n in app
                   if n.cls in OPAQUE_CLASSES and not any(_readable(d) for d in n.walk()))
    hidden = sum((b[2] - b[0]) * (b[3] - b[1]) for b in opaque)
    # Text and descriptions are what a reader finds things by; ids alone (obfuscated or not) do not
    # say what a page shows, so a page of id-only nodes is as blind as one opaque box.
    worded = sum(1 for n in app if n.text.strip() or n.desc.strip())
    blind = worded == 0 or (window.area > 0 and hidden >= BLIND_SHARE * window.area)
    return Readability(blind, readable, opaque)


def hierarchy_is_blind(xml: str) -> bool:
    return readability(xml).blind
