"""Issue #38: a phone host's worker with a connection pool (DATABASE_POOL_SIZE) drives more phones
than it holds connections — each phone thread hands its connection back between steps — and
collects every trajectory as without one."""
import time

import psycopg
import pytest

from devices.registry import discover_devices
from flywheel.collection.launch import launch_run
from flywheel.models import CollectionRun, Trajectory
from tests import conftest
from tests.flywheel.collection.test_runs import make_query

pytestmark = pytest.mark.django_db(transaction=True)

# libpq names the worker's connections by PGAPPNAME, so the test can count them on the server.
WORKER_ENV = {"DATABASE_POOL_SIZE": "2", "PGAPPNAME": "pooled-phone-host"}


def worker_connections(server) -> int:
    return server.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                          [WORKER_ENV["PGAPPNAME"]]).fetchone()[0]


def test_three_phones_share_two_connections_and_collect_every_trajectory(farm_settings, celery_worker_process):
    discover_devices()
    for i in range(3):
        make_query(f"pooled-{i}", tags=("pooled",))
    run = launch_run("automatic", {"tags": ["pooled"]}, config={"phones": 3, "max_steps": 8})
    most, deadline = 0, time.monotonic() + 120
    with psycopg.connect(conftest.test_database_url(), autocommit=True) as server:
        while time.monotonic() < deadline and CollectionRun.objects.get(pk=run.pk).status != "done":
            most = max(most, worker_connections(server))
            time.sleep(0.05)
    run.refresh_from_db()
    assert run.status == "done" and run.completed == 3
    trajectories = list(Trajectory.objects.filter(run=run))
    assert len({t.device_id for t in trajectories}) == 3  # one per phone, more phones than connections
    assert all(t.steps.filter(executed_action__isnull=False).exists() and t.destination for t in trajectories), (
        [(t.status, t.stop_reason, t.verdict) for t in trajectories],
        celery_worker_process.log_path.read_text()[-6000:])  # what the worker said, when it fails
    assert 1 <= most <= 2, f"the worker held {most} connections with a pool of 2"
    # No thread waited out the pool: a phone joining its lease keeper while holding a connection the
    # keeper waited for stalled the host for the pool's 30 s, and its leases ran out meanwhile.
    worker_log = celery_worker_process.log_path.read_text()
    assert "couldn't get a connection" not in worker_log, worker_log[-6000:]
