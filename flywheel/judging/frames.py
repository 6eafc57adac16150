"""The pixels of a trajectory, as System C reads them (§2.4.2: a stack apart from the UI dump): the
screenshots of view.screens() index for index, their OCR words, and whether one frame differs from
another (downscaled grayscale difference, the status bar left out so the clock does not count).

A frame that cannot be read (none stored, missing from the blob store, undecodable, OCR failed or
timed out, tesseract not installed) raises FrameUnreadable with the reason: the judge abstains
rather than guess.
"""
import hashlib
import io
import re
import threading

from cachetools import LRUCache
from PIL import Image, ImageChops, UnidentifiedImageError

from flywheel.judging.trajectory_view import TrajectoryView
from flywheel.screens.ocr import OcrFailed, OcrWord, ocr_words
from flywheel.screens.ocr_candidates import contrast_words, png_size

STATUS_BAR_SHARE = 0.04   # the top band (clock, battery, notification icons) changes on its own
THUMB_SCALE = 0.5         # half size still shows one digit changing (a quantity 1 → 2)
PIXEL_DELTA = 32          # grey levels a pixel must move to count as changed (compression noise)
CHANGED_PIXELS = 48       # fewer changed pixels than this (in the thumbnail) is the same frame
COVERED_MIN_WORDS = 4     # a text this long may be matched by most of its words
HORIZONTAL_WEIGHT = 0.25  # words_at: how much a horizontal offset counts against a vertical one
SAME_TARGET_PX = 25       # words_at: words this much farther than the nearest belong to the same target
COVERED_SHARE = 0.8
MERGED_MIN_CHARS = 6      # words run together are matched when they make at least this many letters
KNOWN_PAIRS = 4096        # per process: whether two frames (by digest) show the same screen


class FrameUnreadable(Exception):
    """A frame the pixel path needs cannot be read; str() is the reason."""


def tokens(text: str) -> list[str]:
    """Lower-case words with their punctuation dropped ("Don't" → "dont"), as OCR and specs compare."""
    words = (re.sub(r"[^0-9a-z]", "", w) for w in text.lower().replace("’", "'").split())
    return [w for w in words if w]


def covers(haystack: list[str], needle: list[str]) -> bool:
    """The needle's words are on the frame: next to each other in order, or — for a longer text, which
    OCR rarely reads whole (prices, links, punctuation) — at least COVERED_SHARE of its words."""
    if contains_sequence(haystack, needle):
        return True
    joined = "".join(needle)
    if len(joined) >= MERGED_MIN_CHARS and joined in "".join(haystack):
        return True   # OCR ran the words together ("New note" read as "Newnote")
    if len(needle) < COVERED_MIN_WORDS:
        return False
    present = set(haystack)
    return sum(1 for word in needle if word in present) >= COVERED_SHARE * len(needle)


# unchanged()'s answers by the two frames' digests: a screen recurs across steps and trajectories, and
# each answer costs two full-size decodes.
_same_screen = LRUCache(maxsize=KNOWN_PAIRS)
_same_screen_lock = threading.Lock()


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
        self._png, self._words, self._thumb, self._contrast, self._size, self._digest = {}, {}, {}, {}, {}, {}

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

    def contrast_words(self, i: int) -> list[OcrWord]:
        """The words a second reading finds where light words sit on coloured buttons (tesseract reads
        dark on light): each pixel against its neighbourhood (ocr_candidates.contrast_words)."""
        if i not in self._contrast:
            try:
                found = contrast_words(self.png(i))
            except OcrFailed as error:
                raise FrameUnreadable(f"OCR of {self.label(i)} failed: {error}") from None
            self._contrast[i] = found or []
        return self._contrast[i]

    def contrast_tokens(self, i: int) -> list[str]:
        return tokens(" ".join(w.text for w in self.contrast_words(i)))

    def size(self, i: int) -> tuple[int, int]:
        """(width, height): from a PNG's header, else from the decoded frame."""
        if i not in self._size:
            header = png_size(self.png(i))
            if header is None:
                self._thumbnail(i)   # decodes the frame and notes its size (or raises FrameUnreadable)
            else:
                self._size[i] = header
        return self._size[i]

    def digest(self, i: int) -> str:
        if i not in self._digest:
            self._digest[i] = hashlib.sha256(self.png(i)).hexdigest()
        return self._digest[i]

    def shows(self, i: int, text: str) -> bool:
        """The words of `text` appear on the frame (covers()); the second reading only when the first
        does not find them."""
        needle = tokens(text)
        return covers(self.tokens(i), needle) or covers(self.tokens(i) + self.contrast_tokens(i), needle)

    def lines(self, i: int) -> list[list[str]]:
        """The frame's lines of words (both readings), as tokens()."""
        found = []
        for words in (self.words(i), self.contrast_words(i)):
            by_line = {}
            for word in words:
                by_line.setdefault(word.line, []).append(word.text)
            found += [tokens(" ".join(texts)) for texts in by_line.values()]
        return [line for line in found if line]

    def lines_at(self, i: int, point: tuple[int, int]) -> list[list[str]]:
        """The lines of words (both readings) a touch at `point` landed on: those of the nearest words,
        the vertical distance counting most (a row is touched anywhere along it, its title at its left)."""
        x, y = point

        def distance(w):
            dx = max(w.left - x, 0, x - (w.left + w.width))
            dy = max(w.top - y, 0, y - (w.top + w.height))
            return dy + HORIZONTAL_WEIGHT * dx
        readings = [self.words(i), self.contrast_words(i)]
        if not any(readings):
            return []
        nearest = min(distance(w) for words in readings for w in words)
        landed = []
        for words in readings:   # the whole line of every word the touch landed on ("Add to cart")
            lines = {w.line for w in words if distance(w) <= nearest + SAME_TARGET_PX}
            landed += [tokens(" ".join(w.text for w in words if w.line == line)) for line in lines]
        return [line for line in landed if line]

    def _thumbnail(self, i: int):
        if i not in self._thumb:
            try:
                image = Image.open(io.BytesIO(self.png(i))).convert("L")
            except (UnidentifiedImageError, OSError, ValueError):
                raise FrameUnreadable(f"{self.label(i)} is not a readable image") from None
            width, height = image.size
            self._size[i] = (width, height)
            band = int(height * STATUS_BAR_SHARE)
            body = image.crop((0, band, width, height))
            size = (max(1, round(width * THUMB_SCALE)), max(1, round((height - band) * THUMB_SCALE)))
            self._thumb[i] = body.resize(size, Image.BILINEAR)
        return self._thumb[i]

    def unchanged(self, i: int, j: int) -> bool:
        """Frames i and j show the same screen (below the status bar)."""
        if i == j or self.png(i) == self.png(j):
            return True
        key = tuple(sorted((self.digest(i), self.digest(j))))
        with _same_screen_lock:
            known = _same_screen.get(key)
        if known is None:
            a, b = self._thumbnail(i), self._thumbnail(j)
            if a.size != b.size:
                known = False
            else:
                moved = ImageChops.difference(a, b).point(lambda v: 255 if v > PIXEL_DELTA else 0)
                known = moved.histogram()[255] < CHANGED_PIXELS
            with _same_screen_lock:
                _same_screen[key] = known
        return known
