"""Regression tests for reported farm bugs: an app's own `back`, shared text, motion-event gestures."""
import re

import pytest

from tests.simfarm.phone_fixtures import bounds, focus, new_phone, sh, tap, texts

SHOP, TRANSLATOR, NOTES = "com.sim.shop", "com.sim.translator", "com.sim.notes"


@pytest.fixture
def phone():
    return new_phone()


def centre(phone, **target):
    x1, y1, x2, y2 = bounds(phone, **target)
    return (x1 + x2) // 2, (y1 + y2) // 2


def activity(phone):
    return focus(phone)[1][1]


# -- 1. an app-triggered back finishes the page even while a field has the keyboard ----------------

def test_saving_an_address_with_the_keyboard_up_closes_the_form(phone):
    sh(phone, f"monkey -p {SHOP} 1")
    tap(phone, resource_id=f"{SHOP}:id/tab_me")
    tap(phone, text="Addresses")
    tap(phone, resource_id=f"{SHOP}:id/add_address")
    tap(phone, resource_id=f"{SHOP}:id/address_street")
    sh(phone, "input text 221%sOak%sAve")
    tap(phone, resource_id=f"{SHOP}:id/address_city")
    sh(phone, "input text Riverton")
    assert phone.engine.focused_input()[0] is not None  # the keyboard is up
    tap(phone, resource_id=f"{SHOP}:id/save_address")
    assert activity(phone) == ".AddressBookActivity"
    assert phone.engine.focused_input()[0] is None
    assert "221 Oak Ave, Riverton" in texts(phone)
    assert "text=221 Oak Ave, Riverton" in sh(phone, f"content query --uri content://{SHOP}/addresses")


def test_the_back_key_still_hides_the_keyboard_first(phone):
    sh(phone, f"monkey -p {SHOP} 1")
    tap(phone, resource_id=f"{SHOP}:id/tab_me")
    tap(phone, text="Addresses")
    tap(phone, resource_id=f"{SHOP}:id/add_address")
    tap(phone, resource_id=f"{SHOP}:id/address_street")
    sh(phone, "input keyevent KEYCODE_BACK")
    assert activity(phone) == ".AddressEditActivity" and phone.engine.focused_input()[0] is None
    sh(phone, "input keyevent KEYCODE_BACK")
    assert activity(phone) == ".AddressBookActivity"


def test_picking_a_language_after_searching_returns_home(phone):
    sh(phone, f"monkey -p {TRANSLATOR} 1")
    tap(phone, resource_id=f"{TRANSLATOR}:id/target_lang")
    assert activity(phone) == ".LanguagePickerActivity" and phone.engine.focused_input()[0] is not None
    sh(phone, "input text Japan")
    tap(phone, resource_id=f"{TRANSLATOR}:id/language_item")
    assert activity(phone) == ".MainActivity"
    assert "target_lang=Japanese" in sh(phone, f"content query --uri content://{TRANSLATOR}/settings")


# -- 2. shared text reaches the target page's on_open ------------------------------------------------

def _share_a_chat_message(phone):
    sh(phone, "monkey -p com.sim.chat 1")
    tap(phone, text="Sam Lee")
    x, y = centre(phone, text="Is ShopMart cheaper?")
    sh(phone, f"input swipe {x} {y} {x} {y} 800")
    tap(phone, resource_id="com.sim.chat:id/forward_message")
    tap(phone, content_desc="Translator")


def test_text_shared_into_translator_fills_its_input(phone):
    _share_a_chat_message(phone)
    assert activity(phone) == ".MainActivity"
    assert "Is ShopMart cheaper?" in texts(phone) and "Enter text" not in texts(phone)


def test_text_shared_into_a_running_translator_fills_its_input(phone):
    sh(phone, f"monkey -p {TRANSLATOR} 1; input keyevent KEYCODE_HOME")
    _share_a_chat_message(phone)
    assert activity(phone) == ".MainActivity"
    assert "Is ShopMart cheaper?" in texts(phone)


def test_send_intent_with_extras_fills_the_input(phone):
    sh(phone, f"am start -a android.intent.action.SEND -p {TRANSLATOR} --es shared_text 'good morning'")
    assert "good morning" in texts(phone)


# -- 3. motion events: timed by the phone's clock (sleep), following the MOVE points ----------------

def _notes(phone):
    sh(phone, f"monkey -p {NOTES} 1")
    return centre(phone, text="Gift ideas")


def test_a_quick_motion_event_pair_in_one_line_is_a_tap(phone):
    x, y = _notes(phone)
    sh(phone, f"input motionevent DOWN {x} {y}; sleep 0.05; input motionevent UP {x} {y}")
    assert activity(phone) == ".NoteActivity"  # a long press would have opened the menu on the list


