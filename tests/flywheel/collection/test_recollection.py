"""Env_ERROR → self-healing → re-collection → a new verdict, through a real Celery worker (§2.4.2)."""
import json
from pathlib import Path

import pytest

from devices.models import Device, WorkItem
from devices.registry import discover_devices
from flywheel.collection.launch import launch_run
from flywheel.collection.recollection import recollect
from flywheel.models import CollectionRun, Query, Trajectory
from flywheel.queries.jsonl import import_queries
from tests.flywheel.collection.test_worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
TASKS = Path(__file__).resolve().parents[3] / "simfarm" / "tasks" / "tasks.jsonl"
SHOP_TASK = "shop-add-airpods-l1"  # the shop needs the network: offline, it says so on screen


def import_task(key):
    line = next(line for line in TASKS.read_text().splitlines() if json.loads(line)["key"] == key)
    import_queries(line + "\n")


@pytest.fixture
def one_phone(farm_settings):
    discover_devices()
    first = Device.objects.get(serial=farm_settings.serials[0])
    Device.objects.exclude(pk=first.pk).update(status=Device.Status.OFFLINE)
    return first


def test_a_network_failure_is_healed_and_the_query_collected_again(one_phone, farm_settings,
                                                                     celery_worker_process):
    import_task(SHOP_TASK)
    checked_before = one_phone.health.get("checked_at")
    # The network goes down before every step of the first trajectory; a re-collection is not
    # broken on purpose, and its reset restores the phone's baseline (network on).
    run = launch_run("schema", {"keys": [SHOP_TASK]},
                     config={"phones": 1, "anomaly_rates": {"network_off": 1.0}})
    done = wait_for(lambda: CollectionRun.objects.filter(pk=run.pk, status="done").first()
                    and Trajectory.objects.filter(run=run, recollection_of__isnull=False).exclude(verdict="pending")
                    .first(), timeout=180, what="the re-collected trajectory to be judged")
    first = Trajectory.objects.get(run=run, recollection_of__isnull=True)
    assert first.verdict == "env_error" and first.destination == "env_healing", [
        v.rationale for v in first.votes.all()]
    assert any(s.anomaly and s.anomaly["kind"] == "network_off" for s in first.steps.all())
    # The ledger links the two; the new one was judged and routed like any other.
    assert done.recollection_of_id == first.pk and done.query_id == first.query_id
    assert not any(s.anomaly for s in done.steps.all())
    assert done.verdict == "true" and done.destination == "sft", [v.rationale for v in done.votes.all()]
    assert Trajectory.objects.filter(run=run).count() == 2
    # The phone was checked (healed) after the Env_ERROR, and the run counts the extra work.
    device = Device.objects.get(pk=one_phone.pk)
    assert device.health.get("ok") and device.health.get("checked_at") != checked_before
    run.refresh_from_db()
    assert run.total == 2 and run.completed == 2
    items = WorkItem.objects.filter(kind=f"collect:run:{run.pk}")
    assert sorted(i.status for i in items) == ["done", "done"]
    assert [i.payload.get("recollection_of") for i in items.order_by("pk")] == [None, first.pk]


def test_each_rollout_is_re_collected_a_bounded_number_of_times(one_phone, farm_settings):
    import_task(SHOP_TASK)
    run = launch_run("schema", {"keys": [SHOP_TASK]}, config={"phones": 1, "recollect_limit": 2}, dispatch=False)
    original = Trajectory.objects.create(query=Query.objects.get(key=SHOP_TASK), run=run, line="schema",
                                         status="completed", verdict="env_error")
    first = recollect(original, "network failure")
    assert first is not None and recollect(original, "again") is None  # healing twice queues once
    second_try = Trajectory.objects.create(query=original.query, run=run, line="schema", status="completed",
                                           verdict="env_error", recollection_of=original)
    assert recollect(second_try, "network failure") is not None
    third_try = Trajectory.objects.create(query=original.query, run=run, line="schema", status="completed",
                                          verdict="env_error", recollection_of=second_try)
    assert recollect(third_try, "network failure") is None  # two re-collections per rollout
    run.refresh_from_db()
    assert run.total == 3
