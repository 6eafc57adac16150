"""The screen model shared by layout, renderer, uiautomator dump and hit-testing.

A screen is a tree of `Node`s. Layout computes it once per UI change; the renderer draws it,
hierarchy.py serialises it and the engine hit-tests taps against it, so pixels, XML bounds and
tap targets cannot disagree.
"""
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from PIL import ImageFont

# Colors (Material-like, light theme).
WHITE = (255, 255, 255)
BACKGROUND = (248, 249, 250)
SURFACE = (255, 255, 255)
TEXT = (32, 33, 36)
TEXT_SECONDARY = (95, 99, 104)
DIVIDER = (218, 220, 224)
ACCENT = (26, 115, 232)
DANGER = (217, 48, 37)
STATUS_BAR = (241, 243, 244)
SCRIM_FACTOR = 0.45


def hex_color(value, default=ACCENT):
    if isinstance(value, (tuple, list)):
        return tuple(value)
    if isinstance(value, str) and value.startswith("#") and len(value) == 7:
        return tuple(int(value[i:i + 2], 16) for i in (1, 3, 5))
    return default


@lru_cache(maxsize=64)
def font(size: int):
    """Pillow's bundled FreeType font: no system fonts needed on a fresh machine."""
    return ImageFont.load_default(size=max(8, int(size)))


@lru_cache(maxsize=8192)
def text_width(text: str, size: int) -> float:
    return font(size).getlength(text)


def wrap_text(text: str, size: int, width: int) -> list[str]:
    """Greedy word wrap (breaks long words by characters, which also covers CJK text)."""
    lines = []
    for paragraph in str(text).split("\n"):
        current = ""
        for word in paragraph.split(" "):
            candidate = word if not current else current + " " + word
            if text_width(candidate, size) <= width:
                current = candidate
                continue
            if current:
                lines.append(current)
            current = ""
            for char in word:
                if text_width(current + char, size) > width and current:
                    lines.append(current)
                    current = ""
                current += char
        lines.append(current)
    return lines or [""]


def ellipsize(text: str, size: int, width: int) -> str:
    if text_width(text, size) <= width:
        return text
    while text and text_width(text + "…", size) > width:
        text = text[:-1]
    return text + "…"


@dataclass(eq=False)
class Node:
    cls: str = "android.widget.FrameLayout"
    bounds: tuple = (0, 0, 0, 0)      # visible bounds: the XML's bounds and the tap target
    frame: tuple | None = None        # full drawn box before clipping (defaults to bounds)
    text: str = ""
    rid: str = ""
    desc: str = ""
    package: str = ""
    draw: str = ""                    # how the renderer paints it ("" = nothing of its own)
    style: dict = field(default_factory=dict)
    children: list = field(default_factory=list)
    clickable: bool = False
    long_clickable: bool = False
    scrollable: bool = False
    checkable: bool = False
    checked: bool = False
    focusable: bool = False
    focused: bool = False
    password: bool = False
    selected: bool = False
    enabled: bool = True
    window: str = ""                  # set on window roots: the window's title
    in_dump: bool = True              # False: drawn but never in uiautomator XML (keyboard, status bar)
    # How uiautomator sees a node whose content is drawn by a web view or canvas (simfarm/blind.py):
    # "" as it is; a class name: one opaque box of that class; "canvas": only bare clickable Views.
    dump_as: str = ""
    truth: str = ""                   # on window roots: the screen kind the farm knows ("blind", "trap")
    on_tap: Callable | None = None
    on_long_press: Callable | None = None
    on_swipe: Callable | None = None  # called with (dx, dy, x1, y1)

    @property
    def box(self):
        return self.frame or self.bounds

    def add(self, node: "Node") -> "Node":
        self.children.append(node)
        return node

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()

    def signature(self, out: list) -> None:
        """Everything that affects pixels, flattened for the render cache key.

        Style keys starting with "_" hold unhashable payloads (a snapshot image) and must come
        with a hashable digest under another key."""
        out.append((self.draw, self.box, self.bounds, self.text, self.checked, self.focused,
                    self.enabled, self.selected, self.password,
                    tuple(sorted(kv for kv in self.style.items() if not kv[0].startswith("_"))) if self.style else ()))
        for child in self.children:
            child.signature(out)


def clip(box, viewport):
    """Intersect a box with a viewport; None when nothing is visible."""
    x1, y1, x2, y2 = max(box[0], viewport[0]), max(box[1], viewport[1]), min(box[2], viewport[2]), min(box[3], viewport[3])
    if x2 <= x1 or y2 <= y1:
        return None
    return (x1, y1, x2, y2)


def contains(box, x, y) -> bool:
    return box[0] <= x < box[2] and box[1] <= y < box[3]


class Metrics:
    """Sizes in pixels for one screen: designed at 1080 wide and scaled by width."""

    def __init__(self, width: int, height: int):
        self.width, self.height = width, height
        self.scale = width / 1080.0
        self.status_bar = self.px(100)
        self.app_bar = self.px(168)
        self.nav_bar = self.px(64)
        self.bottom_nav = self.px(190)
        self.keyboard = int(height * 0.34)
        self.margin = self.px(48)
        self.x0, self.x1 = 0, width     # horizontal extent that element builders fill

    def inset(self, x0: int, x1: int, margin: int = 0) -> "Metrics":
        """The same metrics for a narrower column (a dialog's body)."""
        copy = Metrics(self.width, self.height)
        copy.x0, copy.x1, copy.margin = x0, x1, margin
        return copy

    def px(self, design_units) -> int:
        return int(round(design_units * self.scale))

    def font(self, design_size):
        return self.px(design_size)
