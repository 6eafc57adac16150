"""The ledger overview reads beat's snapshot (flywheel/pools/ledger_snapshot.py): the same counts as
counting live, a run launched since counted live, an old snapshot ignored, and the page says how
old its counts are."""
from datetime import timedelta

import pytest

from flywheel.models import CollectionRun, LedgerSnapshot, Trajectory
from flywheel.pools.ledger import failure_ledger
from flywheel.pools.ledger_snapshot import MAX_AGE, ledger_overview, take_snapshot
from tests.flywheel.pools.test_ledger_ecdm import L3_STEP, every_stage, make_failure

pytestmark = pytest.mark.django_db


def test_the_snapshot_counts_what_counting_live_counts():
    first, second = (CollectionRun.objects.create(line="automatic") for _ in range(2))
    every_stage(first)
    make_failure(second, attribution=L3_STEP, repairs=[("step", "done", "human")])
    make_failure(None, verdict="env_error")
    live = ledger_overview([first.pk, second.pk])
    assert live["as_of"] is None and live["overall"]["failed"] == 15

    take_snapshot()
    snapshot = ledger_overview([first.pk, second.pk])
    assert snapshot["as_of"] is not None
    assert {key: value for key, value in snapshot.items() if key != "as_of"} == \
           {key: value for key, value in live.items() if key != "as_of"}
    assert snapshot["by_run"][first.pk] == failure_ledger(Trajectory.objects.filter(run=first))
    assert snapshot["outside_runs"]["stage"]["unattributed"] == 1


def test_a_run_launched_after_the_snapshot_is_counted_live_and_an_old_snapshot_is_not_read(client_as):
    old_run = CollectionRun.objects.create(line="automatic")
    make_failure(old_run)
    take_snapshot()
    new_run = CollectionRun.objects.create(line="schema")
    make_failure(new_run, attribution=L3_STEP, repairs=[("step", "needs_human", None)])
    make_failure(old_run)  # after the snapshot: shown at the next one
    overview = ledger_overview([new_run.pk, old_run.pk])
    assert overview["by_run"][new_run.pk]["stage"]["needs_human"] == 1
    assert overview["by_run"][old_run.pk]["failed"] == 1 and overview["overall"]["failed"] == 2

    page = client_as("manager").get("/ledger/").content.decode()
    assert 'data-testid="ledger-as-of"' in page and 'data-testid="accounted">2 of 2<' in page

    LedgerSnapshot.objects.update(taken_at=LedgerSnapshot.objects.get().taken_at - MAX_AGE - timedelta(seconds=1))
    stale = ledger_overview([new_run.pk, old_run.pk])
    assert stale["as_of"] is None and stale["by_run"][old_run.pk]["failed"] == 2 and stale["overall"]["failed"] == 3
    assert 'data-testid="ledger-as-of"' not in client_as("manager").get("/ledger/").content.decode()


def test_the_overview_pages_through_runs_newest_first(client_as):
    runs = [CollectionRun.objects.create(line="automatic") for _ in range(55)]
    client = client_as("manager")
    first = client.get("/ledger/").content.decode()
    assert f'data-testid="ledger-run-{runs[-1].pk}"' in first and f'data-testid="ledger-run-{runs[0].pk}"' not in first
    assert "page 1 of 2" in first
    assert f'data-testid="ledger-run-{runs[0].pk}"' in client.get("/ledger/?page=2").content.decode()
