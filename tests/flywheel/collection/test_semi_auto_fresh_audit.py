"""The semi-automatic line: the person verifies a step on the stored screen, which may be minutes
old; the safety audit judges the screen as it is when the action runs (virtual farm over ADB)."""
import pytest

from devices.models import AuditEvent
from devices.phone import PhoneConnection
from devices.registry import discover_devices
from flywheel.collection import semi_auto
from flywheel.models import App, Query
from tests.devices.conftest import find, texts

pytestmark = pytest.mark.django_db


def orders(phone):
    return phone.shell("content query --uri content://com.sim.shop/orders")


def test_a_screen_that_changed_under_the_person_is_judged_as_it_is_now(farm_settings, role_users):
    discover_devices()
    query = Query.objects.create(key="shop-fresh-audit", text="Look at the shop", tier="L1",
                                 reset={"force_stop": ["com.sim.shop"], "clear": [], "home": True})
    query.set_apps([App.objects.get_or_create(package="com.sim.shop")[0]])
    trajectory = semi_auto.start_session(query, role_users["annotator"])
    step = semi_auto.prepare_step(trajectory)            # stored: the home screen
    phone = PhoneConnection.for_device(trajectory.device)
    phone.shell("am start -n com.sim.shop/.PaymentConfirmActivity")   # meanwhile the screen changed
    pay = find(phone, text="Pay now")
    before = orders(phone)
    try:
        with pytest.raises(semi_auto.SessionError, match="blocked by the safety audit"):
            semi_auto.execute_step(step, {"action": "click", "point": list(pay.center)}, cot={})
        assert orders(phone) == before and "Pay now" in texts(phone)   # nothing was paid
        event = AuditEvent.objects.get()
        assert event.rule.name == "Payment confirmation" and "Pay now" in event.element["text"]
        step.refresh_from_db()
        assert step.executed_action is None and step.audit["blocked"]
    finally:
        phone.shell("pm clear com.sim.shop")
        semi_auto.release_phone(trajectory)
