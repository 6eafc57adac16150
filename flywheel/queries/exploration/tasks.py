"""Celery tasks of app exploration (registered through flywheel/tasks.py under flywheel.tasks.*)."""
from celery import shared_task

from flywheel import jobs
from flywheel.models import ExplorationRun
from flywheel.queries.exploration import runs
from flywheel.queries.exploration.runs import TASK_BUDGET_S

__all__ = ["explore_apps", "resume_explorations"]


# Acked on receipt like collection drivers: a lost task is re-dispatched by beat
# (resume_explorations) from the run's saved frontier, not redelivered by the broker.
@shared_task(name=jobs.EXPLORE_APPS, acks_late=False,
             soft_time_limit=TASK_BUDGET_S + 10 * 60, time_limit=TASK_BUDGET_S + 15 * 60)
def explore_apps(run_id):
    """Drive phones for one exploration run until it is done, cancelled or this task's budget ends."""
    outcome = runs.explore_run(run_id)
    run = ExplorationRun.objects.get(pk=run_id)
    if run.status == "running" and outcome.get("phones"):
        runs.dispatch_exploration(run)  # the task's budget is spent: a fresh task carries on
    return outcome


@shared_task(name="flywheel.tasks.resume_explorations")
def resume_explorations():
    """Beat: running explorations whose heartbeat went stale are dispatched again."""
    return runs.resume_stale_runs()
