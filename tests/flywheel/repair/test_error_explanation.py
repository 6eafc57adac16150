"""Error explanations (Xiaomi-GUI-0 §3.4) as a pure rule: hand-computed sentences per error class,
the offline Teacher's own reasons, and who wins the [Reflection]."""
import pytest

from flywheel.rules.error_explanation import (
    ErrorFacts,
    action_words,
    chosen_explanation,
    error_explanation,
    teacher_error_explanation,
)

TAP_DISPLAY = {"action": "click", "point": [540, 790], "coords": "pixel"}
TAP_BLUETOOTH = {"action": "click", "point": [540, 590], "coords": "pixel"}
BACK = {"action": "system_button", "button": "back"}
DONE = {"action": "terminate", "status": "success"}
GIVE_UP = {"action": "terminate", "status": "failure"}
CLOSE = {"action": "click", "point": [900, 400], "coords": "pixel"}


@pytest.mark.parametrize("facts, expected", [
    # perception drift: the wrong row of the screen it was on
    (ErrorFacts(3, "perception_drift", TAP_DISPLAY, TAP_BLUETOOTH, "Display", "Bluetooth", "Settings"),
     'Tap "Display" is the wrong step here: it misreads the "Settings" screen, where the task needs "Bluetooth". '
     'Tap "Bluetooth" instead.'),
    # ... a tap on no element, on a screen with no heading
    (ErrorFacts(3, "perception_drift", TAP_DISPLAY, TAP_BLUETOOTH, "", "Bluetooth"),
     'Tap at (540, 790) is the wrong step here: it misreads the screen, where the task needs "Bluetooth". '
     'Tap "Bluetooth" instead.'),
    # state tracking: the attribution counted the steps that went nowhere
    (ErrorFacts(3, "state_tracking", BACK, TAP_BLUETOOTH, "", "Search", "Results", wrong_steps=3),
     "Press back is the wrong step here: it loses track of the task's progress and goes back over pages already "
     'visited (3 steps went nowhere from here). Tap "Search" instead.'),
    (ErrorFacts(3, "state_tracking", BACK, TAP_BLUETOOTH, "", "Search", "Results", wrong_steps=1),
     "Press back is the wrong step here: it loses track of the task's progress and goes back over pages already "
     'visited. Tap "Search" instead.'),
    # constraint violation: a success declared too early, or a tap that breaks the task's condition
    (ErrorFacts(3, "constraint_violation", DONE, TAP_BLUETOOTH, "", "Save", "Edit note"),
     "Finish with success is the wrong step here: it declares the task done while the task's conditions do not "
     'hold yet. Tap "Save" instead.'),
    (ErrorFacts(3, "constraint_violation", TAP_DISPLAY, TAP_BLUETOOTH, "Buy now", "Add to cart", "Product"),
     'Tap "Buy now" is the wrong step here: it breaks a condition the task sets. Tap "Add to cart" instead.'),
    # over-scoped (no prefix to align a query to): it gave up where the next step was within reach
    (ErrorFacts(3, "over_scoped", GIVE_UP, {"action": "swipe", "direction": "up"}),
     "Give up is the wrong step here: it stops making progress where the next step is still within reach. "
     "Swipe up instead."),
    # Level 1: a pop-up the step acted under, and one the step itself closed
    (ErrorFacts(1, "popup", TAP_DISPLAY, CLOSE, "Buy", "Close", "Limited offer"),
     'Tap "Buy" is the wrong step here: a pop-up covers the screen ("Limited offer"); it is not part of the task '
     'and has to be closed first. Tap "Close" instead.'),
    (ErrorFacts(1, "popup", CLOSE, CLOSE, "Close", "Close", "Limited offer"),
     'A pop-up covers the screen ("Limited offer"); it is not part of the task and has to be closed first: '
     'tap "Close".'),
    (ErrorFacts(1, "permission", None, CLOSE, "", "Don't allow"),
     "A permission dialog covers the screen; it is not part of the task and has to be closed first: "
     "tap \"Don't allow\"."),
    # no attribution recorded: the error class is unknown
    (ErrorFacts(0, "", {"action": "type", "text": "milk", "point": [540, 200]}, TAP_BLUETOOTH, "Search", "Go"),
     'Type "milk" into "Search" is the wrong step here: it does not lead toward the goal from the screen. '
     'Tap "Go" instead.'),
    # no usable action at all
    (ErrorFacts(3, "perception_drift", None, TAP_BLUETOOTH, "", "Bluetooth", "Settings"),
     'No usable action came on the "Settings" screen, where the task goes on: tap "Bluetooth".'),
])
def test_the_explanation_of_each_error_class(facts, expected):
    assert error_explanation(facts) == expected


@pytest.mark.parametrize("action, label, words", [
    (TAP_DISPLAY, "Display", 'tap "Display"'),
    (TAP_DISPLAY, "", "tap at (540, 790)"),
    ({"action": "long_press", "point": [10, 20]}, "Photo", 'long press "Photo"'),
    ({"action": "open", "app": "Notes"}, "", 'open "Notes"'),
    ({"action": "clarify", "question": "Which one?"}, "", 'ask "Which one?"'),
    ({"action": "call_user", "reason": "payment"}, "", "hand over to the user"),
    ({"action": "wait", "seconds": 2}, "", "wait"),
    (GIVE_UP, "", "give up"),
    (None, "", "no usable action"),
])
def test_action_words(action, label, words):
    assert action_words(action, label) == words


@pytest.mark.parametrize("source, expected", [
    ("known_path", 'Tap "Display" is the wrong step here: it leaves the task\'s known path, which goes on here with '
                   'tap "Bluetooth".'),
    ("gem", 'Tap "Display" is the wrong step here: it does not lead toward the target page; tap "Bluetooth" does.'),
    ("dismissal", 'Tap "Display" is the wrong step here: a pop-up covers the screen and has to be closed first '
                  '(tap "Bluetooth").'),
    ("goal", 'Tap "Display" is the wrong step here: it does not match what the goal asks on this screen; '
             'tap "Bluetooth" does.'),
    ("fallback", ""),   # going back because nothing fits says nothing about the wrong step
])
def test_the_offline_teachers_own_reason(source, expected):
    assert teacher_error_explanation(source, TAP_DISPLAY, "Display", TAP_BLUETOOTH, "Bluetooth") == expected


def test_a_teacher_whose_first_choice_was_the_wrong_action_cannot_say_why_it_was_wrong():
    assert teacher_error_explanation("known_path", TAP_DISPLAY, "Display", TAP_BLUETOOTH, "Bluetooth", demoted=True) == ""
    assert teacher_error_explanation("known_path", None, "", TAP_BLUETOOTH, "Bluetooth") == ""


def test_a_persons_reason_then_the_teachers_then_the_evidences():
    assert chosen_explanation("I misread the row.", "Teacher's.", "Evidence's.") == ("I misread the row.", "annotator")
    assert chosen_explanation("  ", "Teacher's.", "Evidence's.") == ("Teacher's.", "teacher")
    assert chosen_explanation("", "", " Evidence's. ") == ("Evidence's.", "evidence")
    assert chosen_explanation() == ("", "")
