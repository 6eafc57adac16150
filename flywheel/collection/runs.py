"""Collection runs: choose queries, plan work, drive phones per ADB host, count, cancel, recover.

A run becomes work items (query × repeat) that carry the query's phone requirements. Each ADB
host has its own Celery queue; the task on a host leases idle phones there and drives them
concurrently, one thread per phone, each pulling the next item its profile satisfies.
"""
import logging
import threading
import time
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import Count, DateTimeField, ExpressionWrapper, Q, Value
from django.db.models.functions import Now
from django.utils import timezone

from devices import health, hosts, leases, scheduling
from devices.hosts import host_queue
from devices.models import Device, Lease, WorkItem
from devices.phone import PhoneConnection
from flywheel import jobs
from flywheel.collection.engine import (
    CollectionConfig,
    PhoneLost,
    crashed,
    end_trajectory,
    finish_trajectory,
    route_ended,
    run_trajectory,
)
from flywheel.evaluation.pipeline import evaluate_trajectory
from flywheel.events import publish
from flywheel.models import CollectionRun, Line, Outcome, Query, QueryApp, RlQueryEntry, Trajectory
from flywheel.policies import default_policy_version, policy_for
from flywheel.pools.rl import metabolize_group
from flywheel.rules.stops import Stop, StopKind, holder_went_away
from flywheel.signals import announce_progress

log = logging.getLogger(__name__)
LINES = (Line.AUTOMATIC, Line.SCHEMA, Line.EXTERNAL, Line.RL)  # the lines a person launches a run of
# The benchmark's inference is a run too, launched only by an evaluation run (benchmark/infer.py).
RUN_LINES = (*LINES, Line.BENCHMARK)


NOT_COLLECTABLE = (Query.Status.REJECTED, Query.Status.REVIEW)


def select_queries(query_filter: dict, held_out: bool = False):
    """Queries by app, tier, tag, key, source or pool (docs: README, Collection runs).

    Only approved work is drawn: a query waiting for review (generated, or sent back by an
    annotator) or rejected is not collected until a person approves it. A query held out for
    evaluation is never drawn, whatever the filter says; only the benchmark line (`held_out`, its
    items reviewed by experts) reaches it."""
    queries = Query.objects.all()
    if not held_out:  # the benchmark's own review is the gate of its queries
        queries = queries.exclude(status__in=NOT_COLLECTABLE).exclude(evaluation_only=True)
    if query_filter.get("apps"):
        queries = queries.filter(app_links__app__package__in=query_filter["apps"])
    if query_filter.get("tiers"):
        queries = queries.filter(tier__in=query_filter["tiers"])
    if query_filter.get("keys"):
        queries = queries.filter(key__in=query_filter["keys"])
    if query_filter.get("source"):
        queries = queries.filter(source=query_filter["source"])
    if query_filter.get("pool") == "rl":
        queries = queries.filter(rl_entry__state__in=["banked", "active"])
    ids = set(queries.values_list("pk", flat=True))
    tags = query_filter.get("tags") or []
    if tags:  # JSON list membership, portable across SQLite and PostgreSQL
        ids = {q.pk for q in Query.objects.filter(pk__in=ids) if set(tags) & set(q.tags or [])}
    if query_filter.get("single_app"):
        ids = {q.pk for q in Query.objects.filter(pk__in=ids) if len(q.app_packages) == 1}
    limit = query_filter.get("limit")
    ordered = Query.objects.filter(pk__in=ids).order_by("key")
    return ordered[:limit] if limit else ordered


def selection_hint() -> str:
    """What a query filter can select, for a person whose selection matched nothing."""
    tags = sorted({tag for tags in Query.objects.values_list("tags", flat=True) for tag in tags or []})
    apps = sorted(set(QueryApp.objects.exclude(query__status__in=NOT_COLLECTABLE)
                      .values_list("app__package", flat=True)))
    return (f"apps in use: {', '.join(apps) or 'none (import queries first)'}; "
            f"tags in use: {', '.join(tags) or 'none'}")


