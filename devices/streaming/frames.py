"""A captured screen, its JPEG renditions per viewer size, and the binary frame headers.

A JPEG viewer gets HEADER + JPEG bytes per binary websocket message. An empty JPEG part means
"the screen is unchanged since the last frame you got; this is when we last checked" (keeps the
age honest on a still screen without resending pixels). An H.264 viewer gets VIDEO_HEADER + an
Annex B access unit (the codec config in front of key frames); an empty one means the same.
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
# magic, packet seq, receipt time (ms since the epoch), flags (1: key frame), 0,
# video width/height, phone width/height
VIDEO_HEADER = struct.Struct("<4sIdBBHHHH")
VIDEO_MAGIC = b"FWH1"
VIDEO_KEY_FRAME = 1
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

    def output_size(self, box: tuple[int, int]) -> tuple[int, int]:
        return fit_size(self.size, box)

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


class RelayedPicture:
    """A picture the phone encoded itself (minicap): relayed as it came, whatever a viewer's box
    (the browser scales it), so nothing is decoded or encoded here."""

    def __init__(self, version: int, size: tuple[int, int], jpeg: bytes, jpeg_size: tuple[int, int]):
        self.version = version
        self.size = size  # the phone's, for touch coordinates
        self.jpeg_size = jpeg_size
        self._jpeg = jpeg

    def output_size(self, box: tuple[int, int]) -> tuple[int, int]:
        return self.jpeg_size

    def jpeg(self, box: tuple[int, int]) -> tuple[bytes, tuple[int, int]]:
        return self._jpeg, self.jpeg_size


def jpeg_size(data: bytes) -> tuple[int, int]:
    """Width and height from a JPEG's start-of-frame marker; ValueError unless `data` is one whole
    JPEG (SOI first, EOI last), so a truncated or garbled frame is never relayed."""
    if len(data) < 4 or data[:2] != b"\xff\xd8" or data[-2:] != b"\xff\xd9":
        raise ValueError("not a whole JPEG")
    index = 2
    while index + 9 < len(data):
        if data[index] != 0xFF:
            raise ValueError("garbled JPEG marker")
        marker = data[index + 1]
        if marker == 0xFF:  # fill byte
            index += 1
            continue
        length = struct.unpack_from(">H", data, index + 2)[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack_from(">HH", data, index + 5)
            if not width or not height:
                raise ValueError("JPEG without a size")
            return width, height
        index += 2 + length
    raise ValueError("JPEG without a start-of-frame marker")


@dataclass
class Frame:
    """One capture: a sequence number, when it was taken, and its (maybe shared) picture."""

    seq: int
    captured_at: float  # seconds since the epoch, taken just before the capture was requested
    picture: Picture | RelayedPicture | None
    error: str = field(default="")
    fatal: bool = False  # the feed gave up on its source: viewers move to another one


def pack(frame: Frame, jpeg: bytes, jpeg_size: tuple[int, int]) -> bytes:
    phone_w, phone_h = frame.picture.size
    return HEADER.pack(MAGIC, frame.seq, frame.captured_at * 1000, jpeg_size[0], jpeg_size[1],
                       phone_w, phone_h) + jpeg


def pack_video(seq: int, received_at: float, key_frame: bool, video_size, phone_size, data: bytes) -> bytes:
    return VIDEO_HEADER.pack(VIDEO_MAGIC, seq, received_at * 1000, VIDEO_KEY_FRAME if key_frame else 0, 0,
                             video_size[0], video_size[1], phone_size[0], phone_size[1]) + data


def unpack(message: bytes) -> tuple[dict, bytes]:
    """The header as a dict and the JPEG (or H.264) bytes (for tests and the benchmark)."""
    if message[:4] == VIDEO_MAGIC:
        magic, seq, received_ms, flags, _, width, height, phone_w, phone_h = VIDEO_HEADER.unpack_from(message)
        return ({"codec": "h264", "seq": seq, "captured_at": received_ms / 1000, "key": bool(flags & VIDEO_KEY_FRAME),
                 "width": width, "height": height, "phone_width": phone_w, "phone_height": phone_h},
                message[VIDEO_HEADER.size:])
    magic, seq, captured_ms, width, height, phone_w, phone_h = HEADER.unpack_from(message)
    if magic != MAGIC:
        raise ValueError("not a frame")
    return ({"seq": seq, "captured_at": captured_ms / 1000, "width": width, "height": height,
             "phone_width": phone_w, "phone_height": phone_h}, message[HEADER.size:])
