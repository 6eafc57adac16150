"""The `action_text` filter says in a few words what a step did, and never raises."""
from django.template import Context, Template

from flywheel.models import Step
from flywheel.templatetags.actions import action_text


def test_a_click_with_a_point():
    assert action_text({"action": "click", "point": [540, 880], "coords": "pixel"}) == "Tap at (540, 880)"


def test_a_swipe_with_a_direction():
    assert action_text({"action": "swipe", "direction": "up", "coords": "pixel"}) == "Swipe up to scroll"


def test_typing():
    assert action_text({"action": "type", "text": "milk", "point": [100, 200]}) == 'Type "milk" at (100, 200)'


def test_an_executed_step_shows_its_action():
    step = Step(executed_action={"action": "system_button", "button": "back"}, audit={"blocked": False})
    assert action_text(step) == "Press the back button"


def test_a_blocked_step_shows_the_reason():
    step = Step(audit={"blocked": True, "reason": "taps a payment button", "error": None})
    assert action_text(step) == "blocked: taps a payment button"
    assert action_text(step.audit) == "blocked: taps a payment button"


def test_a_failed_step_shows_the_error():
    step = Step(audit={"blocked": False, "reason": "", "error": "no element at the point"})
    assert action_text(step) == "failed: no element at the point"


def test_a_pending_step():
    assert action_text(Step()) == "…"


def test_none_and_other_input_never_raise():
    assert action_text(None) == "–"
    assert action_text("click") == "–"
    assert action_text(42) == "–"
    assert action_text({}) == "–"
    assert action_text({"action": "click", "point": ["a", "b"]}) == "click"


def test_the_template_library_loads():
    rendered = Template("{% load actions %}{{ action|action_text }}").render(
        Context({"action": {"action": "click", "point": [540, 880]}}))
    assert rendered == "Tap at (540, 880)"
