"""Celery task of query generation (registered under flywheel.tasks.* by flywheel/tasks.py)."""
from celery import shared_task

from flywheel import jobs
from flywheel.queries import gates
from flywheel.queries.generation import runs

__all__ = ["generate_queries", "index_function_tree"]


@shared_task(name=jobs.GENERATE_QUERIES)
def generate_queries(run_id):
    """Plan, gate and write one generation run. Acked late: a run picked up again after a lost
    worker skips the batches it already wrote (its keys are deterministic)."""
    return runs.execute_run(run_id)


@shared_task(name=jobs.INDEX_FUNCTION_TREE)
def index_function_tree(packages=None):
    """Embed a tree's node texts into the shared cache (after a build), so gate 3 of the next
    generation runs embeds only the queries; a node missed here is embedded when first needed."""
    return {"nodes": gates.index_function_nodes(packages)}
