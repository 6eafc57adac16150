"""OCR of screenshots, for milestones whose text the UI hierarchy lacks (web views, canvases).

Uses Debian's `tesseract` when installed; without it OCR is simply unavailable (None), and
System B judges from the hierarchy alone.
"""
import functools
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path


def ocr_available() -> bool:
    return shutil.which("tesseract") is not None


@functools.lru_cache(maxsize=256)
def _ocr_cached(digest: str, png: bytes) -> str:
    with tempfile.TemporaryDirectory() as folder:
        image = Path(folder) / "screen.png"
        image.write_bytes(png)
        result = subprocess.run(["tesseract", str(image), "stdout", "--psm", "11"],
                                capture_output=True, timeout=60)
    return result.stdout.decode("utf-8", "replace") if result.returncode == 0 else ""


def ocr_text(png: bytes | None) -> str | None:
    """The text tesseract reads on a screenshot; None when OCR is not installed."""
    if not png or not ocr_available():
        return None
    return _ocr_cached(hashlib.sha256(png).hexdigest(), png)
