"""Re-collection of Env_ERROR trajectories (§2.4.2 "self-healing + re-collection").

The query is collected again by the collection-run machinery: one more work item of the run that
collected it (or of a small run made for it), dispatched after commit to the ADB hosts' queues.
The new trajectory points back at the one it replaces (`Trajectory.recollection_of`), and each
rollout is re-collected at most `recollect_limit` times, so a task that always meets a broken
environment cannot loop. Routing does not call this: `on_trajectory_routed` listens to the routing
signal (connected in flywheel/apps.py) and runs after commit, once the phone was checked.
"""
import logging

from django.db import transaction
from django.db.models import F

from devices import scheduling
from devices.models import WorkItem
from flywheel.collection.launch import RUN_LINES, dispatch_run
from flywheel.models import CollectionRun, Destination, Trajectory
from flywheel.policies import default_policy_version
from flywheel.rules.htsc import route_outcome

log = logging.getLogger(__name__)
RECOLLECTIONS_PER_ROLLOUT = 2  # run config "recollect_limit" overrides


def on_trajectory_routed(sender, trajectory_id, outcome, reason="", **kwargs):
    """trajectory_routed receiver: a trajectory sent to environment self-healing (Env_ERROR) has
    its query collected again."""
    if route_outcome(outcome) != Destination.ENV_HEALING:
        return
    trajectory = Trajectory.objects.select_related("query", "run").get(pk=trajectory_id)
    item = recollect(trajectory, reason)
    log.info("trajectory %s: Env_ERROR, query %s %s", trajectory.pk, trajectory.query.key,
             f"queued for re-collection (work item {item.pk})" if item else "not re-collected")


def recollection_depth(trajectory: Trajectory) -> int:
    """How many re-collections precede this trajectory (0 for an original rollout)."""
    depth, parent_id = 0, trajectory.recollection_of_id
    while parent_id is not None:
        depth += 1
        parent_id = Trajectory.objects.filter(pk=parent_id).values_list("recollection_of_id", flat=True).first()
    return depth


def recollect(trajectory: Trajectory, reason: str = "") -> WorkItem | None:
    """Queue the trajectory's query again and dispatch it after commit; None when it is not
    re-collected (already queued, the limit reached, a cancelled run, a line people drive)."""
    if trajectory.line not in RUN_LINES:
        log.info("trajectory %s: the %s line re-collects by its own people or plans", trajectory.pk, trajectory.line)
        return None
    run = trajectory.run
    limit = int((run.config if run else {}).get("recollect_limit", RECOLLECTIONS_PER_ROLLOUT))
    if recollection_depth(trajectory) >= limit:
        log.warning("trajectory %s: re-collected %d times already; left to the ECDM", trajectory.pk, limit)
        return None
    with transaction.atomic():
        if run is None:
            run = CollectionRun.objects.create(
                line=trajectory.line, query_filter={"keys": [trajectory.query.key]},
                config={"phones": 1, "repeats": 1}, status=CollectionRun.Status.QUEUED,
                model_version=trajectory.model_version or default_policy_version())
        run = CollectionRun.objects.select_for_update().get(pk=run.pk)
        if run.status == CollectionRun.Status.CANCELLED:
            log.info("trajectory %s: its run %s was cancelled; not re-collected", trajectory.pk, run.pk)
            return None
        if trajectory.recollections.exists() or run.work_items().filter(
                payload__recollection_of=trajectory.pk).exists():
            return None  # healing ran twice (a redelivered task): one re-collection is enough
        item = scheduling.enqueue(run.work_kind, {
            "run_id": run.pk, "query_id": trajectory.query_id, "recollection_of": trajectory.pk,
            "reason": reason[:300]}, trajectory.query.phone_requirements(), priority=1)
        reopened = {"status": CollectionRun.Status.RUNNING, "finished_at": None} if run.status in (
            CollectionRun.Status.DONE, CollectionRun.Status.FAILED) else {}
        CollectionRun.objects.filter(pk=run.pk).update(total=F("total") + 1, **reopened)
        transaction.on_commit(lambda: dispatch_run(run))
    return item

