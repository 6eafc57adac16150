"""Benchmark rollouts have their own destination (issue #31): the ledger shows them as such and
never counts them as failures (nor in the salvage yield), the dashboard's verdict table leaves
them out, and the migration gives existing rollouts that destination."""
import importlib

import pytest
from django.apps import apps as django_apps

from flywheel.console.dashboard import dashboard_counts
from flywheel.models import CollectionRun, Query, Trajectory
from flywheel.pools.ledger import failure_ledger
from flywheel.pools.ledger_snapshot import ledger_overview, take_snapshot

pytestmark = pytest.mark.django_db

MIGRATION = importlib.import_module("flywheel.migrations.0013_stated_outcomes_and_benchmark_destination")


def world():
    """A benchmark run of 4 rollouts (3 failed: False and Env_ERROR) and an automatic run with one failure."""
    query = Query.objects.create(key="bq", text="Turn on dark mode", tier="L1", verification={}, evaluation_only=True)
    collect = Query.objects.create(key="cq", text="Create a note", tier="L1", verification={})
    bench = CollectionRun.objects.create(line="benchmark", total=4)
    for verdict in ("true", "false", "false", "env_error"):
        Trajectory.objects.create(query=query, run=bench, line="benchmark", verdict=verdict, destination="benchmark",
                                  status="completed")
    auto = CollectionRun.objects.create(line="automatic", total=2)
    Trajectory.objects.create(query=collect, run=auto, line="automatic", verdict="false", destination="ecdm",
                              status="completed")
    Trajectory.objects.create(query=collect, run=auto, line="automatic", verdict="true", destination="sft",
                              status="completed")
    return bench, auto


def test_benchmark_rollouts_are_no_failures_of_the_ledger_and_have_their_own_column(client_as):
    bench, auto = world()
    assert failure_ledger(Trajectory.objects.filter(run=bench))["failed"] == 0
    overall = failure_ledger(Trajectory.objects.all())
    assert overall["failed"] == overall["accounted"] == 1 and overall["stage"]["unattributed"] == 1
    overview = ledger_overview([bench.pk, auto.pk])
    assert overview["by_run"][bench.pk]["failed"] == 0 and overview["overall"]["failed"] == 1
    take_snapshot()  # beat's snapshot counts the same
    assert ledger_overview([bench.pk, auto.pk])["overall"]["failed"] == 1

    page = client_as("manager").get("/ledger/").content.decode()
    assert "<th>Benchmark evaluation</th>" in page
    row = page.split(f'data-testid="ledger-run-{bench.pk}"')[1].split("</tr>")[0]
    cells = [cell.split("</td>")[0] for cell in row.split("<td>")[2:]]
    # Trajectories 4; every destination 0 but Benchmark evaluation 4; failed 0, not attributed 0.
    assert cells[0] == "4" and cells[1] == "0" and cells[6] == "4" and cells[7:9] == ["0", "0"], cells
    assert "Benchmark rollouts (4) are left out" in page
    detail = client_as("manager").get(f"/ledger/runs/{bench.pk}/").content.decode()
    assert 'data-testid="benchmark-run"' in detail and "Not yet attributed" not in detail.split("Failure's path")[1]


def test_the_dashboard_counts_benchmark_rollouts_apart_from_the_training_lines(client_as):
    world()
    counts = dashboard_counts()
    assert [row["line"] for row in counts["trajectory_rows"]] == ["Automatic"]
    assert counts["trajectories_total"] == 2 and counts["benchmark_rollouts"] == 4
    page = client_as("manager").get("/dashboard/counts/").content.decode()
    assert "4 benchmark rollouts are not counted here" in page


def test_the_migration_gives_existing_benchmark_rollouts_their_destination():
    query = Query.objects.create(key="old", text="x", tier="L1", verification={}, evaluation_only=True)
    run = CollectionRun.objects.create(line="benchmark", total=2)
    old = [Trajectory.objects.create(query=query, run=run, line="benchmark", verdict=v, status="completed")
           for v in ("false", "env_error")]
    other = Trajectory.objects.create(query=query, line="automatic", verdict="false", status="completed")
    MIGRATION.benchmark_rollouts_to_their_destination(django_apps, None)
    assert {t.destination for t in Trajectory.objects.filter(pk__in=[t.pk for t in old])} == {"benchmark"}
    other.refresh_from_db()
    assert other.destination == ""
