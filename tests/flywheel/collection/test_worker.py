"""Collection through a real Celery worker and Redis; killing the worker; a phone that drops."""
import os
import signal
import socket
import time

import pytest
from django.utils import timezone

from devices.models import Device, Lease, WorkItem
from devices.registry import discover_devices
from flywheel.collection.driver import drive_host
from flywheel.collection.launch import launch_run
from flywheel.collection.recovery import recover_interrupted
from flywheel.models import CollectionRun, Trajectory
from tests.flywheel.collection.test_runs import make_query

pytestmark = pytest.mark.django_db(transaction=True)

LONG_PATH = {"mode": "tap", "summary": "scroll the Settings list up and down for a while", "steps": [
    {"action": "open", "app": "com.android.settings"}] + [
    {"action": "swipe", "direction": "up" if i % 2 else "down"} for i in range(30)] + [
    {"action": "terminate", "status": "success"}]}


def wait_for(predicate, timeout=90, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def farm_control(farm, request):
    with socket.create_connection(("127.0.0.1", farm.port), timeout=5) as sock:
        sock.sendall(b"%04x" % len(request) + request.encode())
        assert sock.recv(4) == b"OKAY"


@pytest.mark.parametrize("line", ["automatic", "schema", "external"])
def test_each_line_is_carried_out_by_a_real_worker(line, farm_settings, celery_worker_process):
    discover_devices()
    if line == "external":
        from flywheel.queries.external import ingest_external

        assert ingest_external(["Open Settings and show the Bluetooth page",
                                "Open Settings, go to Bluetooth"])["kept"] == 2
        query_filter = {"source": "external"}
    else:
        for i in range(2):
            make_query(f"w-{line}-{i}", tags=(line,))
        query_filter = {"tags": [line]}
    run = launch_run(line, query_filter, config={"phones": 2, "max_steps": 8})
    wait_for(lambda: CollectionRun.objects.get(pk=run.pk).status == "done", what="the run to finish")
    run.refresh_from_db()
    assert run.completed == 2
    trajectories = list(Trajectory.objects.filter(run=run))
    assert len(trajectories) == 2 and all(t.line == line and t.steps.exists() for t in trajectories)
    assert all(t.destination for t in trajectories), [
        (t.status, t.stop_reason, t.verdict) for t in trajectories] + [
        (w.status, w.note) for w in WorkItem.objects.all()]
    if line != "external":
        assert {t.destination for t in trajectories} == {"sft"}


def test_killing_a_worker_mid_trajectory_loses_nothing(farm_settings, celery_worker_process):
    discover_devices()
    make_query("long", known_path=LONG_PATH, tags=("long",),
               verification={"terminal": [], "milestones": []})
    # Schema-guided: the only line that shows the policy the (long) known path.
    run = launch_run("schema", {"tags": ["long"]}, config={"phones": 1, "max_steps": 40})
    trajectory = wait_for(lambda: Trajectory.objects.filter(run=run, steps__index__gte=2).first(),
                          what="a trajectory with steps")
    os.kill(celery_worker_process.pid, signal.SIGKILL)
    celery_worker_process.wait(timeout=10)
    steps_at_kill = trajectory.steps.count()
    assert Trajectory.objects.get(pk=trajectory.pk).status == "running"
    # The lease frees on expiry; recovery routes the interrupted trajectory and re-queues the work.
    wait_for(lambda: not Lease.objects.filter(released_at__isnull=True,
                                              expires_at__gt=timezone.now()).exists(),
             timeout=30, what="the lease to expire")
    summary = recover_interrupted(stale_after=timezone.timedelta(seconds=0))
    assert summary["trajectories"] == 1 and summary["work_items"] == 1
    trajectory.refresh_from_db()
    assert trajectory.status == "interrupted" and trajectory.destination, trajectory.stop_reason
    assert trajectory.steps.count() == steps_at_kill
    assert WorkItem.objects.get(kind=f"collect:run:{run.pk}").status == "queued"
    assert not Device.objects.filter(status="leased").exists()


def test_a_phone_that_drops_is_quarantined_and_its_query_goes_to_another(farm_settings):
    discover_devices()
    make_query("drop", known_path=LONG_PATH, tags=("drop",), verification={"terminal": [], "milestones": []})
    run = launch_run("schema", {"tags": ["drop"]}, config={"phones": 2, "max_steps": 40}, dispatch=False)
    first, second = Device.objects.order_by("serial")[:2]
    import threading

    def drop_when_started():
        from django.db import connection

        try:
            wait_for(lambda: Trajectory.objects.filter(run=run, device=first, steps__index__gte=1).exists(),
                     what="the first phone to start")
            farm_control(farm_settings, f"host:sim-disconnect:{first.serial}")
        finally:
            connection.close()  # this thread's own database connection

    # Only the first phone is idle at first, so it takes the query; the second joins afterwards.
    Device.objects.filter(pk=second.pk).update(status="offline")
    dropper = threading.Thread(target=drop_when_started)
    dropper.start()
    try:
        drive_host(run.pk, farm_settings.address, 1)
        dropper.join(60)
        assert Device.objects.get(pk=first.pk).status == "quarantined"
        lost = Trajectory.objects.get(run=run, device=first)
        assert lost.status == "interrupted" and lost.destination and "phone lost" in lost.stop_reason
        assert WorkItem.objects.get(kind=f"collect:run:{run.pk}").status == "queued"
        Device.objects.filter(pk=second.pk).update(status="idle")
        drive_host(run.pk, farm_settings.address, 1)
        retried = Trajectory.objects.get(run=run, device=second)
        assert retried.status == "completed"
        assert WorkItem.objects.get(kind=f"collect:run:{run.pk}").status == "done"
    finally:
        farm_control(farm_settings, f"host:sim-connect:{first.serial}")
