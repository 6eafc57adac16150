"""A Redis broker restarted without persistence forgets queued driving tasks: beat dispatches the
runs again, and every work item is still collected exactly once (a real worker, a real Redis)."""
import os
import socket
import subprocess
import time

import pytest
from celery import Celery
from django.conf import settings
from django.utils import timezone

from devices.hosts import host_queue
from devices.models import Device, WorkItem
from devices.registry import discover_devices
from flywheel.collection.launch import launch_run
from flywheel.models import CollectionRun, Trajectory
from scripts.services import free_port, start_redis
from tests.conftest import BIN, ROOT, process_env, stop
from tests.flywheel.collection.test_runs import make_query
from tests.flywheel.collection.test_worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


class PrivateRedis:
    """redis-server on a free port, no persistence (`--save "" --appendonly no`)."""

    def __init__(self, log_path):
        self.port, self.log_path = free_port(), log_path
        self.process = start_redis(self.port, log_path)

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def restart(self):
        """Killed and started again: everything it held (queued tasks) is gone."""
        self.process.kill()
        self.process.wait(timeout=10)
        self.process = start_redis(self.port, self.log_path)

    def stop(self):
        stop(self.process)


@pytest.fixture
def broker(tmp_path):
    redis = PrivateRedis(tmp_path / "redis.log")
    yield redis
    redis.stop()


def client_for(url):
    """This test's own Celery client of the private broker (same key prefix as the worker)."""
    client = Celery("flywheel-test", broker=url, set_as_current=False)  # shared tasks keep their app
    client.conf.broker_transport_options = dict(settings.CELERY_BROKER_TRANSPORT_OPTIONS)
    client.conf.task_default_queue = "default"
    return client


@pytest.fixture
def worker_on(broker, farm_settings, tmp_path):
    """A real Celery worker on every queue, its broker and channel layer on the private Redis."""
    name = f"restart{os.getpid()}@{socket.gethostname()}"
    queues = ",".join(["default", "collection", "evaluation", "repair", "training", "benchmark",
                       host_queue(farm_settings.address)])
    log = open(tmp_path / "worker.log", "wb")
    process = subprocess.Popen(
        [str(BIN / "celery"), "-A", "config", "worker", "--pool", "solo", "-l", "info", "-Q", queues,
         "-n", name, "--without-mingle", "--without-gossip"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        env=process_env(REDIS_URL=broker.url, CELERY_BROKER_URL=broker.url, COLLECTION_LEASE_SECONDS="6",
                        COLLECTION_REDISPATCH_AFTER_S="0"))
    client = client_for(broker.url)
    deadline = time.monotonic() + 60
    while not client.control.ping(timeout=0.5, destination=[name]):
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise RuntimeError("worker did not start: " + (tmp_path / "worker.log").read_text()[-3000:])
    yield client
    stop(process)


def send_run(client, run, address):
    """What dispatch_run does, through the private broker: one driving task for the host."""
    CollectionRun.objects.filter(pk=run.pk).update(dispatched_at=timezone.now())
    client.send_task("flywheel.tasks.collect_on_host", (run.pk, address, 1), queue=host_queue(address))


def test_runs_whose_tasks_redis_forgot_are_dispatched_again_and_each_item_runs_once(
        broker, worker_on, farm_settings):
    discover_devices()
    Device.objects.exclude(serial=farm_settings.serials[0]).update(status=Device.Status.OFFLINE)
    for i in range(4):
        make_query(f"restart-{i}", tags=("restart",))
    first = launch_run("automatic", {"tags": ["restart"]}, config={"phones": 1}, dispatch=False)
    second = launch_run("automatic", {"tags": ["restart"], "limit": 2}, config={"phones": 1}, dispatch=False)
    send_run(worker_on, first, farm_settings.address)
    send_run(worker_on, second, farm_settings.address)

    # One phone, one solo worker: the first run is collected while the second's task waits in Redis.
    wait_for(lambda: Trajectory.objects.filter(run=first).exclude(verdict="pending").exists(),
             what="the first run to have collected something")
    assert CollectionRun.objects.get(pk=first.pk).status == "running"
    assert not Trajectory.objects.filter(run=second).exists()
    broker.restart()  # the second run's driving task is gone with it

    def beat_until_done():
        worker_on.send_task("flywheel.tasks.redispatch_runs", queue="default")  # what beat sends every 30 s
        return CollectionRun.objects.filter(pk__in=[first.pk, second.pk], status="done").count() == 2

    wait_for(beat_until_done, timeout=120, what="both runs to finish")
    for run, size in ((first, 4), (second, 2)):
        items = list(WorkItem.objects.filter(kind=f"collect:run:{run.pk}"))
        assert len(items) == size and {item.status for item in items} == {"done"}
        assert all(len(item.payload["trajectories"]) == 1 for item in items)
        trajectories = Trajectory.objects.filter(run=run)
        assert trajectories.count() == size
        assert sorted(t.pk for t in trajectories) == sorted(item.payload["trajectories"][0] for item in items)
        assert all(t.destination for t in trajectories)


def test_no_task_is_handed_out_again_while_it_runs():
    """Redis hands an unacknowledged task to another worker after the visibility timeout: a task
    acknowledged late must end before it, and the collection driver is acknowledged on receipt."""
    from config.celery import app
    from flywheel.tasks import collect_on_host

    app.loader.import_default_modules()
    visibility = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    assert collect_on_host.acks_late is False and collect_on_host.time_limit
    assert collect_on_host.soft_time_limit > settings.COLLECTION_TASK_BUDGET_S  # the budget ends it first
    assert app.conf.task_reject_on_worker_lost and app.conf.task_time_limit < visibility
    late = [task for name, task in app.tasks.items() if not name.startswith("celery.") and task.acks_late]
    assert late and all((task.time_limit or app.conf.task_time_limit) < visibility for task in late)
    assert "flywheel.tasks.redispatch_runs" in {entry["task"] for entry in app.conf.beat_schedule.values()}


def test_a_driver_hands_the_rest_of_a_run_to_a_fresh_task_when_its_budget_is_spent(farm_settings):
    from flywheel.collection.driver import drive_host

    discover_devices()
    for i in range(2):
        make_query(f"budget-{i}", tags=("budget",))
    run = launch_run("automatic", {"tags": ["budget"]}, config={"phones": 1}, dispatch=False)
    summary = drive_host(run.pk, farm_settings.address, 1, budget_s=0)
    run.refresh_from_db()
    assert summary["continued"] and run.dispatched_at is not None  # a fresh task was sent
    assert not Trajectory.objects.filter(run=run).exists()
    assert not Device.objects.filter(status="leased").exists()
    drive_host(run.pk, farm_settings.address, 1)  # the fresh task
    run.refresh_from_db()
    assert run.status == "done" and Trajectory.objects.filter(run=run).count() == 2
