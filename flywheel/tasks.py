"""Celery tasks of the data engine: thin wrappers on top of the stages, registered by name.

The stages do not import this module: one that starts work in the background asks the Celery app
for the task by the name flywheel/jobs.py keeps (README "Layout").
"""
import socket
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from flywheel import jobs, tallies
from flywheel.collection import driver, handback, launch, recovery, rl_measurement
from flywheel.judging import pipeline
from flywheel.models import EvolutionLoop, Trajectory
from flywheel.pools import ledger_snapshot, sft
from flywheel.repair import counterfactual, ecdm, loop, step_correction


@shared_task(name="flywheel.tasks.ping")
def ping(origin="unknown"):
    """A tiny real task: proves broker → worker → result backend works end to end."""
    return {"pong": origin, "worker_host": socket.gethostname(), "at": timezone.now().isoformat()}


@shared_task(name="flywheel.tasks.heartbeat")
def heartbeat():
    """Beat's periodic pulse; later issues hang lease expiry and pool metabolism off beat too."""
    return {"at": timezone.now().isoformat()}


@shared_task(name=jobs.EVALUATE_TRAJECTORY)
def evaluate_trajectory(trajectory_id):
    """Judge one stored trajectory with HTSC and route it (System A abstains without its phone);
    a trajectory judged elsewhere is not judged again."""
    verdict = pipeline.evaluate_trajectory(Trajectory.objects.get(pk=trajectory_id))
    return {"trajectory": trajectory_id, "outcome": verdict.outcome if verdict else None}


@shared_task(name="flywheel.tasks.evaluate_pending")
def evaluate_pending(older_than_s=None):
    """Route finished or interrupted trajectories that have no verdict yet, so none is lost."""
    return pipeline.evaluate_pending(
        older_than=pipeline.SWEEP_GRACE if older_than_s is None else timedelta(seconds=older_than_s))


# Acked on receipt: a run outlives any visibility timeout, and a lost driver is re-dispatched by
# beat (redispatch_runs) instead of redelivered by Redis. The driver keeps to its budget
# (COLLECTION_TASK_BUDGET_S); the limits catch one that hangs.
COLLECT_SOFT_LIMIT_S = settings.COLLECTION_TASK_BUDGET_S + 15 * 60


@shared_task(name=jobs.COLLECT_ON_HOST, acks_late=False,
             soft_time_limit=COLLECT_SOFT_LIMIT_S, time_limit=COLLECT_SOFT_LIMIT_S + 5 * 60)
def collect_on_host(run_id, address, phones):
    """Drive up to `phones` phones of one ADB host for a collection run (sent to that host's queue)."""
    return driver.drive_host(run_id, address, phones)


@shared_task(name="flywheel.tasks.recover_interrupted")
def recover_interrupted():
    """Interrupted work of dead workers: trajectories routed, work items re-queued."""
    return recovery.recover_interrupted()


@shared_task(name="flywheel.tasks.redispatch_runs")
def redispatch_runs(after_s=None):
    """Runs with open work whose driving task is gone (a broker restart, a dead worker) go out again."""
    return launch.redispatch_stalled_runs(after=None if after_s is None else timedelta(seconds=after_s))


# The repair side (§2.5). repair_* tasks go to the "repair" queue (config/celery.py).
@shared_task(name=jobs.REPAIR_TRAJECTORY)
def repair_trajectory(trajectory_id):
    """Attribute a False / Env_ERROR trajectory and dispatch it to its ECDM path (once)."""
    attribution = ecdm.process_failure(trajectory_id)
    return {"trajectory": trajectory_id, "attribution": attribution.pk if attribution else None,
            "path": attribution.ecdm_path if attribution else None}


@shared_task(name=jobs.REPAIR_RUN, soft_time_limit=20 * 60, time_limit=25 * 60)
def repair_run(repair_id):
    """Run one repair down its path (Teacher step correction, RQA, pop-up repair)."""
    repair = ecdm.run_repair(repair_id)
    return {"repair": repair_id, "status": repair.status if repair else "held elsewhere"}


@shared_task(name=jobs.REPAIR_REPLAY, soft_time_limit=20 * 60, time_limit=25 * 60)
def repair_replay(repair_id):
    """Replay a repaired prefix on a phone, execute the correction, collect the continuation."""
    return step_correction.replay_and_continue(repair_id)


@shared_task(name="flywheel.tasks.repair_sweep")
def repair_sweep():
    """Failures nobody attributed and repairs nobody runs (a dead worker): picked up again."""
    return ecdm.sweep()


@shared_task(name=jobs.REPAIR_DERIVE_RECURRING)
def repair_derive_recurring():
    """Counterfactual derivation for every recurring failure class not derived yet."""
    return counterfactual.derive_recurring()


@shared_task(name=jobs.MEASURE_RL_INTAKE)
def measure_rl_intake():
    """Phase 1 intake: roll the current policy out on the RL-pool queries awaiting measurement."""
    run = rl_measurement.measure_awaiting()
    return {"run": run.pk if run is not None else None}


@shared_task(name=jobs.REGENERATE_REASONING)
def regenerate_reasoning(trajectory_id):
    """SFT intake's consistency gate: regenerate the reasoning of a trajectory's failing steps."""
    return sft.regenerate_reasoning(trajectory_id)


@shared_task(name=jobs.GATHER_HANDBACK)
def gather_handback(trajectory_id):
    """The hand-back channel (§2.3.7): samples of the right behaviour at the states a trajectory met."""
    return [sample.pk for sample in handback.gather(trajectory_id)]


@shared_task(name="flywheel.tasks.regenerate_waiting")
def regenerate_waiting():
    """Steps left waiting for their reasoning (a lost job, a Teacher that did not answer) get it again."""
    return sft.regenerate_waiting()


@shared_task(name="flywheel.tasks.advance_loops")
def advance_loops():
    """Move every running self-evolution loop one stage on, when what it waits for is done."""
    moved = []
    for loop_id in EvolutionLoop.objects.filter(status__in=["queued", "running"]).values_list("pk", flat=True):
        loop.advance_loop(loop_id)
        moved.append(loop_id)
    return {"loops": moved}


@shared_task(name="flywheel.tasks.fold_tallies")
def fold_tallies():
    """Fold the big append-only tables' new rows into their tallies (flywheel/tallies.py)."""
    return tallies.fold_tallies()


@shared_task(name="flywheel.tasks.rebuild_tallies")
def rebuild_tallies():
    """Count the tallies again from scratch: heals rows deleted or committed late (daily)."""
    return tallies.rebuild_tallies()


@shared_task(name="flywheel.tasks.snapshot_ledger")
def snapshot_ledger():
    """Count every run's failures for the ledger overview (flywheel/pools/ledger_snapshot.py)."""
    snapshot = ledger_snapshot.take_snapshot()
    return {"taken_at": snapshot.taken_at.isoformat(), "seconds": round(snapshot.seconds, 3)}


# The query side's tasks live next to their code; importing them here registers them with the
# worker under flywheel.tasks.* names (autodiscovery reads each app's tasks module only).
from flywheel.collection import host_worker  # noqa: E402, F401  (its signals: claim, heartbeat, take over)
from flywheel.queries.exploration.tasks import *  # noqa: E402, F403
from flywheel.queries.gem.tasks import *  # noqa: E402, F403
from flywheel.queries.generation.tasks import *  # noqa: E402, F403
