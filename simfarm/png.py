"""A PNG encoder that re-compresses only the horizontal bands of a screen that changed.

Screens change locally (a typed character, a toggled switch) while status bar, keyboard and most
rows stay put, so each band of rows is compressed once and reused whenever the same pixels come
back (in any later frame or on any phone of the same width). A band is Sub-filtered and deflated
on its own (raw deflate, Z_RLE, ending with a full flush so bands can be concatenated); the zlib
checksum of the whole image is combined from the bands' checksums. Pillow decodes the result
exactly (tests compare pixels).
"""
import struct
import threading
import zlib
from collections import OrderedDict

from PIL import Image, ImageChops

BAND_ROWS = 32
CACHE_BANDS = 8192
_ADLER_BASE = 65521
_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def adler32_combine(adler1: int, adler2: int, length2: int) -> int:
    """zlib's adler32_combine (not exposed by Python's zlib module)."""
    remainder = length2 % _ADLER_BASE
    sum1 = adler1 & 0xFFFF
    sum2 = (remainder * sum1) % _ADLER_BASE
    sum1 += (adler2 & 0xFFFF) + _ADLER_BASE - 1
    sum2 += ((adler1 >> 16) & 0xFFFF) + ((adler2 >> 16) & 0xFFFF) + _ADLER_BASE - remainder
    sum1 %= _ADLER_BASE
    sum2 %= _ADLER_BASE
    return sum1 | (sum2 << 16)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _compress_band(band: Image.Image):
    """(deflate blocks, adler32, length) of one band's PNG scanlines, each with filter type 1 (Sub)."""
    width, rows = band.size
    filtered = ImageChops.subtract_modulo(band, ImageChops.offset(band, 1, 0))
    filtered.paste(band.crop((0, 0, 1, rows)), (0, 0))  # the first pixel of a row has no left neighbour
    framed = Image.new("L", (width * 3 + 1, rows), 1)    # column 0 = the filter byte of each scanline
    framed.paste(Image.frombytes("L", (width * 3, rows), filtered.tobytes()), (1, 0))
    data = framed.tobytes()
    compressor = zlib.compressobj(1, zlib.DEFLATED, -15, 9, zlib.Z_RLE)
    return compressor.compress(data) + compressor.flush(zlib.Z_FULL_FLUSH), zlib.adler32(data), len(data)


class BandEncoder:
    def __init__(self, band_rows: int = BAND_ROWS, cache_bands: int = CACHE_BANDS):
        self.band_rows = band_rows
        self.cache_bands = cache_bands
        self._cache: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.reused = self.compressed = 0

    def encode(self, image: Image.Image) -> bytes:
        if image.mode != "RGB":
            image = image.convert("RGB")
        width, height = image.size
        raw = image.tobytes()
        stride = width * 3
        parts, adler = [], 1
        for top in range(0, height, self.band_rows):
            rows = min(self.band_rows, height - top)
            pixels = raw[top * stride:(top + rows) * stride]
            key = (width, rows, zlib.crc32(pixels), zlib.adler32(pixels))
            with self._lock:
                entry = self._cache.get(key)
                if entry is not None:
                    self._cache.move_to_end(key)
                    self.reused += 1
            if entry is None:
                entry = _compress_band(image.crop((0, top, width, top + rows)))
                with self._lock:
                    self.compressed += 1
                    self._cache[key] = entry
                    if len(self._cache) > self.cache_bands:
                        self._cache.popitem(last=False)
            blocks, band_adler, length = entry
            parts.append(blocks)
            adler = adler32_combine(adler, band_adler, length)
        stream = b"\x78\x01" + b"".join(parts) + b"\x03\x00" + struct.pack(">I", adler)  # header, bands, final empty block
        header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
        return _SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", stream) + _chunk(b"IEND", b"")


ENCODER = BandEncoder()  # shared by all phones of the process: equal bands compress once