def launch_run(line, query_filter=None, model_version=None, config=None, user=None, dispatch=True):
    """Create the run and its work; hand it to the workers. Returns the run."""
    if line not in RUN_LINES:
        raise ValueError(f"line must be one of {LINES}")
    config = {"phones": 4, "repeats": 1, **(config or {})}
    with transaction.atomic():
        run = CollectionRun.objects.create(line=line, query_filter=query_filter or {}, config=config,
                                           model_version=model_version or default_policy_version(),
                                           created_by=user, status=CollectionRun.Status.QUEUED)
        queries = list(select_queries(query_filter or {}, held_out=line == Line.BENCHMARK))
        for repeat in range(int(config["repeats"])):
            for query in queries:
                scheduling.enqueue(run.work_kind, {"run_id": run.pk, "query_id": query.pk, "repeat": repeat},
                                   query.phone_requirements())
        run.total = len(queries) * int(config["repeats"])
        run.save(update_fields=["total"])
    if dispatch:
        transaction.on_commit(lambda: dispatch_run(run))
    return run


def dispatch_run(run):
    """Send one driving task to each ADB host's queue (again after a broker lost them: the work
    items are claimed one by one, so a second driver of the same run finds nothing twice)."""
    addresses = hosts.serving_hosts()
    per_host = max(1, int(run.config.get("phones", 4)) // max(1, len(addresses)))
    CollectionRun.objects.filter(pk=run.pk).update(dispatched_at=timezone.now())
    ids = []
    for address in addresses:
        result = jobs.task(jobs.COLLECT_ON_HOST).apply_async((run.pk, address, per_host), queue=host_queue(address))
        ids.append(result.id)
    CollectionRun.objects.filter(pk=run.pk).update(celery_task_id=",".join(ids)[:64])
    return ids


def redispatch_stalled_runs(after=None, run_ids=None, skip=()):
    """Beat: runs with open work and no driver alive get their work sent again.

    A broker restarted without persistence forgets the driving tasks still queued, and a worker
    that died leaves none behind; no live lease of the run and no dispatch for `after` means no
    task is coming.
    """
    after = after if after is not None else timedelta(seconds=settings.COLLECTION_REDISPATCH_AFTER_S)
    now = timezone.now()
    live_holders = set(Lease.objects.live().values_list("holder", flat=True))
    stalled = (CollectionRun.objects.exclude(status__in=[CollectionRun.Status.CANCELLED, CollectionRun.Status.PAUSED])
               .with_open_work().filter(Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=now - after)))
    if run_ids is not None:
        stalled = stalled.filter(pk__in=run_ids)
    stalled = stalled.exclude(pk__in=list(skip))
    redispatched = []
    for run in stalled:
        if f"collection:run:{run.pk}" in live_holders:
            continue
        CollectionRun.objects.filter(pk=run.pk, status__in=[CollectionRun.Status.DONE, CollectionRun.Status.FAILED]).update(
            status=CollectionRun.Status.RUNNING, finished_at=None)
        log.warning("run %s: open work and no driver; dispatching it again", run.pk)
        dispatch_run(run)
        redispatched.append(run.pk)
    return {"redispatched": redispatched}


def cancel_run(run):
    CollectionRun.objects.filter(pk=run.pk, status__in=[CollectionRun.Status.QUEUED, CollectionRun.Status.RUNNING]).update(
        status=CollectionRun.Status.CANCELLED, finished_at=timezone.now())
    publish("runs", run=run.pk)
    run.work_items().filter(status=WorkItem.Status.QUEUED).update(status=WorkItem.Status.CANCELLED)


def run_is_cancelled(run_id) -> bool:
    """Cancelled, or paused (its phones stop taking work; the work stays queued for the resume)."""
    return CollectionRun.objects.filter(pk=run_id, status__in=[
        CollectionRun.Status.CANCELLED, CollectionRun.Status.PAUSED]).exists()


