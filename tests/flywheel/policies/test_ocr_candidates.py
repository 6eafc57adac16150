"""Candidates read from pixels on pages whose UI dump is blind (issue #33): the shared conversion of
OCR lines into synthetic nodes, and the offline and compact policies acting on them by point."""
import io
import json
import os
import shutil

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from devices.actions import normalize_action
from devices.audit import AuditRule, audit
from devices.uitree import UiNode
from flywheel.policies import OfflinePolicy, PolicyState
from flywheel.policies.compact import FORMAT, CompactPolicy
from flywheel.policies.compact_features import SCALARS, featurize
from flywheel.screens import ocr_candidates
from flywheel.screens.ocr import OcrFailed, OcrWord
from flywheel.screens.ocr_candidates import (
    OCR_CLASS,
    PixelOutcome,
    contrast_frame,
    is_ocr_node,
    ocr_nodes,
    pixel_candidates,
    png_size,
)

SCREEN = (1080, 2400)
APP = "com.sim.shop"
CHECKOUT_BOX = (340, 2000, 740, 2120)
# A web view: one opaque node, the page's words exist only in pixels.
BLIND = ('<hierarchy rotation="0"><node text="" resource-id="" class="android.widget.FrameLayout" '
         f'package="{APP}" content-desc="" clickable="false" enabled="true" bounds="[0,0][1080,2400]">'
         '<node text="" resource-id="" class="android.webkit.WebView" package="' + APP + '" content-desc="" '
         'clickable="false" scrollable="false" enabled="true" bounds="[0,100][1080,2400]" /></node></hierarchy>')
READABLE = BLIND.replace('class="android.webkit.WebView" package="' + APP + '" content-desc=""',
                         'class="android.widget.Button" package="' + APP + '" content-desc="Checkout"')


def needs_tesseract():
    if not shutil.which("tesseract"):
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but Debian's tesseract-ocr is not installed")
        pytest.skip("tesseract is not installed (apt-get install tesseract-ocr)")


def shop_page(size=SCREEN) -> bytes:
    """A checkout web page as pixels: a status bar, a title, a row, a plain "Back" link and a
    "Checkout" button in white on the accent colour (what tesseract alone does not read)."""
    image = Image.new("RGB", SCREEN, "white")
    draw, font = ImageDraw.Draw(image), ImageFont.load_default(size=48)
    draw.rectangle((0, 0, 1080, 100), fill=(30, 30, 30))
    draw.text((40, 25), "12:30", fill="white", font=font)
    draw.text((60, 300), "Your cart", fill="black", font=font)
    draw.text((60, 420), "Blue mug", fill="black", font=font)
    draw.text((60, 2035), "Back", fill="black", font=font)
    draw.rounded_rectangle(CHECKOUT_BOX, radius=60, fill=(26, 115, 232))
    draw.text((430, 2035), "Checkout", fill="white", font=font)
    buffer = io.BytesIO()
    image.resize(size).save(buffer, "PNG")
    return buffer.getvalue()


def word(text, left, top, width=100, height=40, line=(1, 1, 1)):
    return OcrWord(text, left, top, width, height, line)


def inside(point, box):
    return box[0] <= point[0] < box[2] and box[1] <= point[1] < box[3]


# -- the shared conversion -------------------------------------------------------------------------

def test_words_on_a_line_merge_and_far_apart_words_split_into_two_controls():
    words = [word("Open", 100, 500), word("settings", 210, 500, 160),           # one label
             word("Cancel", 100, 900, line=(2, 1, 1)), word("Checkout", 700, 900, 180, line=(2, 1, 1))]
    nodes = ocr_nodes(words, SCREEN)
    assert [(n.text, n.bounds) for n in nodes] == [("Open settings", (100, 500, 370, 540)),
                                                   ("Cancel", (100, 900, 200, 940)),
                                                   ("Checkout", (700, 900, 880, 940))]
    assert all(n.clickable and n.enabled and is_ocr_node(n) and n.cls == OCR_CLASS for n in nodes)


def test_the_status_bar_band_and_noise_are_dropped():
    words = [word("12:30", 40, 30, line=(1, 1, 1)),             # the clock, in the status bar
             word("|", 500, 600, 10, line=(2, 1, 1)),           # an icon read as a letter
             word("ok", 500, 800, 60, 8, line=(3, 1, 1)),       # a speck: too low to be a label
             word("OK", 500, 1000, 60, line=(4, 1, 1))]
    assert [n.text for n in ocr_nodes(words, SCREEN)] == ["OK"]
    assert [n.text for n in ocr_nodes(words, SCREEN, status_bar=0)] == ["12:30", "OK"]


