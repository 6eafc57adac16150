"""The engine's Celery tasks by name, for the stages that enqueue them.

flywheel/tasks.py sits on top of the stages: its thin wrappers call into them. A stage that starts
work in the background therefore does not import it; it asks the Celery app for the task by its
registered name (the same task instance tasks.py declares, so a test that patches
`tasks.repair_run.delay` patches what the stage calls):

    jobs.task(jobs.REPAIR_RUN).delay(repair_id)

The app config imports flywheel.tasks, so the names are registered in every process that runs
Django (web, workers, beat, shells).
"""
from celery import current_app

EVALUATE_TRAJECTORY = "flywheel.tasks.evaluate_trajectory"
COLLECT_ON_HOST = "flywheel.tasks.collect_on_host"
REPAIR_TRAJECTORY = "flywheel.tasks.repair_trajectory"
REPAIR_RUN = "flywheel.tasks.repair_run"
REPAIR_REPLAY = "flywheel.tasks.repair_replay"
REPAIR_DERIVE_RECURRING = "flywheel.tasks.repair_derive_recurring"
GENERATE_QUERIES = "flywheel.tasks.generate_queries"
INDEX_FUNCTION_TREE = "flywheel.tasks.index_function_tree"
EXPLORE_APPS = "flywheel.tasks.explore_apps"
MEASURE_RL_INTAKE = "flywheel.tasks.measure_rl_intake"
REGENERATE_REASONING = "flywheel.tasks.regenerate_reasoning"
GATHER_HANDBACK = "flywheel.tasks.gather_handback"


def task(name: str):
    """The registered task called `name` (KeyError when no module declared it)."""
    return current_app.tasks[name]


def find(name: str):
    """The registered task called `name`, or None."""
    return current_app.tasks.get(name)
