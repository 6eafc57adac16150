"""Pillow renderer for screen Node trees, with a per-phone cache of encoded PNGs.

Speed matters (a bench measures `screencap -p` over ADB): only flat shapes and text are drawn,
fonts are cached, PNG uses compress_level=1, and an unchanged screen is served from the cache.
"""
import struct
import threading
from collections import OrderedDict
from functools import lru_cache

from PIL import Image, ImageDraw

from simfarm import png, ui

_DARKEN = [int(v * (1 - ui.SCRIM_FACTOR)) for v in range(256)] * 3


class Canvas:
    def __init__(self, width, height, background=ui.BACKGROUND):
        self.image = Image.new("RGB", (width, height), background)
        self.draw = ImageDraw.Draw(self.image)

    def darken(self):
        self.image = self.image.point(_DARKEN)
        self.draw = ImageDraw.Draw(self.image)


def render_image(root) -> Image.Image:
    canvas = Canvas(root.bounds[2], root.bounds[3])
    _paint(canvas, root)
    return canvas.image


def _paint(canvas, node):
    painter = PAINTERS.get(node.draw)
    if painter is not None:
        painter(canvas, node)
    for child in node.children:
        _paint(canvas, child)


def _rect(canvas, box, fill=None, outline=None, radius=0, width=2):
    box = (box[0], box[1], box[2] - 1, box[3] - 1)
    if box[2] <= box[0] or box[3] <= box[1]:
        return
    if radius:
        radius = min(radius, (box[2] - box[0]) // 2, (box[3] - box[1]) // 2)
        canvas.draw.rounded_rectangle(box, radius=radius, fill=fill, outline=outline, width=width)
    else:
        canvas.draw.rectangle(box, fill=fill, outline=outline, width=width)


def _text(canvas, box, text, size, color, align="left"):
    if not text:
        return
    font = ui.font(size)
    width = box[2] - box[0]
    text = ui.ellipsize(text, size, width)
    ascent, descent = font.getmetrics()
    y = (box[1] + box[3]) // 2 - (ascent + descent) // 2
    if align == "center":
        x = box[0] + (width - ui.text_width(text, size)) / 2
    elif align == "right":
        x = box[2] - ui.text_width(text, size)
    else:
        x = box[0]
    canvas.draw.text((x, y), text, font=font, fill=color)


def paint_fill(canvas, node):
    style = node.style
    _rect(canvas, node.box, fill=style.get("bg"), outline=style.get("border"), radius=style.get("radius", 0), width=3)
    if style.get("top_line"):
        box = node.box
        canvas.draw.line((box[0], box[1], box[2], box[1]), fill=style["top_line"], width=2)


def paint_text(canvas, node):
    style = node.style
    size, color, align = style.get("size", 40), style.get("color", ui.TEXT), style.get("align", "left")
    box = node.box
    if style.get("wrap"):
        lines = ui.wrap_text(node.text, size, box[2] - box[0])
        line_h = int(size * (1.35 if len(lines) > 1 else 1.0))
        total = line_h * len(lines)
        y = box[1] + max(0, ((box[3] - box[1]) - total) // 2) if len(lines) > 1 else box[1]
        for line in lines:
            _text(canvas, (box[0], y, box[2], y + line_h), line, size, color, align)
            y += line_h
    else:
        _text(canvas, box, node.text, size, color, align)


def paint_row(canvas, node):
    box = node.box
    _rect(canvas, box, fill=ui.SURFACE)
    if node.style.get("divider", True):
        canvas.draw.line((box[0], box[3] - 1, box[2], box[3] - 1), fill=(236, 237, 239), width=2)


def paint_button(canvas, node):
    style = node.style
    _rect(canvas, node.box, fill=style.get("bg"), outline=style.get("border"), radius=style.get("radius", 0), width=3)
    _text(canvas, _inset(node.box, style.get("radius", 0) // 2, 0), node.text, style.get("size", 42),
          style.get("fg", ui.TEXT), style.get("align", "center"))


def paint_input(canvas, node):
    style = node.style
    box = node.box
    color = style.get("color", ui.ACCENT) if node.focused else ui.DIVIDER
    _rect(canvas, box, fill=ui.SURFACE, outline=color, radius=12, width=4 if node.focused else 3)
    size = style.get("size", 42)
    inner = _inset(box, 32, 0)
    if style.get("multiline"):
        inner = (inner[0], box[1] + 20, inner[2], box[1] + 20 + int(size * 1.5))
    _text(canvas, inner, node.text, size, ui.TEXT_SECONDARY if style.get("hint") else ui.TEXT)
    if node.focused:
        x = inner[0] + (0 if style.get("hint") else ui.text_width(ui.ellipsize(node.text, size, inner[2] - inner[0]), size)) + 4
        mid = (inner[1] + inner[3]) // 2
        canvas.draw.line((x, mid - size * 0.6, x, mid + size * 0.6), fill=color, width=4)


def paint_toggle(canvas, node):
    box = node.box
    on = node.checked
    color = node.style.get("color", ui.ACCENT) if on and node.enabled else (189, 193, 198)
    _rect(canvas, box, fill=color, radius=(box[3] - box[1]) // 2)
    d = box[3] - box[1] - 12
    x = box[2] - d - 6 if on else box[0] + 6
    canvas.draw.ellipse((x, box[1] + 6, x + d, box[1] + 6 + d), fill=ui.WHITE)


def paint_checkbox(canvas, node):
    box = node.box
    color = node.style.get("color", ui.ACCENT)
    if node.checked:
        _rect(canvas, box, fill=color, radius=8)
        w = box[2] - box[0]
        canvas.draw.line((box[0] + w * 0.22, box[1] + w * 0.52, box[0] + w * 0.42, box[1] + w * 0.72,
                          box[0] + w * 0.8, box[1] + w * 0.3), fill=ui.WHITE, width=max(3, w // 10))
    else:
        _rect(canvas, box, outline=ui.TEXT_SECONDARY, radius=8, width=4)


def paint_radio(canvas, node):
    box = node.box
    color = node.style.get("color", ui.ACCENT) if node.checked else ui.TEXT_SECONDARY
    canvas.draw.ellipse(box, outline=color, width=5)
    if node.checked:
        canvas.draw.ellipse(_inset(box, (box[2] - box[0]) // 4, (box[3] - box[1]) // 4), fill=color)


def paint_slider(canvas, node):
    box = node.box
    mid = (box[1] + box[3]) // 2
    x = box[0] + (box[2] - box[0]) * node.style.get("fraction", 0)
    color = node.style.get("color", ui.ACCENT)
    _rect(canvas, (box[0], mid - 6, box[2], mid + 6), fill=ui.DIVIDER, radius=6)
    _rect(canvas, (box[0], mid - 6, int(x) + 1, mid + 6), fill=color, radius=6)
    r = (box[3] - box[1]) // 3
    canvas.draw.ellipse((x - r, mid - r, x + r, mid + r), fill=color)


def paint_wheel(canvas, node):
    box = node.box
    third = (box[3] - box[1]) // 3
    _rect(canvas, (box[0], box[1] + third, box[2], box[1] + 2 * third), fill=(232, 240, 254), radius=24)


def paint_scrim(canvas, node):
    canvas.darken()


def paint_battery(canvas, node):
    box = node.box
    level = max(0, min(100, node.style.get("level", 100)))
    _rect(canvas, box, outline=ui.TEXT, width=3, radius=4)
    inner = _inset(box, 5, 5)
    top = inner[3] - (inner[3] - inner[1]) * level / 100
    fill = ui.DANGER if level <= 15 else ui.TEXT
    _rect(canvas, (inner[0], int(top), inner[2], inner[3]), fill=fill)


def paint_app_icon(canvas, node):
    box = node.box
    _rect(canvas, box, fill=node.style.get("color", ui.ACCENT), radius=(box[2] - box[0]) // 4)
    size = int((box[3] - box[1]) * 0.5)
    _text(canvas, box, str(node.style.get("glyph", "?"))[:2], size, ui.WHITE, "center")


def paint_dot(canvas, node):
    canvas.draw.ellipse(node.box, fill=ui.TEXT if node.style.get("on") else (150, 150, 150))


def paint_key(canvas, node):
    _rect(canvas, node.box, fill=ui.SURFACE, radius=14)
    _text(canvas, node.box, node.text, node.style.get("size", 42), ui.TEXT, "center")


def paint_fab(canvas, node):
    _rect(canvas, node.box, fill=node.style.get("color", ui.ACCENT), radius=(node.box[2] - node.box[0]) // 3)
    paint_icon(canvas, node, box=_inset(node.box, (node.box[2] - node.box[0]) // 3, (node.box[3] - node.box[1]) // 3),
               color=ui.WHITE)


def paint_spinner(canvas, node):
    canvas.draw.arc(node.box, start=0, end=270, fill=node.style.get("color", ui.ACCENT), width=12)


def paint_snapshot(canvas, node):
    snapshot = node.style.get("_snapshot")
    if snapshot is not None:
        canvas.image.paste(snapshot, node.box[:2])


def paint_icon(canvas, node, box=None, color=None):
    from simfarm.icons import draw_icon
    draw_icon(canvas.draw, box or node.box, node.style.get("icon", ""), color or node.style.get("color", ui.TEXT))


def _inset(box, dx, dy):
    return (box[0] + dx, box[1] + dy, box[2] - dx, box[3] - dy)


PAINTERS = {
    "fill": paint_fill, "text": paint_text, "row": paint_row, "button": paint_button, "input": paint_input,
    "toggle": paint_toggle, "checkbox": paint_checkbox, "radio": paint_radio, "slider": paint_slider,
    "wheel": paint_wheel, "scrim": paint_scrim, "battery": paint_battery, "app_icon": paint_app_icon,
    "dot": paint_dot, "key": paint_key, "fab": paint_fab, "spinner": paint_spinner, "icon": paint_icon, "snapshot": paint_snapshot,
}


def encode_png(image) -> bytes:
    """PNG bytes; only bands of rows not seen before are compressed (png.py)."""
    return png.ENCODER.encode(image)


@lru_cache(maxsize=8)
def black_png(width, height) -> bytes:
    return encode_png(Image.new("RGB", (width, height), (0, 0, 0)))


def raw_framebuffer(image) -> bytes:
    """`screencap` without -p: width, height, format (1 = RGBA_8888) little-endian, then pixels."""
    rgba = image.convert("RGBA")
    return struct.pack("<III", rgba.width, rgba.height, 1) + rgba.tobytes()


class RenderCache:
    """PNG bytes by screen signature; the engine's version short-cuts the signature."""

    def __init__(self, size: int = 24):
        self.size = size
        self._entries: OrderedDict = OrderedDict()
        self._last_version = None
        self._last_png = None
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def png(self, version, root) -> bytes:
        with self._lock:
            if version == self._last_version and self._last_png is not None:
                self.hits += 1
                return self._last_png
            flat = []
            root.signature(flat)
            key = hash(tuple(flat))
            png = self._entries.get(key)
            if png is None:
                self.misses += 1
                png = encode_png(render_image(root))
                self._entries[key] = png
                if len(self._entries) > self.size:
                    self._entries.popitem(last=False)
            else:
                self.hits += 1
                self._entries.move_to_end(key)
            self._last_version, self._last_png = version, png
            return png