def test_boxes_are_scaled_from_the_frame_to_the_screen():
    node, = ocr_nodes([word("Checkout", 200, 500, 100, 30)], SCREEN, frame=(540, 1200), package=APP)
    assert node.bounds == (400, 1000, 600, 1060) and node.center == (500, 1030) and node.package == APP
    assert png_size(shop_page(size=(540, 1200))) == (540, 1200) and png_size(b"not a png") is None


def test_only_a_blind_dump_is_read_and_each_reason_for_no_candidates_is_said(monkeypatch):
    def never(png):
        raise AssertionError("a readable dump is not OCR'd")

    monkeypatch.setattr(ocr_candidates, "read_words", never)
    readable = pixel_candidates(READABLE, shop_page(), SCREEN)
    assert readable.outcome == PixelOutcome.READABLE and not readable.blind and readable.why_none() == ""
    no_frame = pixel_candidates(BLIND, None, SCREEN)
    assert no_frame.outcome == PixelOutcome.NO_FRAME and "no screenshot" in no_frame.why_none()

    monkeypatch.setattr(ocr_candidates, "read_words", lambda png: None)   # tesseract not installed
    missing = pixel_candidates(BLIND, shop_page(), SCREEN)
    assert (missing.outcome, missing.nodes) == (PixelOutcome.OCR_MISSING, [])
    assert "not installed" in missing.why_none()

    def fails(png):
        raise OcrFailed("OCR timed out after 30 s")

    monkeypatch.setattr(ocr_candidates, "read_words", fails)
    failed = pixel_candidates(BLIND, shop_page(), SCREEN)
    assert failed.outcome == PixelOutcome.OCR_FAILED and failed.detail == "OCR timed out after 30 s"
    assert "timed out" in failed.why_none()


def test_the_contrast_frame_turns_light_words_on_a_fill_into_dark_ink_on_white():
    ink = np.asarray(Image.open(io.BytesIO(contrast_frame(shop_page()))))
    x1, y1, x2, y2 = CHECKOUT_BOX
    button = ink[y1 + 30:y2 - 30, x1 + 80:x2 - 80]
    assert (button == 255).mean() > 0.6 and (button == 0).any()   # the fill white, the letters black
    assert (ink[1200:1300, :] == 255).all()                       # an empty stretch of page stays white
    assert contrast_frame(b"not an image") is None


def test_the_real_frame_is_read_into_candidates():
    needs_tesseract()
    found = pixel_candidates(BLIND, shop_page(), SCREEN)
    assert found.outcome == PixelOutcome.READ
    texts = {n.text: n for n in found.nodes}
    assert {"Your cart", "Blue mug", "Back", "Checkout"} <= set(texts) and "12:30" not in texts
    assert inside(texts["Checkout"].center, CHECKOUT_BOX) and texts["Checkout"].package == APP


def test_words_the_dump_shows_stay_real_nodes_and_only_the_rest_is_read_from_pixels():
    needs_tesseract()
    title = ('<node text="Your cart" resource-id="" class="android.widget.TextView" package="' + APP + '" '
             'content-desc="" clickable="false" enabled="true" bounds="[0,280][1080,370]" />')
    toolbar_and_web_view = BLIND.replace('<node text="" resource-id="" class="android.webkit.WebView"',
                                         title + '<node text="" resource-id="" class="android.webkit.WebView"')
    found = pixel_candidates(toolbar_and_web_view, shop_page(), SCREEN)
    assert found.outcome == PixelOutcome.READ
    assert "Checkout" in {n.text for n in found.nodes} and "Your cart" not in {n.text for n in found.nodes}


# -- the offline policy ----------------------------------------------------------------------------

def blind_state(goal="Open Checkout", png=None) -> PolicyState:
    return PolicyState(goal=goal, history=[], screenshots=[png if png is not None else shop_page()],
                       hierarchy_xml=BLIND, screen_size=SCREEN, foreground={"package": APP}, apps=[APP])


def test_the_offline_policy_taps_a_button_that_exists_only_in_pixels():
    needs_tesseract()
    proposal = OfflinePolicy().propose(blind_state())
    action = proposal.action
    assert action["action"] == "click" and action["coords"] == "pixel" and inside(action["point"], CHECKOUT_BOX)
    assert "Checkout" in proposal.cot["Decision"] and "read from the screenshot" in proposal.cot["Observation"]
    # The product's validation takes it as is: a point tap, nothing to resolve.
    assert normalize_action(action, *SCREEN) == {"action": "click", "point": action["point"], "coords": "pixel"}


