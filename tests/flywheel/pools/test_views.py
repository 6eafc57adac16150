import pytest

from flywheel.models import CollectionRun, CptEntry, Query, RlQueryEntry, SftEntry, Step, Trajectory
from flywheel.pools.rl import record_rollouts

pytestmark = pytest.mark.django_db


def test_ledger_shows_where_every_trajectory_of_a_run_went(client_as):
    query = Query.objects.create(key="q", text="Do the thing", tier="L1", verification={})
    run = CollectionRun.objects.create(line="automatic", total=3)
    for destination, verdict in (("sft", "true"), ("ecdm", "false"), ("adjudication", "undetermined")):
        Trajectory.objects.create(query=query, run=run, line="automatic", verdict=verdict,
                                  destination=destination, status="completed")
    Trajectory.objects.create(query=query, line="semi_auto", status="running")
    client = client_as("manager")
    page = client.get("/ledger/").content.decode()
    assert "Automatic run #" in page and "Not part of a run" in page
    detail = client.get(f"/ledger/runs/{run.pk}/?destination=ecdm").content.decode()
    assert "ECDM queue" in detail and "SFT pool</td>" not in detail
    unrouted = client.get("/ledger/unattached/?destination=").content.decode()
    assert "Not routed yet" in unrouted


def test_pool_pages_show_counts_composition_and_history(client_as):
    client = client_as("manager")
    empty = client.get("/pools/").content.decode()
    assert "Empty: every executed step" in empty
    query = Query.objects.create(key="q", text="x", tier="L2", verification={})
    trajectory = Trajectory.objects.create(query=query, line="automatic", verdict="true", destination="sft")
    step = Step.objects.create(trajectory=trajectory, index=0, foreground_package="com.sim.notes",
                               executed_action={"action": "click", "point": [1, 2]})
    CptEntry.objects.create(step=step, screenshot="blobs/x.png", action=step.executed_action)
    SftEntry.objects.create(trajectory=trajectory, intake="htsc_true")
    entry = RlQueryEntry.objects.create(query=query, state="active", channel="phase0")
    record_rollouts(entry, None, ["true", "true"])
    page = client.get("/pools/").content.decode()
    assert "com.sim.notes" in page and "htsc_true" in page and "retired" in page and "retire" in page
