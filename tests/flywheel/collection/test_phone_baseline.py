"""A task starts from the phone's recorded baseline, and a task already done is flagged, not collected."""
import json
from pathlib import Path

import pytest

from devices.models import Device
from devices.phone import PhoneConnection
from devices.registry import discover_devices
from flywheel.collection.driver import drive_host
from flywheel.collection.launch import launch_run
from flywheel.models import App, Query, SftEntry, Trajectory
from flywheel.queries.jsonl import import_queries

pytestmark = pytest.mark.django_db(transaction=True)
TASKS = Path(__file__).resolve().parents[3] / "simfarm" / "tasks" / "tasks.jsonl"


def task_lines(*keys):
    records = {json.loads(line)["key"]: line for line in TASKS.read_text().splitlines() if line.strip()}
    return "\n".join(records[key] for key in keys) + "\n"


@pytest.fixture
def one_phone(farm_settings):
    """sim-0001 (it has every app) registered with its baseline; the other phones kept out."""
    discover_devices()
    first = Device.objects.get(serial=farm_settings.serials[0])
    Device.objects.exclude(pk=first.pk).update(status=Device.Status.OFFLINE)
    yield first
    from devices.reset import reset_phone

    reset_phone(PhoneConnection.for_device(first), {"force_stop": "all", "home": True},
                baseline=Device.objects.get(pk=first.pk).baseline)


def test_a_task_after_airplane_mode_starts_with_the_network_back(one_phone, farm_settings):
    """The new user's run: `settings-airplane-boarding` then `x-parallel-dnd-and-mute` on one phone
    (schema-guided, so the built-in policy knows both paths and only the phone's state can fail it)."""
    assert one_phone.baseline["global:airplane_mode_on"] == "0"
    import_queries(task_lines("settings-airplane-boarding", "x-parallel-dnd-and-mute"))
    run = launch_run("schema", {"keys": ["settings-airplane-boarding", "x-parallel-dnd-and-mute"]},
                     config={"phones": 1}, dispatch=False)
    drive_host(run.pk, farm_settings.address, 1)
    airplane = Trajectory.objects.get(run=run, query__key="settings-airplane-boarding")
    dnd = Trajectory.objects.get(run=run, query__key="x-parallel-dnd-and-mute")
    assert airplane.started_at < dnd.started_at and airplane.device_id == dnd.device_id == one_phone.pk
    # The first task did put the phone in airplane mode (System A read it at its end)...
    assert airplane.votes.get(system="A").vote == "true", [v.rationale for v in airplane.votes.all()]
    # ...and the second one started from the baseline, network on.
    assert dnd.verdict == "true" and dnd.destination == "sft", [v.rationale for v in dnd.votes.all()]


def test_a_task_whose_success_check_already_passes_is_flagged_not_collected(one_phone, farm_settings):
    query = Query.objects.create(key="wifi-stays-on", text="Make sure Wi-Fi is on", tier="L1",
                                 verification={"terminal": [{"check": "settings", "namespace": "global",
                                                             "key": "wifi_on", "equals": "1"}]},
                                 reset={"force_stop": ["com.android.settings"], "clear": [], "home": True})
    query.set_apps([App.objects.get_or_create(package="com.android.settings")[0]])
    run = launch_run("automatic", {"keys": ["wifi-stays-on"]}, config={"phones": 1}, dispatch=False)
    drive_host(run.pk, farm_settings.address, 1)
    trajectory = Trajectory.objects.get(run=run)
    assert not trajectory.steps.exists()
    assert trajectory.status == "interrupted" and "already passed before any action" in trajectory.stop_reason
    assert "already passed" in trajectory.flag
    assert trajectory.destination == "adjudication" and trajectory.verdict == "undetermined"
    assert not SftEntry.objects.filter(trajectory=trajectory).exists()
    assert not trajectory.votes.exists()


def test_the_phone_is_torn_down_between_two_of_its_tasks_and_the_run_goes_on(one_phone, farm_settings, settings):
    """Periodic teardown (devices/teardown.py): after every 2 tasks, before the next one."""
    settings.TEARDOWN_EVERY_TASKS = 2
    keys = ["settings-airplane-boarding", "x-parallel-dnd-and-mute", "settings-airplane-boarding"]
    import_queries(task_lines(*keys[:2]))
    run = launch_run("schema", {"keys": keys[:2]}, config={"phones": 1, "repeats": 2}, dispatch=False)
    drive_host(run.pk, farm_settings.address, 1)
    run.refresh_from_db()
    assert run.status == "done" and Trajectory.objects.filter(run=run).count() == 4
    phone = Device.objects.get(pk=one_phone.pk)
    torn = phone.last_teardown
    assert torn["reasons"] == ["2 tasks since the last teardown"] and torn["problems"] == []
    # once, between the second task's end and the third's start (none after the last: no work left)
    second, third = Trajectory.objects.filter(run=run).order_by("started_at")[1:3]
    assert second.finished_at.isoformat() < torn["at"] < third.started_at.isoformat()
    assert phone.tasks_since_teardown == 2
