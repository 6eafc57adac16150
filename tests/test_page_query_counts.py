"""The number of SQL queries of the busiest pages is pinned (issue #17): the same with 3 and with 6
of everything a page lists (runs, trajectories with their votes, claims, attributions, repairs and
steps, queries, phones, pool rows), so a query per row (an N+1) cannot creep back."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from devices.models import Device, Lease, WorkItem
from flywheel.models import (
    Adjudication,
    App,
    Attribution,
    CollectionRun,
    CptEntry,
    FunctionNode,
    ModelVersion,
    Query,
    Repair,
    RlQueryEntry,
    RlRollout,
    SftEntry,
    Step,
    Trajectory,
    Verdict,
    Vote,
)
from flywheel.policies import default_policy_version

pytestmark = pytest.mark.django_db

# page → (role, queries). The session, the user and the roles are 3 of them.
PAGES = {
    "/dashboard/": ("manager", 22),  # + the Teacher-assisted successes, counted apart (#35)
    "/dashboard/counts/": ("manager", 19),  # + the Teacher-assisted successes, counted apart (#35)
    "/ledger/": ("manager", 11),  # + the benchmark rollouts left out of the failures (one count, #31)
    "/ledger/runs/{run}/": ("manager", 10),
    "/pools/": ("manager", 16),  # + the RL queries awaiting measurement, the steps no training labels (#35)
    "/queue/": ("annotator", 10),
    "/adjudication/": ("adjudicator", 7),
    "/repairs/": ("annotator", 6),
    "/runs/": ("manager", 7),
    "/runs/{run}/": ("manager", 16),  # refresh_progress writes the run's progress; + its trajectories with votes, decisions, app names (#31)
}


def make_world(size, users):
    """`size` of everything the pages list, each row with the relations a page reads."""
    now = timezone.now()
    default_policy_version()  # created on first use, which is not what is counted here
    annotator, adjudicator = users["annotator"], users["adjudicator"]
    app = App.objects.create(package=f"com.sim.app{size}", label="App")
    version = ModelVersion.objects.create(name=f"policy-{size}", kind="endpoint", endpoint_url="http://gpu:8000/v1")
    device = Device.objects.create(serial=f"phone-{size}", adb_server="127.0.0.1:15037")
    runs = []
    for n in range(size):
        Device.objects.create(serial=f"phone-{size}-{n}", adb_server="127.0.0.1:15037", status="leased")
        leaf = FunctionNode.objects.create(app=app, path=f"leaf{n}", is_leaf=True)
        query = Query.objects.create(key=f"q{size}-{n}", text=f"Do thing {n}", tier="L2", verification={})
        query.set_apps([app])
        query.set_functions([leaf])
        Query.objects.create(key=f"mine{size}-{n}", text="Mine", tier="L1", assignee=annotator)
        Query.objects.create(key=f"open{size}-{n}", text="Open", tier="L3").set_apps([app])
        run = CollectionRun.objects.create(line="automatic", model_version=version, total=2, created_by=users["manager"],
                                           status="running")
        runs.append(run)
        Lease.objects.create(device=Device.objects.get(serial=f"phone-{size}-{n}"), holder=f"collection:run:{run.pk}",
                             expires_at=now + timedelta(minutes=1))
        failed = Trajectory.objects.create(query=query, run=run, device=device, line="automatic", verdict="false",
                                           destination="ecdm", status="completed", finished_at=now)
        waiting = Trajectory.objects.create(query=query, run=run, device=device, line="automatic",
                                            verdict="undetermined", destination="adjudication", status="completed",
                                            finished_at=now)
        verified = Trajectory.objects.create(query=query, line="semi_auto", annotator=annotator, model_version=version,
                                             verdict="true", destination="sft", status="completed", finished_at=now)
        for trajectory in (failed, waiting, verified):
            WorkItem.objects.create(kind=f"collect:run:{run.pk}", payload={"query_id": query.pk}, status="done")
            for index in range(2):
                step = Step.objects.create(
                    trajectory=trajectory, index=index, foreground_package=app.package,
                    executed_action={"action": "click", "point": [10, 20]}, timings={"verify_ms": 1500},
                    edit={"accepted_unchanged": index == 0, "pixel_distance": 3.0,
                          **({"clarify_pending": "Sure?"} if index else {})})
                CptEntry.objects.create(step=step, screenshot="blobs/x.png", action=step.executed_action)
        for system in "ABC":
            Vote.objects.create(trajectory=waiting, system=system, vote="true" if system == "A" else "false")
        Verdict.objects.create(trajectory=waiting, outcome="undetermined")
        Adjudication.objects.create(trajectory=waiting, adjudicator=adjudicator, claimed_until=now + timedelta(minutes=5))
        attribution = Attribution.objects.create(trajectory=failed, level=3, cause="perception_drift", owner="ecdm",
                                                 ecdm_path="step", first_bad_step=1)
        Repair.objects.create(trajectory=failed, attribution=attribution, path="step", status="needs_human",
                              claimed_by=annotator, claimed_until=now + timedelta(minutes=5))
        sample = Trajectory.objects.create(query=query, line="ecdm", verdict="true", destination="sft",
                                           derived_from=failed, status="completed")
        repair = Repair.objects.create(trajectory=failed, attribution=attribution, path="step", status="done",
                                       sample=sample, correction={"by": "human"}, repaired_by=annotator,
                                       finished_at=now)
        SftEntry.objects.create(trajectory=verified, intake="semi_auto_verified")
        SftEntry.objects.create(trajectory=sample, intake="ecdm_repaired", repair=repair)
        entry = RlQueryEntry.objects.create(query=query, state="active", channel="phase0")
        RlRollout.objects.create(entry=entry, run=run, model_version=version, outcomes=["true", "false"], decision="keep")
        Trajectory.objects.create(query=query, line="semi_auto", annotator=annotator, status="running")
    return runs


def queries_of(client, url):
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(captured.captured_queries)


@pytest.mark.parametrize("page", PAGES)
def test_a_pages_query_count_does_not_grow_with_its_rows(page, client_as, role_users):
    role, pinned = PAGES[page]
    client = client_as(role)
    small = make_world(3, role_users)
    at_three = queries_of(client, page.format(run=small[0].pk))
    large = make_world(6, role_users)  # 9 of everything now
    at_nine = queries_of(client, page.format(run=large[0].pk))
    assert (at_three, at_nine) == (pinned, pinned)


def test_the_pages_list_the_rows_they_count(client_as, role_users):
    """The worlds above are what the pages show (a pinned count of an empty page would prove nothing)."""
    runs = make_world(3, role_users)
    manager = client_as("manager")
    assert f'data-testid="ledger-run-{runs[2].pk}"' in manager.get("/ledger/").content.decode()
    assert "Sure?" in manager.get(f"/runs/{runs[0].pk}/").content.decode()
    dashboard = manager.get("/dashboard/counts/").content.decode()
    assert "annotator-user" in dashboard and "3/3 leaves" in dashboard
    assert client_as("adjudicator").get("/adjudication/").content.decode().count('class="vote vote-') == 9
    annotator = client_as("annotator")
    assert 'data-testid="waiting-count">3<' in annotator.get("/repairs/").content.decode()
    assert annotator.get("/queue/").content.decode().count("<code>open3-") == 3
