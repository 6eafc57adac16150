"""Systems B and C on crafted trajectories: success, wrong state, pseudo-completion, loop, pop-up.

B reads the UI dump only; C reads the pixels only (real PNG frames drawn from each screen's texts,
read by tesseract), so C's tests need tesseract."""
import pytest

from flywheel.judging.system_b import system_b_vote
from flywheel.judging.system_c import system_c_vote
from flywheel.judging.trajectory_view import StepView, TrajectoryView
from tests.flywheel.judging.pixels import pictured, require_tesseract


@pytest.fixture
def ocr():
    require_tesseract()


def screen(*texts, rid=""):
    nodes = "".join(
        f'<node index="{i}" text="{t}" resource-id="{rid}" class="android.widget.TextView" '
        f'package="p" content-desc="" bounds="[0,{i * 100}][1080,{i * 100 + 100}]" />'
        for i, t in enumerate(texts))
    return f'<?xml version="1.0" ?><hierarchy rotation="0">{nodes}</hierarchy>'


HOME, SETTINGS, WLAN, MAC = (screen("Settings", "Notes"), screen("WLAN", "Bluetooth"),
                             screen("Advanced", "Saved networks"), screen("MAC address", "02:00:00:44:55:66"))
SPEC = {"milestones": [{"name": "settings", "text": "WLAN"}, {"name": "wlan", "text": "Advanced"},
                       {"name": "mac", "text": "MAC address"}]}
PATH = {"steps": [{"action": "click"}] * 4}


def click(x, y):
    return {"action": "click", "point": [x, y]}


def view(steps, final, spec=SPEC):
    """Each step's frame shows its dump's texts (System C reads the frames, B the dumps)."""
    return pictured(TrajectoryView(goal="show my MAC address", steps=[
        StepView(index=i, hierarchy=h, action=a) for i, (h, a) in enumerate(steps)],
        final_hierarchy=final, verification=spec, known_path=PATH))


DONE = {"action": "terminate", "status": "success"}
SUCCESS = view([(HOME, click(10, 10)), (SETTINGS, click(10, 10)), (WLAN, click(10, 10)), (MAC, DONE)], MAC)


def test_success(ocr):
    assert system_b_vote(SUCCESS).vote == "true"
    assert system_c_vote(SUCCESS).vote == "true"


def test_wrong_final_state():
    wrong = view([(HOME, click(10, 10)), (SETTINGS, click(10, 150)), (screen("Bluetooth"), DONE)],
                 screen("Bluetooth"))
    vote = system_b_vote(wrong)
    assert vote.vote == "false" and "wlan" in vote.rationale


def test_milestones_must_come_in_order():
    backwards = view([(MAC, click(1, 1)), (WLAN, click(1, 1)), (SETTINGS, DONE)], SETTINGS)
    assert system_b_vote(backwards).vote == "false"


def test_pseudo_completion(ocr):
    pseudo = view([(HOME, click(10, 10)), (SETTINGS, click(10, 10)), (WLAN, DONE)], WLAN)
    vote = system_c_vote(pseudo)
    assert vote.vote == "false" and "pseudo-completion" in vote.rationale


def test_a_loop(ocr):
    stuck = view([(HOME, click(10, 10))] + [(SETTINGS, click(500, 700))] * 4 + [(SETTINGS, DONE)],
                 SETTINGS, spec={})
    vote = system_c_vote(stuck)
    assert vote.vote == "false" and "loop" in vote.rationale


def test_a_meaningless_detour(ocr):
    detour = view([(HOME, click(10, i * 30)) for i in range(20)] + [(MAC, DONE)], MAC)
    vote = system_c_vote(detour)
    assert vote.vote == "false" and "detour" in vote.rationale


def test_a_popup_blocked_run_is_env_error(ocr):
    popup = screen("Allow Notes to access photos?", "Allow", "Don't allow",
                   rid="com.android.permissioncontroller:id/permission_allow_button")
    blocked = view([(HOME, click(10, 10)), (popup, click(10, 10)), (popup, DONE)], popup)
    assert system_c_vote(blocked).vote == "env_error"


def test_abstains_without_milestones():
    assert system_b_vote(view([(HOME, DONE)], HOME, spec={})).vote == "abstain"


PAY = screen("Order summary", "Pay now")
PAYMENT_SPEC = {"milestones": [{"name": "payment page", "text": "Pay now"}], "handoff": "call_user"}
HANDOFF = {"action": "call_user", "reason": "Confirm the payment yourself."}


def test_a_correct_handoff_is_judged_true(ocr):
    """Table 3: stopping at the payment screen and calling the user is how such a task ends."""
    from flywheel.rules.htsc import htsc_consensus

    handed_over = view([(HOME, click(10, 10)), (PAY, HANDOFF)], PAY, spec=PAYMENT_SPEC)
    b, c = system_b_vote(handed_over), system_c_vote(handed_over)
    assert (b.vote, c.vote) == ("true", "true"), (b.rationale, c.rationale)
    assert "call_user" in c.rationale
    assert htsc_consensus("true", b.vote, c.vote) == "true"


