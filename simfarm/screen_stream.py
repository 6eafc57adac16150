"""A virtual phone's screen as its streaming daemons see it: scaled, encoded, cached.

Real farms stream screens encoded on the phone (minicap's JPEG frames, scrcpy's H.264), so the
console only relays bytes. The virtual phones do the same: `ScreenEncoder` renders the screen,
scales it to the size a daemon was started with and encodes it there. Each distinct screen (the
render cache's signature) is scaled once per size and JPEG-encoded once per quality, so a screen
seen again (a typed letter deleted, a page re-opened) costs a dictionary lookup.

`H264Encoder` wraps PyAV's libx264 (the `av` package): baseline profile, zero-latency tuning, one
thread, Annex B output, as a phone's hardware encoder would give scrcpy. Constant quality (CRF), not a
bit rate: x264's rate control starves the first key frame into a grey picture at low rates.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from fractions import Fraction

from PIL import Image

from simfarm.render import PAINTERS, Canvas, render_image

JPEG_CACHE_ENTRIES = 48    # per phone: (screen, size, quality) -> JPEG bytes (~40 KB each at 360x800)
IMAGE_CACHE_ENTRIES = 24   # per phone: (screen, size) -> scaled RGB image, for the H.264 encoder
BLACK = ("black",)         # the signature of a sleeping screen
OVERFLOW = 16              # pixels a node's drawing may stray outside its box (glyph overhangs)
REDRAW_AT_MOST = 0.8       # a change covering more of the screen than this is drawn whole


class ScreenEncoder:
    """One per phone (`for_phone`); thread-safe; the phone's lock is held only to read its screen."""

    def __init__(self, phone):
        self.phone = phone
        self._lock = threading.Lock()
        self._jpegs: OrderedDict = OrderedDict()
        self._images: OrderedDict = OrderedDict()
        self._full: tuple | None = None  # (signature, flat signature, full-size image) of the last render
        self._scaled_last: dict = {}     # size -> (signature, scaled image) of the last scaling
        self.renders = self.partial_renders = 0

    @staticmethod
    def for_phone(phone) -> ScreenEncoder:
        encoder = getattr(phone, "_screen_encoder", None)
        if encoder is None:
            encoder = phone._screen_encoder = ScreenEncoder(phone)
        return encoder

    def display_size(self) -> tuple[int, int]:
        metrics = self.phone.engine.metrics
        return metrics.width, metrics.height

    def _screen(self):
        """(version, signature, (root, flat signature) or None) of what the display shows now."""
        phone = self.phone
        with phone.lock:
            version = phone.engine.version
            if not phone.screen_on:
                return version, BLACK + self.display_size(), None
            root = phone.engine.screen()
            flat = []
            root.signature(flat)
            return version, hash(tuple(flat)), (root, flat)

    def _render(self, signature, screen) -> tuple[Image.Image, tuple | None, object]:
        """The full-size picture, the rectangle that differs from the picture drawn before it (None:
        all of it) and that picture's signature. A small change (a typed letter, the clock)
        repaints only the nodes over it."""
        if self._full is not None and self._full[0] == signature:
            return self._full[2], (0, 0, 0, 0), signature
        base = self._full[0] if self._full is not None else None
        if screen is None:
            self._full = None
            return Image.new("RGB", self.display_size(), (0, 0, 0)), None, base
        root, flat = screen
        dirty = _changed_box(self._full[1], flat) if self._full is not None else None
        full_size = (root.bounds[2], root.bounds[3])
        if dirty is None or self._full[2].size != full_size or \
                _area(dirty) > REDRAW_AT_MOST * full_size[0] * full_size[1]:
            image, dirty = render_image(root), None
            self.renders += 1
        else:
            canvas = Canvas(*full_size)
            _paint_over(canvas, root, dirty)
            image = self._full[2]  # painted over in place: only `_full` holds the full-size picture
            image.paste(canvas.image.crop(dirty), dirty[:2])
            self.partial_renders += 1
        self._full = (signature, flat, image)
        return image, dirty, base

    def _scaled(self, signature, screen, size) -> Image.Image:
        key = (signature, size)
        image = self._images.get(key)
        if image is not None:
            self._images.move_to_end(key)
            return image
        last = self._scaled_last.get(size)
        full, dirty, base = self._render(signature, screen)
        factor = max(1, min(full.width // size[0], full.height // size[1]))
        exact = (full.width // factor, full.height // factor) == size and full.width % factor == 0 \
            and full.height % factor == 0
        if dirty is not None and exact and last is not None and last[0] == base:
            # Only the changed rectangle (aligned to the reduction) is scaled again.
            left, top = dirty[0] // factor * factor, dirty[1] // factor * factor
            right = min(full.width, -(-dirty[2] // factor) * factor)
            bottom = min(full.height, -(-dirty[3] // factor) * factor)
            image = last[1].copy()
            if right > left and bottom > top:
                image.paste(full.crop((left, top, right, bottom)).reduce(factor), (left // factor, top // factor))
        else:
            image = full.reduce(factor) if factor >= 2 else full.copy()  # `full` is painted over later
            if image.size != size:
                image = image.resize(size, Image.BILINEAR)
        self._scaled_last[size] = (signature, image)
        self._images[key] = image
        while len(self._images) > IMAGE_CACHE_ENTRIES:
            self._images.popitem(last=False)
        return image

    def image(self, size: tuple[int, int]) -> tuple[int, Image.Image]:
        """(version, the screen scaled to `size`)."""
        version, signature, screen = self._screen()
        with self._lock:
            return version, self._scaled(signature, screen, size)

    def jpeg(self, size: tuple[int, int], quality: int = 80) -> tuple[int, bytes]:
        """(version, JPEG of the screen scaled to `size`)."""
        version, signature, screen = self._screen()
        key = (signature, size, quality)
        with self._lock:
            data = self._jpegs.get(key)
            if data is None:
                from io import BytesIO

                buffer = BytesIO()
                self._scaled(signature, screen, size).save(buffer, "JPEG", quality=quality)
                data = self._jpegs[key] = buffer.getvalue()
                while len(self._jpegs) > JPEG_CACHE_ENTRIES:
                    self._jpegs.popitem(last=False)
            else:
                self._jpegs.move_to_end(key)
        return version, data


def _area(box) -> int:
    return max(0, box[2] - box[0]) * max(0, box[3] - box[1])


def _changed_box(old_flat, new_flat):
    """The rectangle covering every node drawn differently (by its drawn box, with room for
    overhangs), or None when that cannot be told (a scrim darkens everything)."""
    old, new = set(old_flat), set(new_flat)
    changed = old ^ new
    if not changed:
        return (0, 0, 0, 0)
    boxes = []
    for entry in changed:
        draw, box = entry[0], entry[1]
        if draw == "scrim" or not box:
            return None
        boxes.append(box)
    return (max(0, min(b[0] for b in boxes) - OVERFLOW), max(0, min(b[1] for b in boxes) - OVERFLOW),
            max(b[2] for b in boxes) + OVERFLOW, max(b[3] for b in boxes) + OVERFLOW)


def _paint_over(canvas, node, dirty):
    """Paint, in order, the nodes whose drawing may reach into `dirty` (a scrim always does)."""
    painter = PAINTERS.get(node.draw)
    if painter is not None:
        box = node.box
        if node.draw == "scrim" or (box[0] - OVERFLOW < dirty[2] and box[2] + OVERFLOW > dirty[0]
                                    and box[1] - OVERFLOW < dirty[3] and box[3] + OVERFLOW > dirty[1]):
            painter(canvas, node)
    for child in node.children:
        _paint_over(canvas, child, dirty)


def scaled_size(display: tuple[int, int], max_size: int, multiple: int = 1) -> tuple[int, int]:
    """The display scaled so its longer side is at most `max_size` (0: no limit), each side a
    multiple of `multiple` (scrcpy rounds to 8: encoders want aligned sizes)."""
    width, height = display
    if max_size and max(width, height) > max_size:
        scale = max_size / max(width, height)
        width, height = round(width * scale), round(height * scale)
    return max(multiple, width - width % multiple), max(multiple, height - height % multiple)


def h264_available() -> str:
    """'' when PyAV with libx264 is installed, else why not."""
    try:
        import av
    except ImportError:
        return "H.264 encoding needs PyAV (pip install av)"
    if "libx264" not in av.codecs_available:
        return "this PyAV build has no libx264 encoder"
    return ""


class H264Encoder:
    """Annex B H.264 access units from PIL images; the first one (and every `gop`-th) is a key frame."""

    def __init__(self, size: tuple[int, int], gop: int = 60, crf: int = 23):
        import av

        self.size = size
        context = av.CodecContext.create("libx264", "w")
        context.width, context.height = size
        context.pix_fmt = "yuv420p"
        context.time_base = Fraction(1, 1_000_000)
        context.gop_size = gop
        context.thread_count = 1
        context.options = {"preset": "ultrafast", "tune": "zerolatency", "profile": "baseline",
                           "crf": str(crf),
                           "x264-params": f"keyint={gop}:min-keyint={gop}:scenecut=0"}
        self._av = av
        self._context = context
        self._force_key = True

    def request_key_frame(self):
        self._force_key = True

    def encode(self, image: Image.Image, pts_us: int) -> list[tuple[bytes, bool]]:
        """[(access unit, is key frame)] for this picture (zero-latency: one in, one out)."""
        frame = self._av.VideoFrame.from_image(image).reformat(format="yuv420p")
        frame.pts = pts_us
        if self._force_key:
            frame.pict_type = self._av.video.frame.PictureType.I
            self._force_key = False
        return [(bytes(packet), bool(packet.is_keyframe)) for packet in self._context.encode(frame)]

    def close(self):
        try:
            self._context.encode(None)  # flush
        except Exception:  # closing must not fail the daemon's cleanup
            pass
