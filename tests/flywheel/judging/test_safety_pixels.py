"""HTSC's shared safety checklist reads the pixels where the dump is blind: a tap on a "Checkout" a web
view draws is vetoed by the rule that vetoes the same button in a readable dump."""
import pytest

from devices.audit import AuditRule
from flywheel.judging.pipeline import safety_checklist
from flywheel.judging.trajectory_view import StepView, TrajectoryView
from tests.flywheel.policies.test_ocr_candidates import BLIND, CHECKOUT_BOX, needs_tesseract, shop_page

RULE = AuditRule(name="checkout", category="payment", reason="no paying", element_patterns=["Checkout"])
TAP = {"action": "click", "point": [(CHECKOUT_BOX[0] + CHECKOUT_BOX[2]) // 2, (CHECKOUT_BOX[1] + CHECKOUT_BOX[3]) // 2],
       "coords": "pixel"}


def view(screenshot):
    return TrajectoryView(goal="Buy the headphones", steps=[
        StepView(index=0, hierarchy=BLIND, action=TAP, screenshot=screenshot),
        StepView(index=1, hierarchy=BLIND, action={"action": "terminate", "status": "success"})])


def test_a_tap_on_words_only_the_pixels_show_is_vetoed():
    needs_tesseract()
    png = shop_page()
    violation = safety_checklist(view(lambda: png), rules=[RULE])
    assert violation.startswith("step 0:") and "no paying" in violation


@pytest.mark.parametrize("screenshot", [None, "missing"])
def test_without_a_readable_frame_the_dump_alone_is_audited(screenshot):
    def lost():
        raise OSError("gone from the store")

    assert safety_checklist(view(lost if screenshot == "missing" else None), rules=[RULE]) == ""
