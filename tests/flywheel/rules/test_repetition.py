"""Repetition-to-reflection (§2.3.3): repeated actions are masked from the labels."""
from flywheel.rules.repetition import repetition_mask


def click(x, y):
    return {"action": "click", "point": [x, y]}


def test_repetition_to_reflection():
    a, b, back = click(100, 100), click(500, 900), {"action": "system_button", "button": "back"}
    # tap, tap, tap (stalled), then back breaks out: the repeats are masked, the break-out is not
    assert repetition_mask([a, a, a, back]) == [False, True, True, False]
    # a group of two repeated: (a, b) (a, b) (a, b) then something else
    assert repetition_mask([a, b, a, b, a, b, back]) == [False, False, True, True, True, True, False]
    # near-identical points count as the same action
    assert repetition_mask([a, click(110, 95), b]) == [False, True, False]
    assert repetition_mask([a, b, back]) == [False, False, False]
