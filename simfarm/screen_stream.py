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

from simfarm.render import render_image

JPEG_CACHE_ENTRIES = 48    # per phone: (screen, size, quality) -> JPEG bytes (~40 KB each at 360x800)
IMAGE_CACHE_ENTRIES = 24   # per phone: (screen, size) -> scaled RGB image, for the H.264 encoder
BLACK = ("black",)         # the signature of a sleeping screen


class ScreenEncoder:
    """One per phone (`for_phone`); thread-safe; the phone's lock is held only to read its screen."""

    def __init__(self, phone):
        self.phone = phone
        self._lock = threading.Lock()
        self._jpegs: OrderedDict = OrderedDict()
        self._images: OrderedDict = OrderedDict()
        self._full: tuple | None = None  # (signature, full-size image) of the last screen rendered
        self.renders = 0

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
        """(version, signature, root or None) of what the display shows now."""
        phone = self.phone
        with phone.lock:
            version = phone.engine.version
            if not phone.screen_on:
                return version, BLACK + self.display_size(), None
            root = phone.engine.screen()
            flat = []
            root.signature(flat)
            return version, hash(tuple(flat)), root

    def _scaled(self, signature, root, size) -> Image.Image:
        key = (signature, size)
        image = self._images.get(key)
        if image is not None:
            self._images.move_to_end(key)
            return image
        if self._full is not None and self._full[0] == signature:
            full = self._full[1]
        elif root is None:
            full = Image.new("RGB", self.display_size(), (0, 0, 0))
        else:
            full = render_image(root)
            self.renders += 1
            self._full = (signature, full)
        image = full
        if size != full.size:
            factor = min(full.width // size[0], full.height // size[1])
            if factor >= 2:
                image = image.reduce(factor)
            image = image.resize(size, Image.BILINEAR)
        self._images[key] = image
        while len(self._images) > IMAGE_CACHE_ENTRIES:
            self._images.popitem(last=False)
        return image

    def image(self, size: tuple[int, int]) -> tuple[int, Image.Image]:
        """(version, the screen scaled to `size`)."""
        version, signature, root = self._screen()
        with self._lock:
            return version, self._scaled(signature, root, size)

    def jpeg(self, size: tuple[int, int], quality: int = 80) -> tuple[int, bytes]:
        """(version, JPEG of the screen scaled to `size`)."""
        version, signature, root = self._screen()
        key = (signature, size, quality)
        with self._lock:
            data = self._jpegs.get(key)
            if data is None:
                from io import BytesIO

                buffer = BytesIO()
                self._scaled(signature, root, size).save(buffer, "JPEG", quality=quality)
                data = self._jpegs[key] = buffer.getvalue()
                while len(self._jpegs) > JPEG_CACHE_ENTRIES:
                    self._jpegs.popitem(last=False)
            else:
                self._jpegs.move_to_end(key)
        return version, data


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
