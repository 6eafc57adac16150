"""OCR of screenshots, for milestones whose text the UI hierarchy lacks (web views, canvases).

Uses Debian's `tesseract` when installed; without it OCR is simply unavailable (None), and
System B judges from the hierarchy alone. What tesseract read is stored beside the screenshot
(`ocr/<sha256>.txt` through Django's storage), so a frame is read once, ever: re-judging a
finished benchmark run or a calibration round does not run tesseract again.
"""
import functools
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage


def ocr_available() -> bool:
    return shutil.which("tesseract") is not None


def _stored_name(digest: str) -> str:
    return f"ocr/{digest[:2]}/{digest}.txt"


@functools.lru_cache(maxsize=256)
def _ocr_cached(digest: str, png: bytes) -> str:
    name = _stored_name(digest)
    try:
        if default_storage.exists(name):
            with default_storage.open(name, "rb") as handle:
                return handle.read().decode("utf-8", "replace")
    except OSError:
        pass  # an unreadable stored reading: read the frame again
    text = _tesseract(png)
    if text is not None:
        try:
            if not default_storage.exists(name):
                saved = default_storage.save(name, ContentFile(text.encode("utf-8")))
                if saved != name:  # a concurrent reader stored it first
                    default_storage.delete(saved)
        except OSError:
            pass
    return text or ""


def _tesseract(png: bytes) -> str | None:
    """tesseract's text, or None when it failed (a failure is not stored)."""
    with tempfile.TemporaryDirectory() as folder:
        image = Path(folder) / "screen.png"
        image.write_bytes(png)
        result = subprocess.run(["tesseract", str(image), "stdout", "--psm", "11"],
                                capture_output=True, timeout=60)
    return result.stdout.decode("utf-8", "replace") if result.returncode == 0 else None


def ocr_text(png: bytes | None) -> str | None:
    """The text tesseract reads on a screenshot; None when OCR is not installed."""
    if not png or not ocr_available():
        return None
    return _ocr_cached(hashlib.sha256(png).hexdigest(), png)
