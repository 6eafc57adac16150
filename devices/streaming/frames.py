"""A captured screen, its JPEG renditions per viewer size, and the binary frame header.

Every binary websocket message is HEADER + JPEG bytes. An empty JPEG part means "the screen is
unchanged since the last frame you got; this is when we last checked" (keeps the age honest on a
still screen without resending pixels).
"""
import io
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from PIL import Image

# magic, frame seq, capture time (ms since the epoch, server clock),
# JPEG width/height, phone width/height (the size the phone's touch coordinates use)
HEADER = struct.Struct("<4sIdHHHH")
MAGIC = b"FWF1"
JPEG_QUALITY = 70
MIN_SIDE = 16
MAX_RENDITIONS = 4  # JPEG sizes kept per picture: viewers that keep resizing cannot fill memory


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height from the PNG's IHDR chunk, without decoding the pixels."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 24:
        raise ValueError("not a PNG")
    return struct.unpack(">II", png[16:24])


def fit_size(source: tuple[int, int], box: tuple[int, int]) -> tuple[int, int]:
    """The largest size with the source's aspect ratio inside `box`, never larger than the source."""
    width, height = source
    box_w = max(MIN_SIDE, min(box[0], width))
    box_h = max(MIN_SIDE, min(box[1], height))
    scale = min(box_w / width, box_h / height)
    return max(1, round(width * scale)), max(1, round(height * scale))


class Picture:
    """The pixels of one distinct screen. Decoded once, encoded once per requested size."""

    def __init__(self, version: int, size: tuple[int, int], png: bytes | None = None,
                 image: Image.Image | None = None):
        self.version = version
        self.size = size
        self.png = png
        self._image = image
        self._jpegs: OrderedDict[tuple[int, int], bytes] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()  # viewers of one phone share the work, in threads

    def image(self) -> Image.Image:
        if self._image is None:
            image = Image.open(io.BytesIO(self.png))
            self._image = image if image.mode == "RGB" else image.convert("RGB")
        return self._image

    def jpeg(self, box: tuple[int, int]) -> tuple[bytes, tuple[int, int]]:
        size = fit_size(self.size, box)
        with self._lock:
            data = self._jpegs.get(size)
            if data is not None:
                self._jpegs.move_to_end(size)
            else:
                image = self.image()
                if size != image.size:
                    factor = min(image.width // size[0], image.height // size[1])
                    if factor >= 2:  # reduce() is a cheap box filter; resize() finishes the job
                        image = image.reduce(factor)
                    image = image.resize(size, Image.BILINEAR)
                buffer = io.BytesIO()
                image.save(buffer, "JPEG", quality=JPEG_QUALITY)
                data = self._jpegs[size] = buffer.getvalue()
                while len(self._jpegs) > MAX_RENDITIONS:
                    self._jpegs.popitem(last=False)
        return data, size


@dataclass
class Frame:
    """One capture: a sequence number, when it was taken, and its (maybe shared) picture."""

    seq: int
    captured_at: float  # seconds since the epoch, taken just before the capture was requested
    picture: Picture
    error: str = field(default="")


def pack(frame: Frame, jpeg: bytes, jpeg_size: tuple[int, int]) -> bytes:
    phone_w, phone_h = frame.picture.size
    return HEADER.pack(MAGIC, frame.seq, frame.captured_at * 1000, jpeg_size[0], jpeg_size[1],
                       phone_w, phone_h) + jpeg


def unpack(message: bytes) -> tuple[dict, bytes]:
    """The header as a dict and the JPEG bytes (for tests and the benchmark)."""
    magic, seq, captured_ms, width, height, phone_w, phone_h = HEADER.unpack_from(message)
    if magic != MAGIC:
        raise ValueError("not a frame")
    return ({"seq": seq, "captured_at": captured_ms / 1000, "width": width, "height": height,
             "phone_width": phone_w, "phone_height": phone_h}, message[HEADER.size:])
