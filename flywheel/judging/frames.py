"""The pixels of a trajectory, as System C reads them (§2.4.2: a stack apart from the UI dump): the
screenshots of view.screens() index for index, their OCR words, and whether one frame differs from
another (downscaled grayscale difference, the status bar left out so the clock does not count).

A frame that cannot be read (none stored, missing from the blob store, undecodable, OCR failed or
timed out, tesseract not installed) raises FrameUnreadable with the reason: the judge abstains
rather than guess.
"""
import io
import re

from PIL import Image, ImageChops, UnidentifiedImageError

from flywheel.judging.trajectory_view import TrajectoryView
from flywheel.screens.ocr import OcrFailed, OcrWord, ocr_words

STATUS_BAR_SHARE = 0.04   # the top band (clock, battery, notification icons) changes on its own
THUMB_SCALE = 0.5         # half size still shows one digit changing (a quantity 1 → 2)
PIXEL_DELTA = 32          # grey levels a pixel must move to count as changed (compression noise)
CHANGED_PIXELS = 48       # fewer changed pixels than this (in the thumbnail) is the same frame


class FrameUnreadable(Exception):
    """A frame the pixel path needs cannot be read; str() is the reason."""


def tokens(text: str) -> list[str]:
    """Lower-case words with their punctuation dropped ("Don't" → "dont"), as OCR and specs compare."""
    words = (re.sub(r"[^0-9a-z]", "", w) for w in text.lower().replace("’", "'").split())
    return [w for w in words if w]


def contains_sequence(haystack: list[str], needle: list[str]) -> bool:
    if not needle:
        return False
    size = len(needle)
    return any(haystack[i:i + size] == needle for i in range(len(haystack) - size + 1))


class Frames:
    """A trajectory's frames, each read (and OCR'd) at most once."""

    def __init__(self, view: TrajectoryView):
        self.view = view
        self.loaders = view.screenshot_loaders()
        self._png, self._words, self._thumb = {}, {}, {}

    def __len__(self):
        return len(self.loaders)

    def label(self, i: int) -> str:
        if i < len(self.view.steps):
            return f"step {self.view.steps[i].index}'s frame"
        return "the final frame"

    def png(self, i: int) -> bytes:
        if i not in self._png:
            loader = self.loaders[i] if 0 <= i < len(self.loaders) else None
            if loader is None:
                raise FrameUnreadable(f"no screenshot was stored for {self.label(i)}")
            try:
                data = loader()
            except OSError as error:
                raise FrameUnreadable(f"{self.label(i)} is missing from the store ({error})") from None
            if not data:
                raise FrameUnreadable(f"{self.label(i)} is empty")
            self._png[i] = data
        return self._png[i]

    def words(self, i: int) -> list[OcrWord]:
        if i not in self._words:
            try:
                found = ocr_words(self.png(i))
            except OcrFailed as error:
                raise FrameUnreadable(f"OCR of {self.label(i)} failed: {error}") from None
            if found is None:
                raise FrameUnreadable("tesseract is not installed: the pixels cannot be read")
            self._words[i] = found
        return self._words[i]

    def tokens(self, i: int) -> list[str]:
        """The frame's words in reading order, as tokens()."""
        return tokens(" ".join(w.text for w in self.words(i)))

    def shows(self, i: int, text: str) -> bool:
        """The words of `text` appear on the frame, in order and next to each other."""
        return contains_sequence(self.tokens(i), tokens(text))

    def _thumbnail(self, i: int):
        if i not in self._thumb:
            try:
                image = Image.open(io.BytesIO(self.png(i))).convert("L")
            except (UnidentifiedImageError, OSError, ValueError):
                raise FrameUnreadable(f"{self.label(i)} is not a readable image") from None
            width, height = image.size
            band = int(height * STATUS_BAR_SHARE)
            body = image.crop((0, band, width, height))
            size = (max(1, round(width * THUMB_SCALE)), max(1, round((height - band) * THUMB_SCALE)))
            self._thumb[i] = body.resize(size, Image.BILINEAR)
        return self._thumb[i]

    def unchanged(self, i: int, j: int) -> bool:
        """Frames i and j show the same screen (below the status bar)."""
        if i == j or self.png(i) == self.png(j):
            return True
        a, b = self._thumbnail(i), self._thumbnail(j)
        if a.size != b.size:
            return False
        moved = ImageChops.difference(a, b).point(lambda v: 255 if v > PIXEL_DELTA else 0)
        return moved.histogram()[255] < CHANGED_PIXELS
