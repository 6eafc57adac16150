"""Periodic environment teardown (ClawGUI §3.2.1) on a phone of the farm: what is due and why, what
a teardown puts back, an account it cannot remove, and a run whose phone is torn down between two
of its own tasks without stalling."""
import pytest

from devices import teardown
from devices.models import Device
from devices.phone import PhoneConnection
from devices.registry import discover_devices
from simfarm.farm import Farm
from simfarm.serve import ServerThread

pytestmark = pytest.mark.django_db
LIMITS = {"every": 50, "max_notifications": 10, "max_storage_pct": 90}


def test_what_makes_a_phone_due():
    quiet = {"notifications": 2, "storage_used_pct": 40, "extra_accounts": []}
    assert teardown.teardown_reasons(3, quiet, **LIMITS) == []
    assert teardown.teardown_reasons(50, quiet, **LIMITS) == ["50 tasks since the last teardown"]
    drifted = {"notifications": 11, "storage_used_pct": 91, "extra_accounts": ["com.example:intruder"]}
    assert teardown.teardown_reasons(0, drifted, **LIMITS) == [
        "11 notifications", "storage 91% used", "accounts its baseline did not hold: com.example:intruder"]
    unreadable = {"notifications": None, "storage_used_pct": None, "extra_accounts": []}
    assert teardown.teardown_reasons(0, unreadable, **{**LIMITS, "every": 0}) == []   # 0: never by count


@pytest.fixture
def farm_phone(settings):
    farm = Farm(devices=1, seed=0)
    with ServerThread(farm) as server:
        settings.ADB_SERVERS = [f"127.0.0.1:{server.port}"]
        discover_devices()
        device = Device.objects.get()
        yield farm.phones[device.serial], device, PhoneConnection.for_device(device)


def test_a_drifted_phone_is_put_back_to_its_baseline(farm_phone, settings):
    virtual, device, phone = farm_phone
    assert device.baseline and device.baseline_accounts == ["com.google:simuser0001@gmail.com"]
    assert teardown.maybe_tear_down(phone, device) is None                  # a fresh phone is not due
    for n in range(11):
        phone.shell(f"cmd notification post -t 'Offer {n}' offer{n} 'Half price today'")
    phone.shell("settings put global zen_mode 1")
    virtual.app_state("com.sim.shop")["logged_in"] = True
    assert teardown.due(phone, device) == ["11 notifications"]
    record = teardown.maybe_tear_down(phone, device)
    assert record["reasons"] == ["11 notifications"] and record["problems"] == []
    assert "pm clear com.sim.shop" in record["commands"] and "settings put global zen_mode 0" in record["commands"]
    assert record["after"]["notifications"] == 0 and virtual.notifications == []
    assert phone.shell("settings get global zen_mode").strip() == "0"
    assert virtual.app_state("com.sim.shop").get("logged_in") is False
    device.refresh_from_db()
    assert device.last_teardown["reasons"] == ["11 notifications"] and device.tasks_since_teardown == 0
    assert device.status == "idle"


def test_every_n_tasks_and_an_account_a_shell_cannot_remove(farm_phone, settings):
    virtual, device, phone = farm_phone
    settings.TEARDOWN_EVERY_TASKS = 2
    teardown.count_task(device)
    assert teardown.due(phone, device) == []
    teardown.count_task(device)
    assert Device.objects.get(pk=device.pk).tasks_since_teardown == 2
    assert teardown.due(phone, device) == ["2 tasks since the last teardown"]
    virtual.accounts.append(("com.example", "intruder"))
    record = teardown.maybe_tear_down(phone, device)
    assert record["problems"] == ["accounts a shell cannot remove: com.example:intruder"]
    device.refresh_from_db()
    assert device.status == "quarantined" and device.health["quarantined_by"] == "teardown"
    assert "a person must remove them" in device.health["quarantine_reason"]