def test_a_handoff_before_the_goal_state_is_not_success(ocr):
    early = view([(HOME, HANDOFF)], HOME, spec=PAYMENT_SPEC)
    assert system_c_vote(early).vote == "false"


def test_declaring_success_where_the_user_was_to_take_over_is_false(ocr):
    paid = view([(HOME, click(10, 10)), (PAY, DONE)], PAY, spec=PAYMENT_SPEC)
    vote = system_c_vote(paid)
    assert vote.vote == "false" and "hands over" in vote.rationale


def test_a_handoff_the_spec_does_not_expect_is_left_to_the_other_systems(ocr):
    unexpected = view([(HOME, click(10, 10)), (SETTINGS, {"action": "call_user", "reason": "help"})], SETTINGS)
    assert system_c_vote(unexpected).vote == "abstain"


# -- the pixel path (System C) and the blind dump (System B) -----------------------------------

WEB_VIEW = ('<?xml version="1.0" ?><hierarchy rotation="0"><node index="0" text="" resource-id="" '
            'class="android.webkit.WebView" package="p" content-desc="" bounds="[0,0][1080,2400]" /></hierarchy>')


def framed(steps, final, spec=SPEC):
    """steps: (dump, frame PNG or None, action); the final screen is the last step's."""
    return TrajectoryView(goal="show my MAC address", steps=[
        StepView(index=i, hierarchy=h, action=a, screenshot=(lambda png=png: png) if png else None)
        for i, (h, png, a) in enumerate(steps)], final_hierarchy=final, verification=spec, known_path=PATH)


def test_c_catches_a_pseudo_completion_the_dump_hides(ocr):
    """The dump (taken mid-animation) shows the goal's text; the frame shows the page before it."""
    from tests.flywheel.judging.pixels import frame_png

    lying = framed([(HOME, frame_png("Settings", "Notes"), click(10, 10)),
                    (SETTINGS, frame_png("WLAN", "Bluetooth"), click(10, 10)),
                    (WLAN, frame_png("Advanced", "Saved networks"), click(10, 10)),
                    (MAC, frame_png("Advanced", "Saved networks"), DONE)], MAC)
    c, b = system_c_vote(lying), system_b_vote(lying)
    assert c.vote == "false" and "pseudo-completion" in c.rationale and "MAC address" in c.rationale
    assert b.vote == "true"  # the dump says so: the two stacks disagree, HTSC does not pass it unanimously


def test_on_a_blind_dump_c_reads_the_goal_and_b_abstains(ocr):
    from tests.flywheel.judging.pixels import frame_png

    blind = framed([(HOME, frame_png("Settings", "Notes"), click(10, 10)),
                    (SETTINGS, frame_png("WLAN", "Bluetooth"), click(10, 10)),
                    (WLAN, frame_png("Advanced", "Saved networks"), click(10, 10)),
                    (WEB_VIEW, frame_png("MAC address", "02:00:00:44:55:66"), DONE)], WEB_VIEW)
    c, b = system_c_vote(blind), system_b_vote(blind)
    assert c.vote == "true", c.rationale
    assert b.vote == "abstain"
    assert b.rationale == "the UI dump is blind on step 3's screen (web view / canvas): milestone mac cannot be read"
    assert b.details["blind"] == {"step": 3, "milestone": "mac"}


def test_b_votes_false_where_every_screen_after_the_last_milestone_is_readable():
    readable = view([(HOME, click(10, 10)), (WEB_VIEW, click(10, 10)), (SETTINGS, click(10, 150)),
                     (screen("Bluetooth"), DONE)], screen("Bluetooth"))
    vote = system_b_vote(readable)  # the web view came before the last milestone held
    assert vote.vote == "false" and "wlan" in vote.rationale


def test_b_does_not_read_the_pixels():
    from tests.flywheel.judging.pixels import frame_png

    blind = framed([(SETTINGS, None, click(10, 10)), (WLAN, None, click(10, 10)),
                    (WEB_VIEW, frame_png("MAC address"), DONE)], WEB_VIEW)
    vote = system_b_vote(blind)
    assert vote.vote == "abstain" and [r["by"] for r in vote.details["reached"]] == ["hierarchy", "hierarchy", None]


def test_c_abstains_on_a_frame_missing_from_the_store(ocr):
    def lost():
        raise FileNotFoundError("blobs/ab/abcd.png")

    missing = view([(HOME, click(10, 10)), (SETTINGS, click(10, 10)), (WLAN, click(10, 10)), (MAC, DONE)], MAC)
    missing.steps[3].screenshot = lost
    vote = system_c_vote(missing)
    assert vote.vote == "abstain" and "step 3's frame is missing from the store" in vote.rationale
    unrecorded = view([(HOME, click(10, 10)), (MAC, DONE)], MAC)
    unrecorded.steps[1].screenshot = None
    assert "no screenshot was stored for step 1's frame" in system_c_vote(unrecorded).rationale


