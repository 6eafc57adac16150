"""A frame's OCR reading is stored once and reused (re-judging runs no tesseract again)."""
import pytest
from django.core.files.storage import default_storage

from flywheel.screens import ocr


@pytest.fixture
def store(tmp_path, settings):
    """Readings are stored in tmp_path; nothing is remembered from another test."""
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path)}}}
    ocr._recent.clear()
    return tmp_path


def drawn_png(text: str, background, ink) -> bytes:
    """A 600x160 PNG showing `text` in large letters."""
    import io

    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (600, 160), background)
    ImageDraw.Draw(image).text((20, 50), text, fill=ink, font=ImageFont.load_default(size=48))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


@pytest.mark.skipif(not ocr.ocr_available(), reason="Debian's tesseract is not installed")
def test_a_reading_is_stored_beside_the_frame_and_not_read_again(store, monkeypatch):
    png = drawn_png("Order confirmed", "white", "black")
    calls = []
    real = ocr._tesseract
    monkeypatch.setattr(ocr, "_tesseract", lambda data: calls.append(1) or real(data))
    first = ocr.ocr_text(png)
    ocr._recent.clear()                  # a new process: only the stored reading remains
    second = ocr.ocr_text(png)
    assert first == second and "Order" in first and len(calls) == 1
    import hashlib

    assert default_storage.exists(ocr._stored_name(hashlib.sha256(png).hexdigest()))


@pytest.mark.skipif(not ocr.ocr_available(), reason="Debian's tesseract is not installed")
def test_a_frames_contrast_reading_is_made_once_and_stored_under_the_frame(store, monkeypatch):
    """The contrast image (a full-size decode, filter and encode) is not made again for a frame seen
    again, in this process or the next."""
    import hashlib

    from flywheel.screens import ocr_candidates

    png = drawn_png("Checkout", (30, 90, 200), "white")
    made = []
    real = ocr_candidates.contrast_frame
    monkeypatch.setattr(ocr_candidates, "contrast_frame", lambda data: made.append(1) or real(data))
    first = ocr_candidates.contrast_words(png)
    again = ocr_candidates.contrast_words(png)
    ocr._recent.clear()                      # a new process: only the stored reading remains
    stored = ocr_candidates.contrast_words(png)
    assert [w.text for w in first] == [w.text for w in again] == [w.text for w in stored]
    assert "Checkout" in [w.text for w in first] and len(made) == 1
    digest = hashlib.sha256(png).hexdigest()
    assert default_storage.exists(ocr._stored_name(digest, ocr_candidates.CONTRAST_READING))
    assert not default_storage.exists(ocr._stored_name(digest))   # the frame's own reading is apart


def test_a_reading_that_times_out_raises_and_is_not_stored(store, monkeypatch):
    import subprocess

    monkeypatch.setattr(ocr, "ocr_available", lambda: True)

    def hang(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs.get("timeout"))

    monkeypatch.setattr(ocr.subprocess, "run", hang)
    with pytest.raises(ocr.OcrFailed, match="timed out"):
        ocr.ocr_words(b"not really a png")
    assert not list(store.rglob("*.tsv"))


def test_tesseract_runs_on_one_thread(store, monkeypatch):
    """Several phones' frames are read side by side: tesseract's own OpenMP threads would spin against them."""
    import subprocess

    monkeypatch.setattr(ocr, "ocr_available", lambda: True)
    seen = []

    def run(command, **kwargs):
        seen.append(kwargs["env"])
        return subprocess.CompletedProcess(command, 0, stdout=b"level\n", stderr=b"")

    monkeypatch.setattr(ocr.subprocess, "run", run)
    assert ocr.ocr_words(b"a frame only this test reads") == []
    assert seen and seen[0]["OMP_THREAD_LIMIT"] == "1" and seen[0]["PATH"]


def test_tsv_rows_become_confident_words_with_boxes():
    tsv = ("level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n"
           "5\t1\t2\t1\t1\t1\t100\t200\t80\t30\t91.5\tSave\n"
           "5\t1\t2\t1\t1\t2\t190\t200\t60\t30\t88\tnote\n"
           "5\t1\t3\t1\t1\t1\t10\t10\t20\t20\t12\t@\n")
    words = ocr.parse_tsv(tsv)
    assert [w.text for w in words] == ["Save", "note"]
    assert words[0].center == (140, 215)
    assert [[w.text for w in line] for line in ocr.lines_of(words)] == [["Save", "note"]]
