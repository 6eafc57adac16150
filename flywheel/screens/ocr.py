"""OCR of screenshots: the words a frame shows and where, for whatever reads pixels rather than the UI
dump (the pixel-reading judge, policies on pages whose hierarchy is blind: web views, canvases).

Uses Debian's `tesseract` when installed; without it OCR is unavailable (`ocr_words` returns None).
What tesseract read (its TSV: every word with its box) is stored beside the screenshot
(`ocr/<sha256>.tsv` through Django's storage), so a frame is read once, ever: re-judging a finished
run or a calibration round does not run tesseract again. A second reading of a frame (its contrast
image, flywheel.screens.ocr_candidates) is stored under the frame's own digest and the reading's
name (`ocr/<sha256>.<variant>.tsv`): a frame seen again is neither prepared nor read again. A
reading that failed or timed out is not stored; it raises OcrFailed with the reason, so a judge
records an abstention instead of guessing.
"""
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cachetools import LRUCache
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

# Words tesseract is less sure of than this are noise on a phone screen (icons read as letters).
MIN_CONFIDENCE = 40
RECENT_READINGS = 1024   # per process, by stored name: a farm's screens recur across trajectories


class OcrFailed(Exception):
    """tesseract ran and did not give a reading (timed out, crashed, unreadable image)."""


@dataclass(frozen=True)
class OcrWord:
    text: str
    left: int
    top: int
    width: int
    height: int
    line: tuple  # (block, paragraph, line): words of one line share it

    @property
    def center(self) -> tuple[int, int]:
        return self.left + self.width // 2, self.top + self.height // 2


def ocr_available() -> bool:
    return shutil.which("tesseract") is not None


def _timeout_s() -> float:
    return float(getattr(settings, "OCR_TIMEOUT_S", 30))


def _stored_name(digest: str, variant: str = "") -> str:
    return f"ocr/{digest[:2]}/{digest}{f'.{variant}' if variant else ''}.tsv"


# One OpenMP thread per tesseract (as its documentation advises when several run at once): a worker's
# phones read frames side by side, and tesseract's own threads then spin against each other. Measured
# on 6 farm frames beside a running demo: the same TSV, 0.3–0.7 s of CPU each against 0.8–3.1 s.
TESSERACT_ENV = {"OMP_THREAD_LIMIT": "1"}


def _tesseract(png: bytes) -> str:
    """tesseract's TSV for one frame; OcrFailed when it timed out or failed."""
    with tempfile.TemporaryDirectory() as folder:
        image = Path(folder) / "screen.png"
        image.write_bytes(png)
        try:
            result = subprocess.run(["tesseract", str(image), "stdout", "--psm", "11", "tsv"],
                                    capture_output=True, timeout=_timeout_s(), env={**os.environ, **TESSERACT_ENV})
        except subprocess.TimeoutExpired:
            raise OcrFailed(f"OCR timed out after {_timeout_s():g} s") from None
    if result.returncode != 0:
        message = result.stderr.decode("utf-8", "replace").strip().splitlines() or [f"exit status {result.returncode}"]
        raise OcrFailed(f"OCR failed: {message[-1][:120]}")
    return result.stdout.decode("utf-8", "replace")


_recent = LRUCache(maxsize=RECENT_READINGS)   # stored name → TSV, read or loaded in this process
_recent_lock = threading.Lock()


def _tsv_cached(name: str, read: Callable[[], str]) -> str:
    """The stored reading `name`, or read() now and stored (a failed reading raises and is not stored)."""
    with _recent_lock:
        tsv = _recent.get(name)
    if tsv is not None:
        return tsv
    try:
        if default_storage.exists(name):
            with default_storage.open(name, "rb") as handle:
                tsv = handle.read().decode("utf-8", "replace")
    except OSError:
        tsv = None  # an unreadable stored reading: read the frame again
    if tsv is None:
        tsv = read()
        try:
            if not default_storage.exists(name):
                saved = default_storage.save(name, ContentFile(tsv.encode("utf-8")))
                if saved != name:  # a concurrent reader stored it first
                    default_storage.delete(saved)
        except OSError:
            pass
    with _recent_lock:
        _recent[name] = tsv
    return tsv


def parse_tsv(tsv: str) -> list[OcrWord]:
    """tesseract's TSV → the confident words, in reading order."""
    words = []
    for row in tsv.splitlines()[1:]:
        cells = row.split("\t")
        if len(cells) < 12 or cells[0] != "5" or not cells[11].strip():
            continue
        try:
            confidence = float(cells[10])
            left, top, width, height = (int(v) for v in cells[6:10])
        except ValueError:
            continue
        if confidence >= MIN_CONFIDENCE:
            words.append(OcrWord(cells[11].strip(), left, top, width, height,
                                 (int(cells[2]), int(cells[3]), int(cells[4]))))
    return words


def ocr_words(png: bytes | None) -> list[OcrWord] | None:
    """The words tesseract reads on a screenshot with their boxes; None when OCR is not installed or
    there is no frame. Raises OcrFailed when tesseract timed out or failed on this frame."""
    if not png or not ocr_available():
        return None
    return parse_tsv(_tsv_cached(_stored_name(hashlib.sha256(png).hexdigest()), lambda: _tesseract(png)))


def derived_ocr_words(png: bytes | None, variant: str, prepare: Callable[[bytes], bytes | None]) -> list[OcrWord] | None:
    """The words tesseract reads on prepare(png), an image made from the frame for a second reading;
    stored under the frame's digest and `variant` (which names what prepare does, its settings
    included), so prepare runs once per frame, ever. None when OCR is not installed or there is no
    frame; [] when prepare makes no image of it. Raises OcrFailed as ocr_words does."""
    if not png or not ocr_available():
        return None

    def read() -> str:
        prepared = prepare(png)
        return _tesseract(prepared) if prepared else ""

    return parse_tsv(_tsv_cached(_stored_name(hashlib.sha256(png).hexdigest(), variant), read))


def lines_of(words: list[OcrWord]) -> list[list[OcrWord]]:
    """Words grouped by the line tesseract found them on, in reading order."""
    lines: dict[tuple, list[OcrWord]] = {}
    for word in words:
        lines.setdefault(word.line, []).append(word)
    return list(lines.values())


def ocr_text(png: bytes | None) -> str | None:
    """The text tesseract reads on a screenshot, a line per line; None when OCR is not installed.
    Raises OcrFailed when tesseract timed out or failed on this frame."""
    words = ocr_words(png)
    if words is None:
        return None
    return "\n".join(" ".join(w.text for w in line) for line in lines_of(words))
