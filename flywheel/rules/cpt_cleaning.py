"""Rule-based cleaning of single-step samples for the CPT pool (§2.1.2, §2.4.3).

A step becomes a CPT sample at once, without waiting for the verdict, unless its frame is blank,
duplicates the frame of the previous sample of the same trajectory (same perceptual hash), or
its action is malformed.
"""
import io

import imagehash
import pyspng
from PIL import Image, ImageStat

from devices.actions import RESOLVED_FIELDS, ActionError, normalize_action

HASH_SIZE = 8
BLANK_STDDEV = 3.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DUPLICATE_DISTANCE = 4  # differing bits of 64 below which two frames are the same screen


def _full_gray(png: bytes) -> Image.Image:
    """The frame in grey, as Pillow's convert("L") makes it. libspng (pyspng) decodes a phone's
    1080×2400 PNG in half Pillow's time, straight into RGBA that Pillow wraps without a copy: the
    same pixels, so the same hashes (tests/flywheel/rules/test_cpt_cleaning.py). Pillow decodes what
    libspng refuses, and 16-bit PNGs (Pillow clips their grey, libspng scales it)."""
    pixels = None
    if png[:8] == PNG_SIGNATURE and len(png) > 24 and png[24] <= 8:  # IHDR's bit depth
        try:
            pixels = pyspng.load(png, format="RGBA")
        except Exception:  # pyspng raises plain Exceptions for what it cannot read
            pixels = None
    if pixels is None:
        with Image.open(io.BytesIO(png)) as image:
            return image.convert("L")
    height, width, _ = pixels.shape
    return Image.frombuffer("RGBA", (width, height), pixels, "raw", "RGBA", 0, 1).convert("L")


def _small_gray(png: bytes) -> Image.Image:
    """The frame decoded once, in grey, box-reduced to about 64 px on its short side: hashing and
    the blank test need no more, and resampling a full 1080×2400 frame dominated their cost."""
    gray = _full_gray(png)
    factor = max(1, min(gray.size) // 64)
    return gray.reduce(factor) if factor > 1 else gray


def perceptual_hash(png: bytes) -> str:
    """A 64-bit perceptual hash (imagehash's DCT pHash) as 16 hex digits: robust to re-encoding,
    equal for the same screen."""
    return str(imagehash.phash(_small_gray(png), hash_size=HASH_SIZE))


def hash_distance(a: str, b: str) -> int:
    """Differing bits of two hashes written by perceptual_hash."""
    return imagehash.hex_to_hash(a) - imagehash.hex_to_hash(b)


def _flat(image: Image.Image) -> bool:
    return ImageStat.Stat(image).stddev[0] < BLANK_STDDEV


def is_blank(png: bytes) -> bool:
    """A frame of one flat colour (black screen, white flash) teaches nothing."""
    return _flat(_small_gray(png))


def frame_facts(png: bytes) -> tuple[str, bool]:
    """(perceptual hash, blank?) of a frame: all the image work of the cleaning, one decode.
    Raises OSError when the bytes are no image."""
    small = _small_gray(png)
    return str(imagehash.phash(small, hash_size=HASH_SIZE)), _flat(small)


def cpt_rejection(png: bytes | None, action: dict | None, screen_size: tuple[int, int],
                  previous_hash: str = "", facts=frame_facts) -> tuple[str, str]:
    """(reason it is rejected or '', its perceptual hash). `facts` gives frame_facts(png): a
    caller that knows the frame by the hash of its bytes may give ones it computed before."""
    if not png:
        return "no screenshot", ""
    if not action or action.get("action") in (None, "wait"):
        return "no screen action to learn", ""
    checked = {k: v for k, v in action.items() if k not in RESOLVED_FIELDS}
    if checked.get("action") == "swipe" and checked.get("start") is not None:
        checked.pop("direction", None)  # an executed directional swipe: the executor resolved its ends
    try:
        normalize_action(checked, *screen_size)
    except ActionError as error:
        return f"malformed action: {error}", ""
    try:
        phash, blank = facts(png)
    except OSError:
        return "unreadable screenshot", ""
    if blank:
        return "blank frame", phash
    if previous_hash and hash_distance(phash, previous_hash) <= DUPLICATE_DISTANCE:
        return "duplicate of the previous frame", phash
    return "", phash
