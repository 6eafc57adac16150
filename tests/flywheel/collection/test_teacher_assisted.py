"""A trajectory the Teacher took over in is marked as such (issue #35): never the policy's own success
on the dashboard, in a loop round's verdicts or on the ledger, and its Teacher steps are labelled
apart in SFT exports."""
import importlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps

from flywheel.collection.takeover import mark_takeover
from flywheel.console.dashboard import dashboard_counts
from flywheel.models import CollectionRun, Query, SftEntry, Step, Trajectory
from flywheel.repair.loop import round_stats
from training.snapshots import create_snapshot

pytestmark = pytest.mark.django_db
MIGRATION = importlib.import_module("flywheel.migrations.0016_sft_label_gate_and_teacher_assisted")


def trajectory(verdict="true", run=None, **fields):
    query = Query.objects.create(key=f"q-{Query.objects.count()}", text="Turn on Bluetooth", tier="L1",
                                 verification={})
    return Trajectory.objects.create(query=query, line="automatic", status="completed", verdict=verdict, run=run,
                                     **fields)


def test_the_takeover_step_and_its_trajectorys_mark_are_written_together():
    helped = trajectory()
    step = Step.objects.create(trajectory=helped, index=0)
    step.takeover, step.score = True, 0.9
    mark_takeover(step)
    helped.refresh_from_db()
    assert helped.teacher_assisted and Step.objects.get(pk=step.pk).takeover


def test_the_migration_marks_existing_trajectories_with_a_takeover_step():
    helped, alone = trajectory(), trajectory()
    Step.objects.create(trajectory=helped, index=0, takeover=True)
    Step.objects.create(trajectory=alone, index=0)
    MIGRATION.trajectories_with_takeover_are_teacher_assisted(django_apps, None)
    assert list(Trajectory.objects.filter(teacher_assisted=True)) == [helped]


def test_a_teacher_assisted_success_is_not_the_policys_own_on_the_dashboard(client_as):
    trajectory(), trajectory(teacher_assisted=True), trajectory(verdict="false")
    row = dashboard_counts()["trajectory_rows"][0]
    assert row["line"] == "Automatic" and row["counts"][1] == 1      # True: the policy's own only
    assert row["teacher_assisted"] == 1 and row["total"] == 3
    page = client_as("manager").get("/dashboard/counts/").content.decode()
    assert '<td data-testid="teacher-assisted">1</td>' in page


def test_a_loop_rounds_true_rollouts_leave_out_the_teacher_assisted_ones():
    run = CollectionRun.objects.create(line="automatic", total=3)
    trajectory(run=run), trajectory(run=run, teacher_assisted=True), trajectory(run=run, verdict="false")
    stats = round_stats(SimpleNamespace(rollout_run_id=run.pk))
    assert stats["verdicts"]["true"] == 1 and stats["verdicts"]["teacher_assisted"] == 1
    assert stats["rollouts"] == 3


def test_the_ledger_marks_a_teacher_assisted_trajectory(client_as):
    run = CollectionRun.objects.create(line="automatic", total=2)
    trajectory(run=run, teacher_assisted=True)
    page = client_as("manager").get(f"/ledger/runs/{run.pk}/").content.decode()
    assert page.count('data-testid="teacher-assisted"') == 1


def test_sft_exports_label_the_teachers_steps_apart_from_the_policys(settings, tmp_path):
    from tests.training.test_exports import make_trajectory
    settings.TRAINING_ROOT = tmp_path / "training"
    helped = make_trajectory(n_steps=3)
    Step.objects.filter(trajectory=helped, index=1).update(takeover=True)
    SftEntry.objects.create(trajectory=helped, intake="htsc_true")
    snapshot = create_snapshot("sft", {"k": 2, "seed": 1}, name="teacher")
    assert snapshot.status == "ready", snapshot.error
    lines = [json.loads(line) for line in (Path(snapshot.directory) / "data.jsonl").read_text().splitlines()]
    assert [(r["meta"]["step"], r["meta"]["step_source"]) for r in lines] == [(0, "policy"), (1, "teacher"),
                                                                           (2, "policy")]
    assert snapshot.stats["teacher_steps"] == 1
