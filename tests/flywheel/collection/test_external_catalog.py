"""The external import's app catalog never touches a phone someone else holds; on an idle phone it
takes a lease for the read and every input it makes passes the safety audit (virtual farm, ADB)."""
import pytest

from devices import composite, leases
from devices.models import AuditEvent, Device, Lease, SafetyRule
from devices.phone import PhoneConnection
from devices.registry import discover_devices
from flywheel.queries.external import CATALOG_HOLDER, catalog_from_a_phone, ingest_external

pytestmark = pytest.mark.django_db


@pytest.fixture
def phones(farm_settings):
    discover_devices()
    devices = list(Device.objects.filter(adb_server=farm_settings.address).order_by("serial"))
    connections = [PhoneConnection.for_device(device) for device in devices]
    for phone in connections:
        composite.forget_labels(phone)  # nothing read before in this process
        phone.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    yield list(zip(devices, connections))
    for phone in connections:
        composite.forget_labels(phone)


def test_phones_others_hold_are_not_touched_and_stored_apps_serve(phones):
    for device, _ in phones:
        leases.acquire(device, holder=f"semi-auto:trajectory:{device.pk}")
    labels, packages = catalog_from_a_phone()
    for _, phone in phones:
        assert phone.foreground()["package"] == "com.android.settings", "nobody pressed Home on a held phone"
    assert "com.sim.notes" in packages and labels == {}   # the registry's stored package list
    result = ingest_external(["Write a note about the meeting"], catalog=(labels, packages))
    assert result["results"][0]["apps"] == ["com.sim.notes"]


def test_an_idle_phone_is_leased_for_the_read_and_its_inputs_are_audited(phones):
    (held, held_phone), (idle, _) = phones[0], phones[1]
    for device, _ in phones[2:]:
        leases.acquire(device, holder="someone-else")
    leases.acquire(held, holder="someone-else")
    SafetyRule.objects.create(name="no video from the launcher", category="prohibited", reason="no video apps",
                              action_types=["click"], element_patterns=["^ClipTube$"])
    labels, packages = catalog_from_a_phone()
    assert labels["Notes"] == "com.sim.notes" and "com.sim.notes" in packages
    assert held_phone.foreground()["package"] == "com.android.settings"
    lease = Lease.objects.get(device=idle)
    assert lease.holder == CATALOG_HOLDER and lease.released_at is not None   # taken for the read, given back
    assert Device.objects.get(pk=idle.pk).status == "idle"
    event = AuditEvent.objects.get()                     # the tap that would identify ClipTube
    assert event.holder == CATALOG_HOLDER and event.device == idle and "ClipTube" in event.element["text"]
    assert "ClipTube" not in labels
