"""flywheel.jobs: the stages enqueue the engine's tasks by name, without importing flywheel.tasks."""
from flywheel import jobs, tasks

NAMES = [value for name, value in vars(jobs).items() if name.isupper()]


def test_every_name_is_a_registered_task():
    assert NAMES
    for name in NAMES:
        assert jobs.task(name).name == name
    assert jobs.find("flywheel.tasks.no_such_task") is None


def test_a_name_finds_the_very_task_flywheel_tasks_declares():
    # So a test that patches tasks.repair_run.delay patches what a stage calls.
    assert jobs.task(jobs.REPAIR_RUN) is tasks.repair_run._get_current_object()
    assert jobs.task(jobs.COLLECT_ON_HOST) is tasks.collect_on_host._get_current_object()
    assert jobs.task(jobs.GENERATE_QUERIES) is tasks.generate_queries._get_current_object()
