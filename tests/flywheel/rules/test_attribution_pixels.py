"""Perception drift against the pixels (§2.5.1, #33): the model's claim is compared with the OCR words
of the frame (data the service passes in), not only with the dump — a stale dump, a blind one."""
from dataclasses import replace

from flywheel.rules.attribution import cascaded_attribution
from flywheel.rules.attribution_model import perception_slip
from flywheel.rules.attribution_trace import SeenWord, StepFacts
from tests.flywheel.rules.attribution_screens import FAILURE, HOME, OPEN, SHOP, node, screen, tap, trajectory, window

WEB_VIEW = screen(window(node(cls="android.webkit.WebView", bounds=(0, 0, 1080, 2400))))
# What HOME shows on screen: the title, then the Headphones and Phones buttons (centres y=660, 820).
HOME_WORDS = (SeenWord("ShopMart", (60, 150, 380, 210)), SeenWord("Headphones", (400, 640, 680, 690)),
              SeenWord("Phones", (450, 800, 630, 850)))
LAUNCHER = screen(window(node("ShopMart", bounds=(48, 560, 1032, 720), clickable=True, package="launcher"),
                         package="launcher"))


def tapping(xml, label, y, words, blind=False):
    action, cot = tap(label, y)
    return StepFacts(index=1, hierarchy=xml, action=action, cot=cot, package=SHOP, words=words, blind=blind)


def test_a_stale_dump_that_agrees_with_the_claim_is_overruled_by_the_pixels():
    """The dump (taken before the list scrolled) has Phones under the tap; the frame shows Headphones there."""
    scrolled = (SeenWord("Phones", (450, 480, 630, 530)), SeenWord("Headphones", (400, 800, 680, 850)))
    assert perception_slip(tapping(HOME, "Phones", 820, None)) == ""   # the dump alone sees no slip
    slip = perception_slip(tapping(HOME, "Phones", 820, scrolled))
    assert slip == ('element confusion (read on screen): the [Decision] named "Phones", shown at (540, 505), '
                    'but the tap at (540, 820) landed near "Headphones"')


def test_on_a_readable_dump_words_ocr_missed_are_no_evidence():
    assert perception_slip(tapping(HOME, "Phones", 820, (SeenWord("ShopMart", (60, 150, 380, 210)),))) == ""


def test_on_a_blind_dump_the_pixels_alone_tell_a_slip():
    assert perception_slip(tapping(WEB_VIEW, "Phones", 820, HOME_WORDS, blind=True)) == ""  # landed on it
    confused = perception_slip(tapping(WEB_VIEW, "Headphones", 820, HOME_WORDS, blind=True))
    assert confused.startswith('element confusion (read on screen): the [Decision] named "Headphones", '
                               'shown at (540, 665)') and 'landed near "Phones"' in confused
    absent = perception_slip(tapping(WEB_VIEW, "Cart", 820, HOME_WORDS, blind=True))
    assert absent == 'the [Decision] named "Cart", which the screen does not show (OCR); the tap at (540, 820) landed near "Phones"'
    # without the pixels a blind dump says nothing (before, its opaque node read as "a tap on no element")
    assert perception_slip(tapping(WEB_VIEW, "Cart", 820, None, blind=True)) == ""


def test_a_known_path_through_a_blind_page_is_followed_on_the_pixels():
    """The path's next target is Headphones (by text); the dump of the page is one web view."""
    def on_pixels(words):
        trace = trajectory((LAUNCHER, OPEN), (WEB_VIEW, tap("Phones", 820)), (WEB_VIEW, FAILURE))
        steps = tuple(replace(s, blind=s.hierarchy == WEB_VIEW, words=words if s.hierarchy == WEB_VIEW else None)
                      for s in trace.steps)
        return cascaded_attribution(replace(trace, steps=steps))

    seen = on_pixels(HOME_WORDS)
    assert (seen.cause, seen.finding.first_bad_step) == ("perception_drift", 1)
    assert seen.finding.detail == ('element confusion (read on screen): the tap at (540, 820) landed near "Phones" '
                                   'where the path goes through "Headphones", shown at (540, 665)')
    assert seen.finding.correctable
    unread = on_pixels(None)  # the dump cannot show the target: "out of reach", not a slip
    assert "is not on the screen at step 1" in unread.finding.detail