def test_c_abstains_when_ocr_fails_or_is_not_installed(monkeypatch):
    from flywheel.judging import frames
    from flywheel.screens.ocr import OcrFailed

    def timed_out(png):
        raise OcrFailed("OCR timed out after 30 s")

    monkeypatch.setattr(frames, "ocr_words", timed_out)
    vote = system_c_vote(SUCCESS)
    assert vote.vote == "abstain" and "OCR timed out after 30 s" in vote.rationale
    monkeypatch.setattr(frames, "ocr_words", lambda png: None)
    vote = system_c_vote(SUCCESS)
    assert vote.vote == "abstain" and "tesseract is not installed" in vote.rationale


def test_a_loop_is_read_from_unchanged_frames_not_from_the_dump(ocr):
    """The dumps differ (an animation's node), the frames do not (the clock aside): a loop; the
    dumps are the same but a quantity changes on screen: progress."""
    from tests.flywheel.judging.pixels import frame_png

    cart = {"milestones": [{"name": "cart", "text": "Cart"}]}
    tap = click(500, 700)
    same = framed([(screen("Cart", f"frame {i}"), frame_png("Cart", "Quantity 1", clock=f"12:0{i}"), tap)
                   for i in range(4)] + [(screen("Cart"), frame_png("Cart", "Quantity 1"), DONE)], screen("Cart"),
                  spec=cart)
    vote = system_c_vote(same)
    assert vote.vote == "false" and vote.details == {"loop": 4, "kind": "loop"}, vote.rationale
    counting = framed([(screen("Cart"), frame_png("Cart", f"Quantity {i}"), tap) for i in range(1, 5)]
                      + [(screen("Cart"), frame_png("Cart", "Quantity 5"), DONE)], screen("Cart"), spec=cart)
    assert system_c_vote(counting).vote == "true"


def test_taps_that_land_with_no_effect_are_a_stall(ocr):
    from tests.flywheel.judging.pixels import frame_png

    page = frame_png("Cart", "Quantity 1")
    taps = [click(100, 300), click(600, 900), click(300, 1500)]
    stalled = framed([(screen("Cart"), page, tap) for tap in taps] + [(screen("Cart"), page, DONE)],
                     screen("Cart"), spec={})
    vote = system_c_vote(stalled)
    assert vote.vote == "false" and vote.details == {"loop": 3, "kind": "stall"}, vote.rationale
    dotted = framed([(screen("Cart"), frame_png("Cart", "Quantity 1", marks=[(600, 900)] * i), tap)
                     for i, tap in enumerate(taps)] + [(screen("Cart"), frame_png("Cart", "Quantity 1",
                                                                                  marks=[(600, 900)] * 3), DONE)],
                    screen("Cart"), spec={})
    assert system_c_vote(dotted).vote == "true"  # the first tap drew something: a change, not a stall


def test_interference_is_read_from_the_pixels(ocr):
    from tests.flywheel.judging.pixels import frame_png

    crashed = framed([(HOME, frame_png("Settings", "Notes"), click(10, 10)),
                      (WEB_VIEW, frame_png("Notes keeps stopping", "Close app"), DONE)], WEB_VIEW, spec={})
    vote = system_c_vote(crashed)
    assert vote.vote == "env_error" and vote.details == {"environment": "app crash"}
    asked = framed([(HOME, frame_png("Allow Notes to access", "photos?", "While using the app", "Don't allow"),
                     click(10, 10)), (HOME, frame_png("Settings", "Notes"), {"action": "terminate", "status": "failure"})],
                   HOME, spec={})
    assert system_c_vote(asked).details == {"environment": "permission dialog"}


def test_an_id_only_final_milestone_is_not_checked_in_pixels(ocr):
    spec = {"milestones": [{"name": "mac page", "resource_id": "com.android.settings:id/mac"}]}
    vote = system_c_vote(view([(HOME, click(10, 10)), (MAC, DONE)], MAC, spec=spec))
    assert vote.vote == "true" and "names no words (id only): not checked in pixels" in vote.rationale


def test_whether_two_frames_show_one_screen_is_decided_once_per_pair_of_frames(monkeypatch):
    """A screen recurs across steps and trajectories: a second trajectory over the same frames is answered
    without decoding them again (and the answer is the same)."""
    from flywheel.judging import frames
    from tests.flywheel.judging.pixels import SIZE, frame_png

    one, clock_moved, other = frame_png("Cart", "Quantity 1"), frame_png("Cart", "Quantity 1", clock="12:07"), \
        frame_png("Cart", "Quantity 2")
    steps = [(screen("Cart"), png, click(500, 700)) for png in (one, clock_moved, other)]
    first = frames.Frames(framed(steps, screen("Cart"), spec={}))
    answers = [first.unchanged(0, 1), first.unchanged(1, 2), first.unchanged(2, 0)]
    assert answers == [True, False, False]

    def decode(self, i):
        raise AssertionError("decoded a frame whose comparison is known")

    monkeypatch.setattr(frames.Frames, "_thumbnail", decode)
    again = frames.Frames(framed(steps, screen("Cart"), spec={}))
    assert [again.unchanged(1, 0), again.unchanged(2, 1), again.unchanged(0, 2)] == answers
    assert again.size(0) == SIZE   # from the PNG's header, no decode
