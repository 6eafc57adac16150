"""Systems B and C on crafted trajectories: success, wrong state, pseudo-completion, loop, pop-up."""
from flywheel.judging.system_b import system_b_vote
from flywheel.judging.system_c import system_c_vote
from flywheel.judging.trajectory_view import StepView, TrajectoryView


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
    return TrajectoryView(goal="show my MAC address", steps=[
        StepView(index=i, hierarchy=h, action=a) for i, (h, a) in enumerate(steps)],
        final_hierarchy=final, verification=spec, known_path=PATH)


DONE = {"action": "terminate", "status": "success"}
SUCCESS = view([(HOME, click(10, 10)), (SETTINGS, click(10, 10)), (WLAN, click(10, 10)), (MAC, DONE)], MAC)


def test_success():
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


def test_pseudo_completion():
    pseudo = view([(HOME, click(10, 10)), (SETTINGS, click(10, 10)), (WLAN, DONE)], WLAN)
    vote = system_c_vote(pseudo)
    assert vote.vote == "false" and "pseudo-completion" in vote.rationale


def test_a_loop():
    stuck = view([(HOME, click(10, 10))] + [(SETTINGS, click(500, 700))] * 4 + [(SETTINGS, DONE)],
                 SETTINGS, spec={})
    vote = system_c_vote(stuck)
    assert vote.vote == "false" and "loop" in vote.rationale


def test_a_meaningless_detour():
    detour = view([(HOME, click(10, i * 30)) for i in range(20)] + [(MAC, DONE)], MAC)
    vote = system_c_vote(detour)
    assert vote.vote == "false" and "detour" in vote.rationale


def test_a_popup_blocked_run_is_env_error():
    popup = screen("Allow Notes to access photos?", "Allow", "Don't allow",
                   rid="com.android.permissioncontroller:id/permission_allow_button")
    blocked = view([(HOME, click(10, 10)), (popup, click(10, 10)), (popup, DONE)], popup)
    assert system_c_vote(blocked).vote == "env_error"


def test_abstains_without_milestones():
    assert system_b_vote(view([(HOME, DONE)], HOME, spec={})).vote == "abstain"


def test_system_b_reads_the_screenshot_where_the_hierarchy_lacks_the_text():
    import io
    import os
    import shutil

    import pytest
    from PIL import Image, ImageDraw, ImageFont

    if not shutil.which("tesseract"):
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but Debian's tesseract-ocr is not installed")
        pytest.skip("tesseract is not installed (apt-get install tesseract-ocr)")
    image = Image.new("RGB", (1080, 600), "white")
    ImageDraw.Draw(image).text((60, 250), "Order placed", fill="black",
                               font=ImageFont.load_default(size=72))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    web_view = screen("")  # a web view: nothing readable in the hierarchy
    spec = {"milestones": [{"name": "settings", "text": "WLAN"}, {"name": "placed", "text": "Order placed"}]}
    view = TrajectoryView(goal="buy", steps=[
        StepView(index=0, hierarchy=SETTINGS, action=click(1, 1)),
        StepView(index=1, hierarchy=web_view, action=DONE, screenshot=lambda: buffer.getvalue())],
        verification=spec)
    vote = system_b_vote(view)
    assert vote.vote == "true", vote.rationale
    assert vote.details["reached"][1] == {"name": "placed", "at": 1, "by": "ocr"}


PAY = screen("Order summary", "Pay now")
PAYMENT_SPEC = {"milestones": [{"name": "payment page", "text": "Pay now"}], "handoff": "call_user"}
HANDOFF = {"action": "call_user", "reason": "Confirm the payment yourself."}


def test_a_correct_handoff_is_judged_true():
    """Table 3: stopping at the payment screen and calling the user is how such a task ends."""
    from flywheel.rules.htsc import htsc_consensus

    handed_over = view([(HOME, click(10, 10)), (PAY, HANDOFF)], PAY, spec=PAYMENT_SPEC)
    b, c = system_b_vote(handed_over), system_c_vote(handed_over)
    assert (b.vote, c.vote) == ("true", "true"), (b.rationale, c.rationale)
    assert "call_user" in c.rationale
    assert htsc_consensus("true", b.vote, c.vote) == "true"


def test_a_handoff_before_the_goal_state_is_not_success():
    early = view([(HOME, HANDOFF)], HOME, spec=PAYMENT_SPEC)
    assert system_c_vote(early).vote == "false"


def test_declaring_success_where_the_user_was_to_take_over_is_false():
    paid = view([(HOME, click(10, 10)), (PAY, DONE)], PAY, spec=PAYMENT_SPEC)
    vote = system_c_vote(paid)
    assert vote.vote == "false" and "hands over" in vote.rationale


def test_a_handoff_the_spec_does_not_expect_is_left_to_the_other_systems():
    unexpected = view([(HOME, click(10, 10)), (SETTINGS, {"action": "call_user", "reason": "help"})], SETTINGS)
    assert system_c_vote(unexpected).vote == "abstain"
