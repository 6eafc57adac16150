"""The `action_text` filter says in a few words what a step did, and never raises."""
import pytest
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


def test_app_names_are_labels_never_package_ids():
    from flywheel.rules.app_names import display_name, name_from_package

    assert name_from_package("com.sim.translator") == "Translator"
    assert name_from_package("com.example.my_notes") == "My notes"
    assert name_from_package("com.android.settings") == "Settings"
    assert display_name("com.sim.translator", "translator") == "Translator"  # only the id's last part
    assert display_name("com.sim.translator", "com.sim.translator") == "Translator"
    assert display_name("com.sim.translator", "Translate & Go") == "Translate & Go"


@pytest.mark.django_db
def test_the_readable_filters_put_settings_and_times_in_words(settings):
    from flywheel.models import App
    from flywheel.templatetags.readable import app_name, moment, settings_items

    settings.TIME_ZONE = "Europe/Paris"
    App.objects.create(package="com.sim.translator", label="Translator")
    assert app_name("com.sim.translator") == "Translator" and app_name("com.sim.shop") == "Shop"
    assert moment("2026-12-04T13:05:09+00:00") == "4 Dec 2026, 14:05"   # the site's time zone
    assert moment("not a time") == "not a time" and moment(None) == "—"
    items = settings_items({"apps": ["com.sim.translator"], "max_steps": 25, "single_app": True,
                            "anomaly_rates": {"popup": 0.1, "app_crash": 0.05}, "tags": [], "timeout_s": 300.0})
    assert items == [("Apps", "Translator"), ("Maximum steps", "25"), ("One app only", "yes"),
                     ("Anomaly injection (per step)", "popup 0.1; app crash 0.05"), ("Tags", "—"),
                     ("Timeout per trajectory (s)", "300")]
    assert settings_items("not a dict") == []
    rendered = Template('{% include "flywheel/_settings.html" with settings=s testid="t" empty="every query" %}')
    assert "every query" in rendered.render(Context({"s": {}}))
    assert "{" not in rendered.render(Context({"s": {"model": {"tiny": {}}, "lr": 0.001}}))


@pytest.mark.django_db
def test_query_lists_name_apps_by_label(client_as):
    from flywheel.models import App, Query

    query = Query.objects.create(key="label-1", text="Open Swap", tier="L1", verification={})
    query.set_apps([App.objects.create(package="com.sim.translator", label="Translator"),
                    App.objects.create(package="com.sim.shop")])
    page = client_as("manager").get("/queries/").content.decode()
    assert "<td>Translator, Shop</td>" in page and "com.sim." not in page
