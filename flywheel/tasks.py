"""Celery tasks of the data engine."""
import socket

from celery import shared_task
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
    """Judge one stored trajectory with HTSC and route it (System A abstains without its phone)."""
    from flywheel.evaluation.pipeline import evaluate_trajectory as evaluate
    from flywheel.models import Trajectory

    verdict = evaluate(Trajectory.objects.get(pk=trajectory_id))
    return {"trajectory": trajectory_id, "outcome": verdict.outcome}


@shared_task(name="flywheel.tasks.evaluate_pending")
def evaluate_pending():
    """Route finished or interrupted trajectories that have no verdict yet, so none is lost."""
    from flywheel.evaluation.pipeline import evaluate_pending as evaluate

    return {"evaluated": evaluate()}


@shared_task(name="flywheel.tasks.collect_on_host", acks_late=True)
def collect_on_host(run_id, address, phones):
    """Drive up to `phones` phones of one ADB host for a collection run (sent to that host's queue)."""
    from flywheel.collection.runs import drive_host

    return drive_host(run_id, address, phones)


@shared_task(name="flywheel.tasks.recover_interrupted")
def recover_interrupted():
    """Interrupted work of dead workers: trajectories routed, work items re-queued."""
    from flywheel.collection.runs import recover_interrupted as recover

    return recover()
