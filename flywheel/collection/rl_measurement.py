"""Measuring new RL-pool queries (§2.4.3, Phase 1): G rollouts of the current policy M(t).

Every query awaiting measurement that no live run measures is rolled out in one RL-line run of
the current policy, G times each. The run is an ordinary RL rollout (phones, HTSC, routing); when a
query's group is judged, flywheel/pools/rl.metabolize_group applies the uniform gate to it. Beat
calls this too, so queries that waited through Phase 0, or whose run was cancelled, are measured.
"""
import logging

from django.db import transaction
from django.db.models import Q

from flywheel.collection.launch import launch_run
from flywheel.models import CollectionRun, Line, RlQueryEntry
from flywheel.pools.rl import current_policy, measurement_config

log = logging.getLogger(__name__)
OPEN_RUN = (CollectionRun.Status.QUEUED, CollectionRun.Status.RUNNING, CollectionRun.Status.PAUSED)


def awaiting_measurement():
    """Measuring entries with no run measuring them now (none yet, or theirs ended without a verdict)."""
    return (RlQueryEntry.objects.filter(state=RlQueryEntry.State.MEASURING, query__evaluation_only=False)
            .filter(Q(measurement_run__isnull=True) | Q(measurement_run__status__in=[
                CollectionRun.Status.CANCELLED, CollectionRun.Status.FAILED])))


def measuring_run_open() -> bool:
    return CollectionRun.objects.filter(line=Line.RL, query_filter__pool="measuring", status__in=OPEN_RUN).exists()


def measure_awaiting(user=None, dispatch=True) -> CollectionRun | None:
    """Launch the run that measures every waiting query; None when there is nothing to measure, no
    current policy (Phase 0: they keep waiting) or a measuring run still open: one at a time, so
    measurement never takes every phone from the loop's own rollouts; what arrives meanwhile is
    measured by the next one (beat)."""
    policy = current_policy()
    if policy is None or measuring_run_open():
        return None
    with transaction.atomic():
        entries = list(awaiting_measurement().select_for_update(skip_locked=True, of=("self",))
                       .select_related("query"))
        if not entries:
            return None
        config = measurement_config()
        run = launch_run(Line.RL, {"keys": sorted(e.query.key for e in entries), "pool": "measuring"},
                         model_version=policy, config=config, user=user, dispatch=dispatch)
        RlQueryEntry.objects.filter(pk__in=[e.pk for e in entries]).update(
            measurement_run=run, note=f"measuring: {config['repeats']} rollouts of {policy} in run #{run.pk}"[:300])
    log.info("RL intake: run %s measures %s on %s queries", run.pk, policy, len(entries))
    return run
