"""The attribution service passes the frames' OCR words to the rules (#33): on a page whose dump is
blind, perception drift is read on the pixels; a frame whose OCR fails is said to be missing."""
import io

import pytest
from PIL import Image, ImageDraw, ImageFont

from flywheel.blobs import store_blob
from flywheel.models import Step
from flywheel.repair import attribution as service
from flywheel.repair.attribution import attribute, trace_of
from flywheel.screens.ocr import OcrFailed
from tests.flywheel.judging.pixels import require_tesseract
from tests.flywheel.repair.test_attribution import make_trajectory
from tests.flywheel.rules.attribution_screens import FAILURE, HOME, OPEN, node, screen, window

pytestmark = pytest.mark.django_db
WEB_VIEW = screen(window(node(cls="android.webkit.WebView", bounds=(0, 0, 1080, 2400))))
# The Decision names Headphones; the tap lands on Phones (screen pixels: the frame is half size).
WRONG_TAP = ({"action": "click", "point": [200, 830]}, {"Decision": "Tap \"Headphones\" at (200, 830)"})


def half_size_frame() -> bytes:
    image = Image.new("RGB", (540, 1200), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=48)
    draw.text((40, 300), "Headphones", fill="black", font=font)
    draw.text((40, 400), "Phones", fill="black", font=font)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def blind_run():
    trajectory = make_trajectory([(HOME, OPEN), (WEB_VIEW, WRONG_TAP), (WEB_VIEW, FAILURE)])
    Step.objects.filter(trajectory=trajectory, index=1).update(
        screenshot=store_blob(half_size_frame(), "png"), timings={"screen": [1080, 2400]})
    return trajectory


def test_on_a_blind_page_the_slip_is_read_on_the_pixels():
    require_tesseract()
    trajectory = blind_run()
    trace, _missing = trace_of(trajectory)
    tapped = trace.steps[1]
    assert tapped.blind and not trace.steps[0].blind
    boxes = {w.text: w.bounds for w in tapped.words}
    assert 560 < boxes["Headphones"][1] < 640 and 760 < boxes["Phones"][1] < 840  # scaled to the screen
    assert trace.steps[2].words is None  # no tap: its frame is not read
    attribution = attribute(trajectory)
    assert (attribution.cause, attribution.first_bad_step) == ("perception_drift", 1)
    level3 = attribution.evidence[-1]["detail"]
    assert level3.startswith('element confusion (read on screen): the [Decision] named "Headphones"')
    assert 'landed near "Phones"' in level3


def test_an_ocr_that_fails_is_noted_and_nothing_is_read_from_that_frame(monkeypatch):
    def timed_out(png):
        raise OcrFailed("OCR timed out after 30 s")

    monkeypatch.setattr(service, "ocr_words", timed_out)
    trace, missing = trace_of(blind_run())
    assert trace.steps[1].words is None and "step 1: OCR timed out after 30 s" in missing
