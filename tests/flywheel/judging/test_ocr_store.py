"""A frame's OCR reading is stored once and reused (re-judging runs no tesseract again)."""
import pytest
from django.core.files.storage import default_storage

from flywheel.judging import ocr


@pytest.mark.skipif(not ocr.ocr_available(), reason="Debian's tesseract is not installed")
def test_a_reading_is_stored_beside_the_frame_and_not_read_again(tmp_path, settings, monkeypatch):
    from PIL import Image, ImageDraw

    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path)}}}
    image = Image.new("RGB", (600, 160), "white")
    ImageDraw.Draw(image).text((20, 60), "Order confirmed", fill="black")
    path = tmp_path / "frame.png"
    image.save(path)
    png = path.read_bytes()
    calls = []
    real = ocr._tesseract
    monkeypatch.setattr(ocr, "_tesseract", lambda data: calls.append(1) or real(data))
    ocr._ocr_cached.cache_clear()
    first = ocr.ocr_text(png)
    ocr._ocr_cached.cache_clear()                  # a new process: only the stored reading remains
    second = ocr.ocr_text(png)
    assert first == second and len(calls) == 1
    import hashlib

    assert default_storage.exists(ocr._stored_name(hashlib.sha256(png).hexdigest()))