def refresh_progress(run_id):
    """Counts come from the work items, so they survive restarts of the site and the workers."""
    run = CollectionRun.objects.get(pk=run_id)
    # One statement, one snapshot: two counts read apart could see an item finish in between and
    # call the run done with a stale count.
    counts = run.work_items().aggregate(
        done=Count("pk", filter=Q(status__in=[WorkItem.Status.DONE, WorkItem.Status.FAILED, WorkItem.Status.CANCELLED])),
        open=Count("pk", filter=Q(status__in=WorkItem.OPEN)))
    CollectionRun.objects.filter(pk=run_id).update(completed=counts["done"])
    updates = {}
    if run.status == CollectionRun.Status.QUEUED:
        updates["status"] = CollectionRun.Status.RUNNING
    if not counts["open"] and run.status in (CollectionRun.Status.QUEUED, CollectionRun.Status.RUNNING):
        updates.update(status=CollectionRun.Status.DONE, finished_at=timezone.now())
    publish("runs", throttle_s=1.0, run=run_id)
    target = CollectionRun.objects.filter(pk=run_id).exclude(status=CollectionRun.Status.DONE)
    if updates.get("status") == CollectionRun.Status.DONE:  # not if work was added (a re-collection) meanwhile
        target = target.without_open_work()
    finished = bool(updates) and target.update(**updates) and updates.get("status") == CollectionRun.Status.DONE
    if finished and run.line == Line.RL:
        metabolize_rl_run(run)
    if run.line == Line.BENCHMARK:  # the evaluation that owns the run counts its own progress
        announce_progress(run_id, run.line)


def metabolize_rl_run(run):
    """Phase 1 (§2.4.3): after G rollouts of the current model per RL-pool query, each query is
    retired, kept or let go by the group's verdicts; a group still waiting for a verdict (a
    person's decision, a re-collection) is metabolised when that verdict arrives."""
    decisions = {}
    for query_id in set(run.trajectories.values_list("query_id", flat=True)):
        if RlQueryEntry.objects.filter(query_id=query_id).exists():
            decisions[query_id] = metabolize_group(run.pk, query_id)
    return decisions


def collect_item(run, item, device, lease):
    """One work item: a trajectory from a fresh reset to its verdict. Returns whether this holder
    ended it: one that recovery ended meanwhile is recovery's to settle."""
    query = Query.objects.get(pk=item.payload["query_id"])
    recollection_of = item.payload.get("recollection_of")
    trajectory = Trajectory.objects.create(query=query, run=run, device=device, line=run.line,
                                           model_version=run.model_version, status=Trajectory.Status.RUNNING,
                                           recollection_of_id=recollection_of)
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


# Recovery ended it: its worker died, not the task (it is collected again).
WORKER_STOPPED = Stop(StopKind.WORKER_STOPPED, "interrupted: the worker stopped")


def drive_phone(run_id, device, lease, stop_event, deadline=float("inf")):
    """A thread: pull this run's items that the phone can do, one after another, until the
    task's time budget (`deadline`, monotonic) is spent."""
    run = CollectionRun.objects.select_related("model_version").get(pk=run_id)
    try:
        while not stop_event.is_set() and not run_is_cancelled(run_id):
            if time.monotonic() >= deadline:
                stop_event.set()  # the driver hands the rest to a fresh task
                break
            item = scheduling.pull_next(device, kinds=[run.work_kind])
            if item is None:
                break
            try:
                # Settled here only if this holder ended its trajectory, else by recovery: never twice.
                # (A trajectory cut short by a lost lease is re-collected by its routing.)
                if collect_item(run, item, device, lease):
                    scheduling.finish(item, ok=True)
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
    for thread in threads:
        thread.start()
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


def reclaim_host_work(names):
    """A fresh worker for these phone hosts (its predecessor was killed, or its machine restarted):
    the collection leases the predecessor left on their phones end now, its trajectories are
    interrupted and routed, its work items re-queued and the runs dispatched again at once, instead
    of waiting for the leases to run out."""
    released = 0
    for lease in Lease.objects.filter(released_at__isnull=True, holder__startswith="collection:run:",
                                      device__adb_server__in=names):
        released += leases.release(lease)
    recovered = recover_interrupted(stale_after=timedelta(0))
    recovered["redispatched"] += redispatch_stalled_runs(after=timedelta(0), skip=recovered["redispatched"])["redispatched"]
    if released or recovered["trajectories"] or recovered["redispatched"]:
        log.warning("phone hosts %s: took over %d lease(s) of a previous worker; %s", ", ".join(names), released,
                    recovered)
    return {"leases": released, **recovered}


