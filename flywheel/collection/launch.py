"""Collection runs: choose queries, plan a run's work, hand it to the phone hosts, count, cancel.

A run becomes work items (query × repeat) that carry the query's phone requirements. Each ADB
host has its own Celery queue; one driving task per host takes the work from there
(flywheel/collection/driver.py). A run's progress is counted from its work items; a run that is
done on the RL line has its queries metabolised. Work whose holder died is flywheel/collection/recovery.py's.
"""
import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from devices import hosts, scheduling
from devices.hosts import host_queue
from devices.models import Lease, WorkItem
from flywheel import jobs
from flywheel.events import publish
from flywheel.models import App, CollectionRun, Line, Query, QueryApp, RlQueryEntry, SetupRecipe
from flywheel.policies import default_policy_version
from flywheel.pools.rl import metabolize_group
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
    elif query_filter.get("pool") == "measuring":  # new queries the current policy is measured on (Phase 1)
        queries = queries.filter(rl_entry__state="measuring")
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
    packages = set(QueryApp.objects.exclude(query__status__in=NOT_COLLECTABLE).values_list("app__package", flat=True))
    apps = sorted(App.display_labels(packages).values(), key=str.lower)  # names, as the form lists them
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
        recipes = SetupRecipe.rules()
        requirements = {query.pk: query.phone_requirements(recipes) for query in queries}
        for repeat in range(int(config["repeats"])):
            for query in queries:
                scheduling.enqueue(run.work_kind, {"run_id": run.pk, "query_id": query.pk, "repeat": repeat},
                                   requirements[query.pk])
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
