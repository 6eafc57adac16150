"""The host driver of collection runs: the Celery task on one ADB host leases idle phones there and
drives them concurrently, one thread per phone, each pulling the next work item its profile
satisfies and collecting it (a trajectory from a fresh reset to its verdict) until the task's
time budget is spent; a fresh task carries on.
"""
import logging
import threading
import time
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import close_old_connections, transaction

from devices import health, leases, scheduling, teardown
from devices.db_pool import release_connection
from devices.models import Device, WorkItem
from devices.phone import PhoneConnection
from flywheel.collection.engine import (
    CollectionConfig,
    PhoneLost,
    crashed,
    end_trajectory,
    finish_trajectory,
    route_ended,
    run_trajectory,
)
from flywheel.collection.launch import dispatch_run, refresh_progress, run_is_cancelled
from flywheel.collection.step_writer import batched_step_writes
from flywheel.models import CollectionRun, Destination, Line, Query, Trajectory
from flywheel.policies import policy_for
from flywheel.pools.rl import metabolize_group
from flywheel.rules.stops import Stop, StopKind

log = logging.getLogger(__name__)


def collect_item(run, item, device, lease):
    """One work item: a trajectory from a fresh reset to its verdict. Returns whether this holder
    ended it: one that recovery ended meanwhile is recovery's to settle."""
    query = Query.objects.get(pk=item.payload["query_id"])
    recollection_of = item.payload.get("recollection_of")
    # A benchmark rollout's destination is its evaluation from the start: never a pool, never the ECDM.
    destination = Destination.BENCHMARK if run.line == Line.BENCHMARK else Destination.NONE
    trajectory = Trajectory.objects.create(query=query, run=run, device=device, line=run.line,
                                           model_version=run.model_version, status=Trajectory.Status.RUNNING,
                                           recollection_of_id=recollection_of, destination=destination)
    WorkItem.objects.filter(pk=item.pk).update(
        payload={**item.payload, "trajectories": [*item.payload.get("trajectories", []), trajectory.pk]})
    phone = PhoneConnection.for_device(device)
    config = CollectionConfig.from_dict(run.config)
    if recollection_of:
        config.anomaly_rates = {}  # collected again in a healed environment, not broken on purpose
    try:
        stop = run_trajectory(trajectory, phone, policy_for(run.model_version, line=run.line), config, lease=lease,
                              should_stop=lambda: run_is_cancelled(run.pk), device=device,
                              lease_ttl=lease_ttl())
    except PhoneLost as error:
        finish_trajectory(trajectory, Stop(StopKind.PHONE_LOST, f"phone lost: {error}"), phone=None)
        raise
    except Exception as error:  # whatever broke, the trajectory so far is still judged and routed
        finish_trajectory(trajectory, crashed(error), phone=None)
        raise
    if not end_trajectory(trajectory, stop):
        return False  # recovery ended and routed it while this worker was cut off
    # Judging may outlast the lease (a slow judge, a short lease): the phone stays this item's until
    # it is routed, so nobody else takes it meanwhile and recovery does not count this holder dead.
    with leases.kept_alive(lease, ttl=lease_ttl()):
        route_ended(trajectory, phone)
    return True


def lease_ttl():
    return timedelta(seconds=settings.COLLECTION_LEASE_SECONDS)


