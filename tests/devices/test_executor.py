"""The 14 actions executed on the virtual farm over ADB (a real ADB server in a subprocess; no
mocks): each one changes (or, for control actions, does not change) the phone as it should."""
import importlib

import pytest

from devices.audit import AuditRule
from devices.executor import ActionExecutor
from tests.devices.conftest import find, texts

DEFAULTS = importlib.import_module("devices.migrations.0003_default_safety_rules").DEFAULT_RULES
RULES = [AuditRule(**{"action_types": [], **rule}) for rule in DEFAULTS]


@pytest.fixture
def run(phone):
    executor = ActionExecutor(phone, rules=RULES, seed=0)

    def execute(action, **kwargs):
        result = executor.execute(action, **kwargs)
        assert result.ok, f"{action} failed: {result.error or result.reason}"
        return result

    execute.executor = executor
    return execute


def centre(phone, text=None, resource_id=None):
    node = find(phone, text=text, resource_id=resource_id)
    assert node is not None, f"{text or resource_id} is not on the screen: {texts(phone)}"
    return list(node.center)


def settings(phone, name):
    return phone.shell(f"settings get {name}").strip()


def test_click_opens_the_row_it_taps(phone, run):
    phone.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    result = run({"action": "click", "point": centre(phone, "Display & brightness")})
    assert result.commands[0].startswith("input tap ")
    assert "Brightness level" in texts(phone)
    assert phone.foreground()["activity"] == ".DisplaySettingsActivity"
    assert result.element["text"].startswith("Display & brightness")
    assert set(result.timings) >= {"audit", "execute", "total"}


def test_click_in_thousandths_lands_on_the_same_pixel(phone, run):
    phone.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    x, y = centre(phone, "Notifications")
    width, height = phone.window_size()
    result = run({"action": "click", "point": [x * 1000 / width, y * 1000 / height], "coords": "thousandths"})
    assert result.action["point"] == [x, y]
    assert phone.foreground()["activity"] != ".Settings"


def test_double_click_taps_twice_quickly(phone, run):
    phone.shell("am start -n com.sim.shop/.ProductDetailActivity --ei pid 7")
    run({"action": "click", "point": centre(phone, "Add to cart")})
    run({"action": "click", "point": centre(phone, "In cart · View cart")})
    run({"action": "click", "point": centre(phone, "+")})  # from 2 on, a "−" chip sits left of "+"
    assert "Subtotal: $98" in texts(phone)
    result = run({"action": "double_click", "point": centre(phone, "+")})
    assert "Subtotal: $196" in texts(phone)
    assert result.commands == [f"input tap {result.action['point'][0]} {result.action['point'][1]}; sleep 0.080; "
                               f"input tap {result.action['point'][0]} {result.action['point'][1]}"]
    phone.shell("pm clear com.sim.shop")


@pytest.mark.parametrize("text", ["It's 100% \"done\" & (ok); $HOME `x`", "café ☕ 你好 — 50%s off"])
def test_type_focuses_the_field_and_types_exactly(phone, run, text):
    phone.shell("am start -n com.sim.notes/.EditorActivity")
    result = run({"action": "type", "point": centre(phone, resource_id="note_title"), "text": text})
    assert find(phone, resource_id="note_title").text == text
    assert result.commands[0].startswith("input tap ")
    plain = text.isascii() and "%s" not in text
    assert result.commands[1].startswith("input text " if plain else "am broadcast -a ADB_INPUT_B64")


def test_type_without_a_point_types_into_the_focused_field(phone, run):
    phone.shell("am start -n com.sim.notes/.EditorActivity")
    run({"action": "click", "point": centre(phone, resource_id="note_body")})
    run({"action": "type", "text": "first line\nsecond line"})
    assert find(phone, resource_id="note_body").text == "first line\nsecond line"


