"""Celery task of query generation (registered under flywheel.tasks.* by flywheel/tasks.py)."""
from celery import shared_task

__all__ = ["generate_queries"]


@shared_task(name="flywheel.tasks.generate_queries")
def generate_queries(run_id):
    """Plan, gate and write one generation run. Acked late: a run picked up again after a lost
    worker skips the batches it already wrote (its keys are deterministic)."""
    from flywheel.queries.generation_runs import execute_run

    return execute_run(run_id)
