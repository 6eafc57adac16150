"""The safety audit in front of the executor, live on the farm, with the rules of the database
(seeded by migrations 0003 and 0007): paying on the shopping checkout is blocked and recorded."""
import pytest

from devices.executor import ActionExecutor
from devices.models import AuditEvent, Device, SafetyRule
from tests.devices.conftest import find, texts

pytestmark = pytest.mark.django_db


def orders(phone):
    return phone.shell("content query --uri content://com.sim.shop/orders")


def test_default_rules_are_seeded():
    names = set(SafetyRule.objects.values_list("name", flat=True))
    assert {"Payment confirmation", "Factory reset", "Delete account", "Typing a card number"} <= names
    assert set(SafetyRule.objects.values_list("category", flat=True)) >= {"payment", "privacy", "irreversible"}
    assert {"Purchase or payment (by meaning)", "Money transfer (by meaning)", "Irreversible deletion (by meaning)",
            "Factory reset (by meaning)"} <= names


def test_pay_now_is_blocked_and_recorded(phone):
    device = Device.objects.create(serial=phone.serial, adb_server=phone.address)
    executor = ActionExecutor(phone, holder="collector-7", seed=0)
    phone.shell("am start -n com.sim.shop/.PaymentConfirmActivity")
    before = orders(phone)
    pay = find(phone, text="Pay now")

    result = executor.execute({"action": "click", "point": list(pay.center)})

    assert result.blocked and not result.ok and result.commands == []
    assert "Payment confirmation" in result.reason
    assert orders(phone) == before and "Pay now" in texts(phone)  # nothing was paid
    event = AuditEvent.objects.get()
    assert event.device == device and event.holder == "collector-7"
    assert event.rule.name == "Payment confirmation" and event.rule.category == "payment"
    assert event.action["point"] == list(pay.center) and "Pay now" in event.element["text"]

    cancel = find(phone, text="Cancel")
    assert executor.execute({"action": "click", "point": list(cancel.center)}).ok
    assert AuditEvent.objects.count() == 1
    assert "Pay now" not in texts(phone)


def test_a_disabled_rule_no_longer_blocks(phone):
    # "Pay now" is judged by two rules: its words (0003) and its meaning (0007)
    SafetyRule.objects.filter(name__in=["Payment confirmation", "Purchase or payment (by meaning)"]).update(enabled=False)
    phone.shell("am start -n com.sim.shop/.PaymentConfirmActivity")
    result = ActionExecutor(phone).execute({"action": "click", "point": list(find(phone, text="Pay now").center)})
    assert result.ok and "Paid" in orders(phone)
    phone.shell("pm clear com.sim.shop")


def test_factory_reset_is_blocked_on_the_settings_page(phone):
    phone.shell("am start -n com.android.settings/.ResetDashboardActivity")
    erase = find(phone, text="Erase all data (factory reset)")
    assert erase is not None, texts(phone)
    result = ActionExecutor(phone).execute({"action": "click", "point": list(erase.center)})
    assert result.blocked and AuditEvent.objects.get().rule.category == "irreversible"
    assert AuditEvent.objects.get().device is None  # the phone has no Device row: still recorded