def test_a_held_motion_event_pair_is_a_long_press(phone):
    x, y = _notes(phone)
    sh(phone, f"input motionevent DOWN {x} {y}; sleep 0.450; input motionevent MOVE {x + 2} {y - 1}; "
              f"sleep 0.450; input motionevent UP {x} {y}")
    assert activity(phone) == ".NotesListActivity" and "Move to folder" in texts(phone)


def test_separate_down_and_up_commands_are_a_tap(phone):
    x, y = _notes(phone)
    sh(phone, f"input motionevent DOWN {x} {y}")
    sh(phone, f"input motionevent UP {x} {y}")
    assert activity(phone) == ".NoteActivity"


def test_a_motion_event_stroke_scrolls_along_its_moves(phone):
    sh(phone, "monkey -p com.android.settings 1")
    assert "Battery" not in texts(phone)
    moves = "; ".join(f"sleep 0.05; input motionevent MOVE 540 {y}" for y in range(1700, 599, -100))
    sh(phone, f"input motionevent DOWN 540 1800; {moves}; sleep 0.05; input motionevent UP 540 600")
    assert "Battery" in texts(phone) and activity(phone) == ".Settings"


def test_a_stroke_that_comes_back_is_not_a_tap(phone):
    x, y = _notes(phone)
    sh(phone, f"input motionevent DOWN {x} {y}; sleep 0.05; input motionevent MOVE {x} {y - 400}; "
              f"sleep 0.05; input motionevent MOVE {x} {y}; sleep 0.05; input motionevent UP {x} {y}")
    assert activity(phone) == ".NotesListActivity" and phone.engine.foreground.top.dialog is None
    assert "LastGesture: swipe" in sh(phone, "dumpsys input")


def test_hold_then_move_drags_a_slider(phone):
    sh(phone, "am start -n com.android.settings/.DisplaySettingsActivity; settings put system screen_brightness 128")
    x1, y1, x2, y2 = bounds(phone, resource_id="com.android.settings:id/brightness")
    x, y = (x1 + x2) // 2, (y1 + y2) // 2
    sh(phone, f"input motionevent DOWN {x} {y}; sleep 0.600; input motionevent MOVE {x + 100} {y}; "
              f"sleep 0.100; input motionevent MOVE {x2 - 2} {y}; sleep 0.150; input motionevent UP {x2 - 2} {y}")
    assert int(sh(phone, "settings get system screen_brightness")) >= 250


def test_dumpsys_input_lists_recent_motion_events_with_times(phone):
    x, y = _notes(phone)
    before = phone.now()
    sh(phone, f"input motionevent DOWN {x} {y}; sleep 0.120; input motionevent MOVE {x + 1} {y}; "
              f"sleep 0.080; input motionevent UP {x + 1} {y}")
    dump = sh(phone, "dumpsys input")
    assert "RecentMotionEvents:" in dump
    events = re.findall(r"action=(\w+) x=(\d+) y=(\d+) t=(\d+)ms", dump)
    assert [(a, int(t)) for a, _x, _y, t in events[-3:]] == [("DOWN", 0), ("MOVE", 120), ("UP", 200)]
    assert re.search(r"LastGesture: tap .*duration=200ms", dump)
    assert phone.now() - before == pytest.approx(0.2 + 1.0)  # the sleeps, plus one second for the gesture


def test_input_swipe_and_tap_are_recorded_too(phone):
    sh(phone, "input swipe 540 1800 540 1000 350")
    dump = sh(phone, "dumpsys input")
    assert re.search(r"action=DOWN x=540 y=1800 t=0ms", dump) and re.search(r"action=UP x=540 y=1000 t=350ms", dump)
    assert re.search(r"LastGesture: swipe .*duration=350ms", dump)


def test_motion_gestures_are_deterministic():
    line = ("input motionevent DOWN 540 1800; sleep 0.2; input motionevent MOVE 540 1200; sleep 0.2; "
            "input motionevent UP 540 900")
    outputs = []
    for _ in range(2):
        phone = new_phone()
        sh(phone, "monkey -p com.android.settings 1")
        sh(phone, line)
        outputs.append((phone.run("screencap -p").stdout, sh(phone, "dumpsys input"), phone.now()))
    assert outputs[0] == outputs[1]


def test_cancel_and_a_stray_move_do_nothing(phone):
    x, y = _notes(phone)
    sh(phone, f"input motionevent MOVE {x} {y}")  # no DOWN before it
    sh(phone, f"input motionevent DOWN {x} {y}; sleep 0.7; input motionevent CANCEL {x} {y}")
    assert activity(phone) == ".NotesListActivity" and phone.engine.foreground.top.dialog is None
    assert "LastGesture: cancel" in sh(phone, "dumpsys input")
    assert phone.run("input motionevent WIGGLE 1 2").exit_code != 0
