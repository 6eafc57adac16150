"""§2.5.2: "cases with low Teacher confidence or hard scenarios (risk control, complex account
states, or severe UI deformation) are routed to human repair"."""
import pytest

from flywheel.rules.human_repair import hard_scenario, low_teacher_confidence, route_to_human_repair

SETTINGS_LIST = "Settings\nWLAN\nBluetooth\nDisplay & brightness"


def test_an_ordinary_screen_and_a_confident_teacher_need_no_person():
    assert hard_scenario(True, 40, SETTINGS_LIST) == ""
    assert route_to_human_repair(0.9, 0.6, "") == ""
    assert route_to_human_repair(0.6, 0.6, "") == ""  # at the threshold it is trusted


@pytest.mark.parametrize("confidence, reason", [
    (0.59, "low Teacher confidence (0.59 < 0.60)"), (0.0, "low Teacher confidence (0.00 < 0.60)"),
    (None, "low Teacher confidence: the Teacher gave none")])
def test_low_teacher_confidence(confidence, reason):
    assert low_teacher_confidence(confidence, 0.6) == reason
    assert route_to_human_repair(confidence, 0.6, "") == reason


@pytest.mark.parametrize("screen, kind, found", [
    ("Unusual activity detected\nFor your account security this operation is restricted", "", "risk control"),
    ("Security verification\nDrag the slider to complete the puzzle", "", "risk control"),
    ("Shop", "risk_control", "risk control: risk_control"),
    ("Login expired\nYour login session has expired. Please log in again to continue.", "", "complex account state"),
    ("Enter the captcha", "", "complex account state"),
    ("Enter payment password", "", "complex account state"),
    ("Enter the SMS code sent to your phone", "", "complex account state"),
    ("Shop", "captcha", "complex account state: captcha"),
])
def test_risk_control_and_complex_account_states_are_hard(screen, kind, found):
    assert hard_scenario(True, 40, screen, kind).startswith(found)


@pytest.mark.parametrize("has_screenshot, nodes, found", [
    (False, 40, "severe UI deformation: the step has no screenshot"),
    (True, 0, "severe UI deformation: the UI dump is empty or broken (0 nodes)"),
    (True, 2, "severe UI deformation: the UI dump is empty or broken (2 nodes)")])
def test_severe_ui_deformation_is_hard(has_screenshot, nodes, found):
    assert hard_scenario(has_screenshot, nodes, SETTINGS_LIST) == found


def test_a_hard_scenario_goes_to_a_person_however_sure_the_teacher_is():
    hard = hard_scenario(True, 40, "Login expired")
    assert route_to_human_repair(0.99, 0.6, hard) == hard
    # "password" as an ordinary setting's name is not an account state
    assert hard_scenario(True, 40, "Wi-Fi\nShow password\nPrivacy") == ""