def drive_phone(run_id, device, lease, stop_event, deadline=float("inf")):
    """A thread: pull this run's items that the phone can do, one after another, until the
    task's time budget (`deadline`, monotonic) is spent."""
    run = CollectionRun.objects.select_related("model_version").get(pk=run_id)
    phone = PhoneConnection.for_device(device)
    try:
        while not stop_event.is_set() and not run_is_cancelled(run_id):
            if time.monotonic() >= deadline:
                stop_event.set()  # the driver hands the rest to a fresh task
                break
            item = scheduling.pull_next(device, kinds=[run.work_kind])
            if item is None:
                break
            # Between two of its own tasks, so no run waits on it (devices/teardown.py); a phone it
            # quarantines has its item re-queued for a spare. Its ADB reads hold no pooled connection.
            release_connection()
            if teardown.maybe_tear_down(phone, device) is not None and device.status == Device.Status.QUARANTINED:
                return
            try:
                # Settled here only if this holder ended its trajectory, else by recovery: never twice.
                # (A trajectory cut short by a lost lease is re-collected by its routing.)
                if collect_item(run, item, device, lease):
                    scheduling.finish(item, ok=True)
                teardown.count_task(device)
            except PhoneLost as error:
                # The phone dropped: quarantine it and give its query to another phone.
                health.quarantine(Device.objects.get(pk=device.pk), by="auto", reason=f"lost mid-run: {error}")
                log.warning("run %s: %s lost; its work is re-queued", run_id, device)
                return
            except Exception as error:  # one bad item must not stop the phone's other work
                log.exception("run %s item %s failed", run_id, item.pk)
                scheduling.finish(item, ok=False, note=str(error)[:500])
            refresh_progress(run_id)
            if run.line == Line.RL:
                metabolize_group(run_id, item.payload["query_id"])
            if not leases.heartbeat(lease, ttl=lease_ttl()):
                log.warning("run %s: the lease on %s is lost; this phone stops pulling work", run_id, device)
                return
    finally:
        leases.release(lease)
        refresh_progress(run_id)
        close_old_connections()


def drive_host(run_id, address, phones, budget_s=None):
    """The Celery task's body on one host: lease up to `phones` phones, one thread each.

    After `budget_s` the phones finish the trajectory in hand and take no more; a fresh task
    carries on, so no task outlives the broker's visibility timeout or its own time limit.
    """
    run = CollectionRun.objects.get(pk=run_id)
    has_work = CollectionRun.objects.filter(pk=run_id).with_open_work().exists()
    if run.status == CollectionRun.Status.PAUSED:
        return {"phones": 0, "paused": True}
    if run.status == CollectionRun.Status.CANCELLED or not has_work:
        refresh_progress(run_id)  # a run with nothing (left) to do is done
        return {"phones": 0}
    CollectionRun.objects.filter(pk=run_id, status__in=[CollectionRun.Status.QUEUED, CollectionRun.Status.DONE]).update(
        status=CollectionRun.Status.RUNNING, finished_at=None)
    budget_s = settings.COLLECTION_TASK_BUDGET_S if budget_s is None else budget_s
    deadline = time.monotonic() + budget_s
    leased = []
    for device in Device.objects.filter(adb_server=address, status=Device.Status.IDLE).order_by("serial"):
        if len(leased) >= phones:
            break
        try:
            leased.append((device, leases.acquire(device, holder=f"collection:run:{run_id}",
                                                  ttl=lease_ttl(), purpose=str(run))))
        except leases.LeaseRefused:
            continue
    stop_event = threading.Event()
    threads = [threading.Thread(target=drive_phone, args=(run_id, device, lease, stop_event, deadline),
                                name=f"run{run_id}-{device.serial}", daemon=True) for device, lease in leased]
    # The phones' step writes are committed together, a batch per transaction (step_writer.py).
    with batched_step_writes():
        for thread in threads:
            thread.start()
        release_connection()  # the phones' threads write; this one only waits for them
        try:
            for thread in threads:
                thread.join()
        except SoftTimeLimitExceeded:  # a hung phone: stop taking work, leave what is in hand
            stop_event.set()
            for thread in threads:
                thread.join(timeout=60)
    refresh_progress(run_id)
    budget_spent = stop_event.is_set() and not run_is_cancelled(run_id)
    if budget_spent and CollectionRun.objects.filter(pk=run_id).with_open_work().exists():
        transaction.on_commit(lambda: dispatch_run(run))
    return {"phones": len(leased), "address": address, "continued": budget_spent}