def finished_or_not(items):
    """([item ids whose last trajectory ended on its own], [item ids to collect again]) of items whose
    holder died: one that died between routing a finished trajectory and marking its item done left
    nothing to collect again."""
    last = {pk: (payload or {}).get("trajectories", [None])[-1] for pk, _kind, payload in items}
    ended = dict(Trajectory.objects.filter(pk__in=[t for t in last.values() if t]).exclude(
        status=Trajectory.Status.RUNNING).values_list("pk", "stop_kind"))
    # One its holder's going away cut short is collected again. ("lease lost", which the holder
    # records itself, is Env_ERROR: its routing re-collects it.)
    done = [pk for pk, t in last.items() if t in ended and not holder_went_away(ended[t])]
    return done, [pk for pk in last if pk not in done]


def recover_interrupted(stale_after=timedelta(seconds=20)):
    """Beat: work whose holder died. Its trajectory is interrupted and still routed; its item is
    re-queued once the lease has expired; nothing is lost.

    A run's trajectory is alive while its own phone is leased to the run: the run's other phones,
    on another host perhaps, say nothing about a host that was cut off."""
    leases.expire_stale_leases()
    open_leases = set(Lease.objects.filter(released_at__isnull=True).values_list("device_id", "holder"))
    live_holders = {holder for _device, holder in open_leases}
    recovered = 0
    # A run's trajectory starts once its phone is leased: without that lease it is dead at any age. Other
    # trajectories (the environment service's) are made a moment before their lease: `stale_after`.
    old_enough = Q(run__isnull=False) | Q(started_at__lt=ExpressionWrapper(Now() - Value(stale_after),
                                                                          output_field=DateTimeField()))
    for trajectory in Trajectory.objects.filter(old_enough, status=Trajectory.Status.RUNNING, line__in=RUN_LINES):
        if f"collection:trajectory:{trajectory.pk}" in live_holders or (
                trajectory.run_id and (trajectory.device_id, f"collection:run:{trajectory.run_id}") in open_leases):
            continue
        finish_trajectory(trajectory, WORKER_STOPPED, phone=None)
        recovered += 1
    # An item is stranded once its phone is no longer leased to its run (the phone may already be
    # leased again, to another run or a person: that says nothing about this item's holder).
    held = set(Lease.objects.filter(released_at__isnull=True).values_list("device_id", "holder"))
    stranded = [(pk, kind, payload) for pk, kind, device_id, payload in WorkItem.objects.filter(
        status=WorkItem.Status.ASSIGNED, kind__startswith="collect:").values_list("pk", "kind", "device_id", "payload")
        if (device_id, "collection:" + kind.removeprefix("collect:")) not in held]
    done, again = finished_or_not(stranded)
    WorkItem.objects.filter(pk__in=done, status=WorkItem.Status.ASSIGNED).update(
        status=WorkItem.Status.DONE, finished_at=timezone.now(), note="its trajectory ended as its holder died")
    requeued = WorkItem.objects.filter(pk__in=again, status=WorkItem.Status.ASSIGNED).update(
        status=WorkItem.Status.QUEUED, device=None, note="re-queued: its holder died")
    judged = take_over_judging([payload["trajectories"][-1] for pk, _kind, payload in stranded if pk in done])
    for run_id in CollectionRun.objects.filter(status=CollectionRun.Status.RUNNING).values_list("pk", flat=True):
        refresh_progress(run_id)
    # Work just handed back goes out at once to runs no live driver holds (their drivers may all have
    # finished while the lost host still had items in hand), not after the re-dispatch delay.
    runs = {int(kind.rpartition(":")[2]) for pk, kind, _ in stranded if pk in again and kind.startswith("collect:run:")}
    redispatched = redispatch_stalled_runs(after=timedelta(0), run_ids=runs)["redispatched"] if runs else []
    return {"trajectories": recovered, "work_items": requeued, "redispatched": redispatched, "judged": judged}


def take_over_judging(trajectory_ids) -> int:
    """Trajectories a dead holder ended but was still judging: judged now (without the phone), not
    once its judging claim runs out. The benchmark's rollouts are its evaluation's to judge."""
    judged = 0
    for trajectory in Trajectory.objects.filter(pk__in=trajectory_ids, verdict=Outcome.PENDING).exclude(
            line=Line.BENCHMARK):
        judged += evaluate_trajectory(trajectory, phone=None, take_over=True) is not None
    return judged

