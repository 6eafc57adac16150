"""Discovery and health checks against the virtual farm over ADB (no mocks)."""
import socket

import pytest

from devices import health, leases, scheduling
from devices.models import Device
from devices.registry import discover_devices

pytestmark = pytest.mark.django_db


def farm_control(farm, request):
    """The farm's test hook (host:sim-disconnect / host:sim-connect) to make a phone vanish."""
    with socket.create_connection(("127.0.0.1", farm.port), timeout=5) as sock:
        sock.sendall(b"%04x" % len(request) + request.encode())
        assert sock.recv(4) == b"OKAY", request


def test_discovery_records_readiness_profiles(farm_settings):
    summary = discover_devices()
    assert summary["seen"] == len(farm_settings.serials) == Device.objects.count()
    phone = Device.objects.get(serial=farm_settings.serials[0])
    assert phone.status == "idle" and phone.health["ok"]
    assert phone.model and phone.os_version and "x" in phone.resolution
    assert "com.android.settings" in phone.installed_apps or phone.installed_apps
    assert any(account.startswith("com.google:") for account in phone.accounts)
    assert phone.battery is not None and phone.network["wifi"] in (True, False)
    profile = phone.readiness_profile
    assert set(profile) == {"device_type", "resolution", "installed_apps", "accounts", "risk_level"}


def test_a_vanished_phone_goes_offline_and_is_readmitted_after_a_passing_check(farm_settings):
    discover_devices()
    serial = farm_settings.serials[-1]
    farm_control(farm_settings, f"host:sim-disconnect:{serial}")
    try:
        discover_devices()
        assert Device.objects.get(serial=serial).status == "offline"
    finally:
        farm_control(farm_settings, f"host:sim-connect:{serial}")
    discover_devices()
    phone = Device.objects.get(serial=serial)
    assert phone.status == "idle" and phone.health["ok"]


def test_an_unreachable_phone_is_quarantined_and_its_work_moves_to_a_spare(farm_settings):
    discover_devices()
    broken, spare = Device.objects.order_by("serial")[:2]
    scheduling.enqueue("collect", {"query": "q1"})
    lease, item = scheduling.pull_work_with_lease("worker-1", devices=[broken])
    assert item.device == broken
    farm_control(farm_settings, f"host:sim-disconnect:{broken.serial}")
    try:
        for _ in range(health.QUARANTINE_AFTER_FAILURES):
            health.check_device(Device.objects.get(pk=broken.pk))
        broken.refresh_from_db()
        assert broken.status == "quarantined" and not leases.current_lease(broken)
        _, moved = scheduling.pull_work_with_lease("worker-2", devices=[spare])
        assert moved.pk == item.pk and moved.device == spare
    finally:
        farm_control(farm_settings, f"host:sim-connect:{broken.serial}")
    health.check_device(Device.objects.get(pk=broken.pk))
    assert Device.objects.get(pk=broken.pk).status == "idle"
