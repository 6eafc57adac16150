"""Celery tasks of the data engine."""
import socket

from celery import shared_task
from django.conf import settings
from django.utils import timezone


@shared_task(name="flywheel.tasks.ping")
def ping(origin="unknown"):
    """A tiny real task: proves broker → worker → result backend works end to end."""
    return {"pong": origin, "worker_host": socket.gethostname(), "at": timezone.now().isoformat()}


@shared_task(name="flywheel.tasks.heartbeat")
def heartbeat():
    """Beat's periodic pulse; later issues hang lease expiry and pool metabolism off beat too."""
    return {"at": timezone.now().isoformat()}


@shared_task(name="flywheel.tasks.evaluate_trajectory")
def evaluate_trajectory(trajectory_id):
    """Judge one stored trajectory with HTSC and route it (System A abstains without its phone);
    a trajectory judged elsewhere is not judged again."""
    from flywheel.evaluation.pipeline import evaluate_trajectory as evaluate
    from flywheel.models import Trajectory

    verdict = evaluate(Trajectory.objects.get(pk=trajectory_id))
    return {"trajectory": trajectory_id, "outcome": verdict.outcome if verdict else None}


@shared_task(name="flywheel.tasks.evaluate_pending")
def evaluate_pending(older_than_s=None):
    """Route finished or interrupted trajectories that have no verdict yet, so none is lost."""
    from datetime import timedelta

    from flywheel.evaluation.pipeline import SWEEP_GRACE
    from flywheel.evaluation.pipeline import evaluate_pending as evaluate

    return evaluate(older_than=SWEEP_GRACE if older_than_s is None else timedelta(seconds=older_than_s))


# Acked on receipt: a run outlives any visibility timeout, and a lost driver is re-dispatched by
# beat (redispatch_runs) instead of redelivered by Redis. The driver keeps to its budget
# (COLLECTION_TASK_BUDGET_S); the limits catch one that hangs.
COLLECT_SOFT_LIMIT_S = settings.COLLECTION_TASK_BUDGET_S + 15 * 60


@shared_task(name="flywheel.tasks.collect_on_host", acks_late=False,
             soft_time_limit=COLLECT_SOFT_LIMIT_S, time_limit=COLLECT_SOFT_LIMIT_S + 5 * 60)
def collect_on_host(run_id, address, phones):
    """Drive up to `phones` phones of one ADB host for a collection run (sent to that host's queue)."""
    from flywheel.collection.runs import drive_host

    return drive_host(run_id, address, phones)


@shared_task(name="flywheel.tasks.recover_interrupted")
def recover_interrupted():
    """Interrupted work of dead workers: trajectories routed, work items re-queued."""
    from flywheel.collection.runs import recover_interrupted as recover

    return recover()


@shared_task(name="flywheel.tasks.redispatch_runs")
def redispatch_runs(after_s=None):
    """Runs with open work whose driving task is gone (a broker restart, a dead worker) go out again."""
    from datetime import timedelta

    from flywheel.collection.runs import redispatch_stalled_runs

    return redispatch_stalled_runs(after=None if after_s is None else timedelta(seconds=after_s))


# The repair side (§2.5). repair_* tasks go to the "repair" queue (config/celery.py).
@shared_task(name="flywheel.tasks.repair_trajectory")
def repair_trajectory(trajectory_id):
    """Attribute a False / Env_ERROR trajectory and dispatch it to its ECDM path (once)."""
    from flywheel.repair.ecdm import process_failure

    attribution = process_failure(trajectory_id)
    return {"trajectory": trajectory_id, "attribution": attribution.pk if attribution else None,
            "path": attribution.ecdm_path if attribution else None}


@shared_task(name="flywheel.tasks.repair_run", soft_time_limit=20 * 60, time_limit=25 * 60)
def repair_run(repair_id):
    """Run one repair down its path (Teacher step correction, RQA, pop-up repair)."""
    from flywheel.repair.ecdm import run_repair

    repair = run_repair(repair_id)
    return {"repair": repair_id, "status": repair.status if repair else "held elsewhere"}


@shared_task(name="flywheel.tasks.repair_replay", soft_time_limit=20 * 60, time_limit=25 * 60)
def repair_replay(repair_id):
    """Replay a repaired prefix on a phone, execute the correction, collect the continuation."""
    from flywheel.repair.step_correction import replay_and_continue

    return replay_and_continue(repair_id)


@shared_task(name="flywheel.tasks.repair_sweep")
def repair_sweep():
    """Failures nobody attributed and repairs nobody runs (a dead worker): picked up again."""
    from flywheel.repair.ecdm import sweep

    return sweep()


@shared_task(name="flywheel.tasks.repair_derive_recurring")
def repair_derive_recurring():
    """Counterfactual derivation for every recurring failure class not derived yet."""
    from flywheel.repair.counterfactual import derive_recurring

    return derive_recurring()


@shared_task(name="flywheel.tasks.advance_loops")
def advance_loops():
    """Move every running self-evolution loop one stage on, when what it waits for is done."""
    from flywheel.models import EvolutionLoop
    from flywheel.repair.loop import advance_loop

    moved = []
    for loop_id in EvolutionLoop.objects.filter(status__in=["queued", "running"]).values_list("pk", flat=True):
        advance_loop(loop_id)
        moved.append(loop_id)
    return {"loops": moved}


@shared_task(name="flywheel.tasks.fold_tallies")
def fold_tallies():
    """Fold the big append-only tables' new rows into their tallies (flywheel/tallies.py)."""
    from flywheel.tallies import fold_tallies as fold

    return fold()


@shared_task(name="flywheel.tasks.rebuild_tallies")
def rebuild_tallies():
    """Count the tallies again from scratch: heals rows deleted or committed late (daily)."""
    from flywheel.tallies import rebuild_tallies as rebuild

    return rebuild()


@shared_task(name="flywheel.tasks.snapshot_ledger")
def snapshot_ledger():
    """Count every run's failures for the ledger overview (flywheel/pools/ledger_snapshot.py)."""
    from flywheel.pools.ledger_snapshot import take_snapshot

    snapshot = take_snapshot()
    return {"taken_at": snapshot.taken_at.isoformat(), "seconds": round(snapshot.seconds, 3)}


# The query side's tasks live next to their code; importing them here registers them with the
# worker under flywheel.tasks.* names (autodiscovery reads each app's tasks module only).
from flywheel.collection import host_worker  # noqa: E402, F401  (its signals: claim, heartbeat, take over)
from flywheel.queries.exploration_tasks import *  # noqa: E402, F403
from flywheel.queries.gem_tasks import *  # noqa: E402, F403
from flywheel.queries.generation_tasks import *  # noqa: E402, F403
