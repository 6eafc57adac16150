"""Rule-based cleaning of single-step samples for the CPT pool (§2.1.2, §2.4.3).

A step becomes a CPT sample at once, without waiting for the verdict, unless its frame is blank,
duplicates the frame of the previous sample of the same trajectory (same perceptual hash), or
its action is malformed.
"""
import io

from PIL import Image, ImageStat

from devices.actions import RESOLVED_FIELDS, ActionError, normalize_action

HASH_SIZE = 8
BLANK_STDDEV = 3.0
DUPLICATE_DISTANCE = 4  # differing bits of 64 below which two frames are the same screen


def perceptual_hash(png: bytes) -> str:
    """A 64-bit difference hash (dHash): robust to re-encoding, equal for the same screen."""
    image = Image.open(io.BytesIO(png)).convert("L").resize((HASH_SIZE + 1, HASH_SIZE), Image.BILINEAR)
    pixels = list(image.getdata())
    bits = 0
    for row in range(HASH_SIZE):
        for col in range(HASH_SIZE):
            left, right = pixels[row * (HASH_SIZE + 1) + col], pixels[row * (HASH_SIZE + 1) + col + 1]
            bits = (bits << 1) | (left > right)
    return f"{bits:016x}"


def hash_distance(a: str, b: str) -> int:
    return bin(int(a, 16) ^ int(b, 16)).count("1")


def is_blank(png: bytes) -> bool:
    """A frame of one flat colour (black screen, white flash) teaches nothing."""
    image = Image.open(io.BytesIO(png)).convert("L")
    image.thumbnail((64, 64))
    return ImageStat.Stat(image).stddev[0] < BLANK_STDDEV


def cpt_rejection(png: bytes | None, action: dict | None, screen_size: tuple[int, int],
                  previous_hash: str = "") -> tuple[str, str]:
    """(reason it is rejected or '', its perceptual hash)."""
    if not png:
        return "no screenshot", ""
    if not action or action.get("action") in (None, "wait"):
        return "no screen action to learn", ""
    try:
        normalize_action({k: v for k, v in action.items() if k not in RESOLVED_FIELDS}, *screen_size)
    except ActionError as error:
        return f"malformed action: {error}", ""
    try:
        phash = perceptual_hash(png)
        if is_blank(png):
            return "blank frame", phash
    except OSError:
        return "unreadable screenshot", ""
    if previous_hash and hash_distance(phash, previous_hash) <= DUPLICATE_DISTANCE:
        return "duplicate of the previous frame", phash
    return "", phash
