"""The action space: the 14 actions, validation errors, THE coordinate conversion, clamping."""
import pytest

from devices.actions import ACTIONS, ActionError, normalize_action, to_pixels

W, H = 1080, 2400


def test_there_are_exactly_the_fourteen_actions_of_table_3():
    assert ACTIONS == ("click", "double_click", "type", "system_button", "swipe", "drag", "long_press", "open",
                       "set_scroll_widget", "take_notes", "wait", "terminate", "clarify", "call_user")


@pytest.mark.parametrize("point, coords, expected", [
    ([540, 1200], "pixel", (540, 1200)),
    ([0.5, 0.5], "fraction", (540, 1200)),
    ([500, 500], "thousandths", (540, 1200)),
    ([1000, 1000], "thousandths", (1080, 2400)),
    ([0.25, 0.1], "fraction", (270, 240)),
    ([123.6, 7.4], "pixel", (124, 7)),
])
def test_to_pixels_converts_each_coordinate_system(point, coords, expected):
    assert to_pixels(point, coords, W, H) == expected


def test_to_pixels_rejects_unknown_systems_and_bad_points():
    with pytest.raises(ActionError) as error:
        to_pixels([1, 2], "percent", W, H)
    assert error.value.field == "coords"
    with pytest.raises(ActionError):
        to_pixels([1, 2, 3], "pixel", W, H)
    with pytest.raises(ActionError):
        to_pixels([True, 2], "pixel", W, H)


def test_normalize_converts_to_pixels_and_keeps_the_action():
    out = normalize_action({"action": "click", "point": [500, 250], "coords": "thousandths"}, W, H)
    assert out == {"action": "click", "point": [540, 600], "coords": "pixel"}
    assert "note" not in out


def test_off_screen_points_are_clamped_with_a_note():
    out = normalize_action({"action": "click", "point": [1200, -5]}, W, H)
    assert out["point"] == [1079, 0]
    assert "clamped" in out["note"] and "[1200, -5]" in out["note"]
    edge = normalize_action({"action": "long_press", "point": [1.0, 1.0], "coords": "fraction"}, W, H)
    assert edge["point"] == [1079, 2399] and "clamped" in edge["note"]


def test_swipe_by_direction_starts_at_the_centre_and_moves_the_finger_that_way():
    out = normalize_action({"action": "swipe", "direction": "up"}, W, H)
    assert out["start"] == [540, 1200] and out["end"] == [540, 240]
    left = normalize_action({"action": "swipe", "direction": "left", "point": [0.8, 0.5], "coords": "fraction",
                             "distance": 0.5}, W, H)
    assert left["start"] == [864, 1200] and left["end"] == [324, 1200]


def test_swipe_and_drag_with_two_points():
    out = normalize_action({"action": "drag", "start": [100, 200], "end": [900, 200], "duration_ms": 1200}, W, H)
    assert out == {"action": "drag", "start": [100, 200], "end": [900, 200], "duration_ms": 1200, "coords": "pixel"}


@pytest.mark.parametrize("action, field", [
    ({"action": "tap", "point": [1, 2]}, "action"),
    ("click 1 2", "action"),
    ({"action": "click"}, "point"),
    ({"action": "click", "point": "1,2"}, "point"),
    ({"action": "click", "point": [1, 2], "coords": "inches"}, "coords"),
    ({"action": "click", "point": [1, 2], "text": "x"}, "text"),
    ({"action": "type", "point": [1, 2]}, "text"),
    ({"action": "type", "text": "   "}, "text"),
    ({"action": "system_button", "button": "camera"}, "button"),
    ({"action": "swipe", "start": [1, 2]}, "end"),
    ({"action": "swipe"}, "start"),
    ({"action": "swipe", "direction": "north"}, "direction"),
    ({"action": "swipe", "direction": "up", "distance": 3}, "distance"),
    ({"action": "swipe", "direction": "up", "start": [1, 1], "end": [2, 2]}, "direction"),
    ({"action": "long_press", "point": [1, 2], "duration_ms": 99999}, "duration_ms"),
    ({"action": "open", "app": ""}, "app"),
    ({"action": "set_scroll_widget", "point": [1, 2]}, "value"),
    ({"action": "take_notes"}, "text"),
    ({"action": "wait", "seconds": -1}, "seconds"),
    ({"action": "terminate", "status": "done"}, "status"),
    ({"action": "clarify", "question": "Which?", "choices": "a,b"}, "choices"),
    ({"action": "call_user"}, "reason"),
])
def test_bad_actions_get_a_precise_error(action, field):
    with pytest.raises(ActionError) as error:
        normalize_action(action, W, H)
    assert error.value.field == field
    assert field in str(error.value)


def test_every_action_has_a_valid_canonical_form():
    examples = [
        {"action": "click", "point": [1, 2]}, {"action": "double_click", "point": [1, 2]},
        {"action": "type", "text": "hi"}, {"action": "type", "point": [5, 5], "text": "hi"},
        {"action": "system_button", "button": "Back"}, {"action": "swipe", "start": [1, 2], "end": [3, 400]},
        {"action": "drag", "start": [1, 2], "end": [3, 4]}, {"action": "long_press", "point": [1, 2]},
        {"action": "open", "app": "a note-taking app"}, {"action": "set_scroll_widget", "point": [1, 2], "value": 7},
        {"action": "take_notes", "text": "price is $5"}, {"action": "wait"},
        {"action": "terminate", "status": "success", "answer": "42"},
        {"action": "clarify", "question": "Which one?", "choices": ["a", "b"]},
        {"action": "call_user", "reason": "payment"},
    ]
    for action in examples:
        out = normalize_action(action, W, H)
        assert out["action"] == action["action"]
    assert normalize_action(examples[4], W, H)["button"] == "back"
    assert normalize_action(examples[7], W, H)["duration_ms"] == 800
    assert normalize_action(examples[9], W, H)["value"] == "7"
    assert normalize_action(examples[11], W, H)["seconds"] == 2.0


def test_long_waits_are_clamped_with_a_note():
    out = normalize_action({"action": "wait", "seconds": 600}, W, H)
    assert out["seconds"] == 30 and "clamped" in out["note"]


def test_normalizing_twice_gives_the_same_action():
    once = normalize_action({"action": "click", "point": [2000, 5]}, W, H)
    assert normalize_action(once, W, H)["point"] == once["point"]


def test_every_action_is_described_with_an_example_that_validates():
    from devices.actions import DESCRIPTIONS

    assert list(DESCRIPTIONS) == list(ACTIONS)
    for name, (words, example) in DESCRIPTIONS.items():
        assert words and normalize_action(example, W, H)["action"] == name