def test_system_buttons_back_home_and_recents(phone, run):
    phone.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    run({"action": "click", "point": centre(phone, "Display & brightness")})
    run({"action": "system_button", "button": "back"})
    assert phone.foreground()["activity"] == ".Settings"
    run({"action": "system_button", "button": "home"})
    assert "launcher" in find(phone, text="Settings").package
    run({"action": "system_button", "button": "recents"})
    assert find(phone, text="Clear all") is not None and find(phone, text="Settings") is not None


def test_swipe_scrolls_a_list(phone, run):
    phone.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    assert "Battery" not in texts(phone)
    width, height = phone.window_size()
    result = run({"action": "swipe", "start": [width // 2, height * 3 // 4], "end": [width // 2, height // 4]})
    assert "Battery" in texts(phone) and "Search settings" not in texts(phone)
    line = result.commands[0]
    assert line.startswith("input motionevent DOWN") and line.count("MOVE") >= 4 and "sleep" in line
    assert result.action["duration_ms"] > 0
    run({"action": "swipe", "direction": "down", "distance": 0.5})
    assert "Battery" not in texts(phone) and "Search settings" in texts(phone)


def test_drag_moves_a_slider_along_a_real_trajectory(phone, run):
    phone.shell("am start -n com.android.settings/.DisplaySettingsActivity")
    phone.shell("settings put system screen_brightness 128")
    slider = find(phone, resource_id="id/brightness")
    x1, y1, x2, y2 = slider.bounds
    result = run({"action": "drag", "start": [x1 + (x2 - x1) // 2, (y1 + y2) // 2], "end": [x2 - 2, (y1 + y2) // 2]})
    assert int(settings(phone, "system screen_brightness")) >= 250
    assert result.action["duration_ms"] >= 600 + 150  # picked up, moved, settled


def test_long_press_opens_the_context_menu_and_a_tap_does_not(phone, run):
    phone.shell("monkey -p com.sim.notes -c android.intent.category.LAUNCHER 1")
    point = centre(phone, "Gift ideas")
    result = run({"action": "long_press", "point": point, "duration_ms": 900})
    assert {"Pin to top", "Move to folder", "Delete"} <= set(texts(phone))
    assert result.commands[0].startswith("input motionevent DOWN") and "sleep 0.450" in result.commands[0]
    run({"action": "system_button", "button": "back"})
    assert "Move to folder" not in texts(phone)
    run({"action": "click", "point": point})
    assert "Move to folder" in texts(phone) and phone.foreground()["activity"] == ".NoteActivity"


def test_open_resolves_a_need_and_a_name_on_the_phone(phone, run):
    result = run({"action": "open", "app": "a note-taking app"})
    assert phone.foreground()["package"] == "com.sim.notes"
    assert result.action["package"] == "com.sim.notes" and "com.sim.notes" in result.note
    run({"action": "open", "app": "Settings"})
    assert phone.foreground()["package"] == "com.android.settings"
    run({"action": "open", "app": "somewhere to buy headphones"})
    assert phone.foreground()["package"] == "com.sim.shop"
    missing = run.executor.execute({"action": "open", "app": "a chess game"})
    assert not missing.ok and "no installed app serves" in missing.error


def test_set_scroll_widget_turns_the_time_wheels(phone, run):
    phone.shell("settings put global auto_time 0; am start -a android.settings.DATE_SETTINGS")
    run({"action": "click", "point": centre(phone, "Time")})
    hour, minute = (find(phone, resource_id=f"id/{name}_picker") for name in ("hour", "minute"))
    result = run({"action": "set_scroll_widget", "point": list(hour.center), "value": "7"})
    assert "wheel set to 07" in result.note
    run({"action": "set_scroll_widget", "point": list(minute.center), "value": "45"})
    assert find(phone, resource_id="id/hour_picker").children[1].text == "07"
    assert find(phone, resource_id="id/minute_picker").children[1].text == "45"
    assert result.commands and all(c.startswith("input motionevent DOWN") for c in result.commands)
    impossible = run.executor.execute({"action": "set_scroll_widget", "point": list(hour.center), "value": "31"})
    assert not impossible.ok and "did not reach '31'" in impossible.error
    phone.shell("settings put global auto_time 1")


def test_set_scroll_widget_needs_a_wheel_at_the_point(phone, run):
    phone.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    result = run.executor.execute({"action": "set_scroll_widget", "point": [5, 5], "value": "3"})
    assert not result.ok and "no wheel picker" in result.error


@pytest.mark.parametrize("secret", ["card 4111 1111 1111 1111", "Guest Wi-Fi password sunflower42",
                                    "verification code is 482913", "ID 11010519491231002X"])
@pytest.mark.django_db
def test_take_notes_refuses_secrets(run, secret):
    result = run.executor.execute({"action": "take_notes", "text": secret})
    assert not result.ok and result.blocked and result.reason
    assert result.control is None
    from devices.models import AuditEvent

    assert AuditEvent.objects.get().action["text"] == secret


@pytest.mark.django_db
def test_take_notes_refuses_a_card_number_even_with_no_rules(phone):
    from devices.models import AuditEvent

    result = ActionExecutor(phone, rules=[]).execute({"action": "take_notes", "text": "Visa 4111111111111111"})
    assert result.blocked and "payment card number" in result.reason
    assert AuditEvent.objects.get().rule is None


def test_an_executor_can_default_to_a_models_coordinate_convention(phone):
    phone.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    x, y = centre(phone, "Notifications")
    width, height = phone.window_size()
    executor = ActionExecutor(phone, rules=RULES, coords="thousandths")
    result = executor.execute({"action": "click", "point": [round(x * 1000 / width), round(y * 1000 / height)]})
    assert result.ok and abs(result.action["point"][1] - y) <= 2


def test_take_notes_returns_the_note_to_the_caller(phone, run):
    before = phone.dump_hierarchy()
    result = run({"action": "take_notes", "text": "Cheapest headphones: JBL Tune 510BT, $49"})
    assert result.control == {"kind": "take_notes", "text": "Cheapest headphones: JBL Tune 510BT, $49"}
    assert result.commands == [] and phone.dump_hierarchy() == before


@pytest.mark.parametrize("action, control", [
    ({"action": "terminate", "status": "success", "answer": "Done"},
     {"kind": "terminate", "status": "success", "answer": "Done"}),
    ({"action": "clarify", "question": "Which Sam?", "choices": ["Sam Lee", "Sam Wu"]},
     {"kind": "clarify", "question": "Which Sam?", "choices": ["Sam Lee", "Sam Wu"]}),
    ({"action": "call_user", "reason": "The payment needs your confirmation"},
     {"kind": "call_user", "reason": "The payment needs your confirmation"}),
    ({"action": "wait", "seconds": 1.5}, {"kind": "wait", "seconds": 1.5}),
])
def test_control_actions_touch_nothing(phone, run, action, control):
    phone.shell("monkey -p com.sim.notes -c android.intent.category.LAUNCHER 1")
    before = phone.dump_hierarchy()
    result = run(action)
    assert result.control == control
    assert result.commands == ([] if action["action"] != "wait" else ["sleep 1.5"])
    assert phone.dump_hierarchy() == before


def test_a_bad_action_is_an_error_and_sends_nothing(run):
    result = run.executor.execute({"action": "click", "point": [1, 2, 3]})
    assert not result.ok and result.error.startswith("point:") and result.commands == []


def test_control_actions_work_when_the_phone_is_gone():
    from devices.phone import PhoneConnection

    gone = ActionExecutor(PhoneConnection(address="127.0.0.1:1", serial="nowhere"), rules=RULES)
    assert gone.execute({"action": "terminate", "status": "failure"}).control["status"] == "failure"
    click = gone.execute({"action": "click", "point": [1, 1]})
    assert not click.ok and "nowhere" in click.error
