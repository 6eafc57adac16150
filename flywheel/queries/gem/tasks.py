"""Celery tasks of the Global Environment Memory (registered as flywheel.tasks.* by flywheel/tasks.py)."""
from celery import shared_task

from flywheel.queries.gem import recheck

__all__ = ["recheck_gem_edges"]


@shared_task(name="flywheel.tasks.recheck_gem_edges")
def recheck_gem_edges(limit=None):
    """Beat, every 120 s: re-check the GEM edges whose cool-down has passed, on idle phones."""
    return recheck.recheck_due_edges(limit or recheck.RECHECKS_PER_CALL)