def test_on_a_blind_page_the_audit_sees_the_web_view_not_the_words():
    """What the safety audit does with a point tap on a blind page: the element hit is the opaque
    web view (nothing but its class and bounds), and the page text is empty, so an element or page
    pattern naming words shown only in pixels cannot match there."""
    needs_tesseract()
    action = OfflinePolicy().propose(blind_state()).action
    rule = AuditRule(name="checkout", category="payment", reason="no paying", element_patterns=["Checkout"])
    decision = audit(normalize_action(action, *SCREEN), BLIND, [rule])
    assert decision.allowed and decision.element["class"] == "android.webkit.WebView"
    assert decision.element["text"] == ""
    readable = audit({"action": "click", "point": [540, 1200], "coords": "pixel"}, READABLE, [rule])
    assert readable.blocked  # the same rule on the same button when the dump can read it


def test_when_ocr_fails_on_a_blind_page_the_offline_policy_stops_and_says_why(monkeypatch):
    def fails(png):
        raise OcrFailed("OCR timed out after 30 s")

    monkeypatch.setattr(ocr_candidates, "read_words", fails)
    proposal = OfflinePolicy().propose(blind_state())
    assert proposal.action["action"] == "terminate" and proposal.action["status"] == "failure"
    assert "OCR failed (OCR timed out after 30 s)" in proposal.action["answer"]
    assert "OCR failed" in proposal.cot["Observation"]


# -- the compact policy ----------------------------------------------------------------------------

@pytest.fixture
def word_match_head(tmp_path):
    """A compact head made by hand, not trained: it scores a candidate by two of the text features
    (the share of its words in the goal, its label inside the goal), so it ranks by what it reads."""
    w1 = np.zeros((SCALARS, 1), dtype=np.float32)
    w1[2, 0] = w1[4, 0] = 1.0
    np.savez(tmp_path / "weights.npz", mean=np.zeros(SCALARS), std=np.ones(SCALARS), w1=w1, b1=np.zeros(1),
             w2=np.ones((1, 1)), b2=np.zeros(1))
    (tmp_path / "config.json").write_text(json.dumps({"format": FORMAT, "features": SCALARS, "hidden": 1}))
    return str(tmp_path)


def test_an_ocr_candidate_has_the_features_of_a_real_node_with_the_same_words():
    box = "[{},{}][{},{}]".format(*CHECKOUT_BOX)
    real = BLIND.replace('<node text="" resource-id="" class="android.webkit.WebView"',
                         f'<node text="Checkout" resource-id="" class="android.widget.Button" clickable="true" '
                         f'bounds="{box}" package="{APP}" /><node text="" resource-id="" '
                         f'class="android.webkit.WebView"')
    synthetic = UiNode(text="Checkout", cls=OCR_CLASS, package=APP, bounds=CHECKOUT_BOX, clickable=True)
    args = ("Open Checkout", "", SCREEN, [APP], APP)
    real_found, real_rows = featurize(args[0], args[1], real, *args[2:])
    ocr_found, ocr_rows = featurize(args[0], args[1], BLIND, *args[2:], extra_nodes=[synthetic])
    real_index = next(i for i, c in enumerate(real_found) if c.label == "Checkout")
    ocr_index = next(i for i, c in enumerate(ocr_found) if c.label == "Checkout")
    assert ocr_found[ocr_index].action == real_found[real_index].action
    assert np.allclose(ocr_rows[ocr_index], real_rows[real_index])
    assert not any(c.kind == "tap" for c in featurize(*args[:2], BLIND, *args[2:])[0])  # blind: no taps


def test_the_compact_policy_taps_a_button_that_exists_only_in_pixels(word_match_head):
    needs_tesseract()
    proposal = CompactPolicy(word_match_head).propose(blind_state())
    action = normalize_action(proposal.action, *SCREEN)  # thousandths, as every compact action
    assert action["action"] == "click" and inside(action["point"], CHECKOUT_BOX)
    assert "Checkout" in proposal.cot["Decision"] and "read from the screenshot" in proposal.cot["Observation"]
    assert proposal.model_io["pixels"]["outcome"] == "read" and proposal.model_io["pixels"]["nodes"] >= 4


def test_when_ocr_is_missing_the_compact_policy_says_so(word_match_head, monkeypatch):
    monkeypatch.setattr(ocr_candidates, "read_words", lambda png: None)
    proposal = CompactPolicy(word_match_head).propose(blind_state())
    assert proposal.action["action"] != "click"  # nothing to tap: as before OCR existed
    assert "OCR is not installed" in proposal.cot["Observation"]
    assert proposal.model_io["pixels"] == {"outcome": "ocr_missing", "nodes": 0, "detail": ""}
