"""External queries: anonymised before storage, cleaned with reasons, replayed on the farm."""
import json

import pytest

from devices.models import Device
from devices.registry import discover_devices
from flywheel.collection.driver import drive_host
from flywheel.collection.launch import launch_run
from flywheel.models import Query, Trajectory
from flywheel.queries.external import ingest_external

PII = ["alice.smith@example.com", "4111 1111 1111 1111", "13812345678", "Alice", "221B Baker Street"]
RECORDS = [
    "Open Settings and turn on Bluetooth, then email alice.smith@example.com",
    "Pay with card 4111 1111 1111 1111 in ShopMart",
    "Text 13812345678 in Chatter that I'm late",
    "Send a message to Alice in Chatter",
    "Deliver to 221B Baker Street via ShopMart",
    "tell me a joke",
    "Transfer $500 to my landlord",
    "make me a coffee",
]


@pytest.mark.django_db(transaction=True)
def test_no_pii_reaches_the_database_and_removals_keep_their_reason(farm_settings):
    discover_devices()
    summary = ingest_external(RECORDS)
    assert summary["kept"] >= 4 and summary["rejected"] >= 3
    dump = json.dumps(list(Query.objects.values()), default=str)
    for secret in PII:
        assert secret not in dump, secret
    reasons = dict(Query.objects.filter(status="rejected").values_list("text", "status_reason"))
    assert reasons["tell me a joke"].startswith("non_executable")
    assert reasons["Transfer $500 to my landlord"].startswith("sensitive")
    settings_query = Query.objects.get(text__startswith="Open Settings")
    assert settings_query.app_packages == ["com.android.settings"]
    assert settings_query.gate_results["anonymization"] == {"EMAIL": 1}
    chat = Query.objects.get(text__startswith="Send a message")
    assert "[NAME]" in chat.text and chat.app_packages == ["com.sim.chat"]


@pytest.mark.django_db(transaction=True)
def test_kept_external_queries_are_replayed_like_the_automatic_line(farm_settings):
    discover_devices()
    ingest_external(["Open Settings please and check Bluetooth"])
    run = launch_run("external", {"source": "external"}, config={"phones": 1, "max_steps": 6}, dispatch=False)
    assert run.total == 1
    drive_host(run.pk, farm_settings.address, 1)
    trajectory = Trajectory.objects.get(run=run)
    assert trajectory.line == "external" and trajectory.steps.exists()
    assert trajectory.destination in ("sft", "ecdm", "env_healing", "adjudication")
    assert not Device.objects.filter(status="leased").exists()


@pytest.mark.django_db
def test_external_records_cannot_bring_their_own_checks():
    """A verification spec is trusted data; an external record's is dropped, as are bad apps/tiers."""
    smuggled = {"terminal": [{"check": "shell", "cmd": "rm -rf /sdcard"}], "milestones": []}
    summary = ingest_external([
        {"text": "Open Settings and turn on Bluetooth", "apps": ["com.android.settings"], "verification": smuggled},
        {"text": "Open ShopMart and show my cart", "apps": ["shop; reboot"], "tier": "L9x"},
    ], catalog=({"ShopMart": "com.sim.shop"}, ["com.sim.shop"]))
    assert summary["kept"] == 2
    settings_query = Query.objects.get(text__startswith="Open Settings")
    assert settings_query.verification == {}
    shop = Query.objects.get(text__startswith="Open ShopMart")
    assert shop.app_packages == ["com.sim.shop"] and shop.tier == "L2"
