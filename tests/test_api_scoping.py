"""Object-level scoping: each role reads, over the API and /media/, only what its pages show it."""
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from annotation import adjudication
from devices.models import Device
from flywheel.blobs import store_blob
from flywheel.models import Attribution, Query, Repair, Step, Trajectory
from tests.annotation.test_adjudication import png, undetermined_trajectory

pytestmark = pytest.mark.django_db


def session_of(user, shade):
    """A semi-automatic session owned by `user`, with one step showing its own screenshot."""
    query = Query.objects.create(key=f"s{Query.objects.count()}", text="Open Settings", tier="L1", verification={})
    trajectory = Trajectory.objects.create(query=query, line="semi_auto", annotator=user, status="completed",
                                           verdict="true", destination="sft", finished_at=timezone.now())
    Step.objects.create(trajectory=trajectory, index=0, screenshot=store_blob(png(shade=shade), "png"),
                        model_io={"response": f"reply for {user}"})
    Attribution.objects.create(trajectory=trajectory, level=3, cause="perception drift")
    Repair.objects.create(trajectory=trajectory, path="step", status="done", repaired_by=user)
    return trajectory


@pytest.fixture
def world(role_users):
    other = User.objects.create_user(username="other-annotator")
    other.groups.add(Group.objects.get(name="annotator"))
    mine, theirs = session_of(role_users["annotator"], 11), session_of(other, 22)
    queued, decided_by_me, decided_by_other = (undetermined_trajectory(steps=1) for _ in range(3))
    adjudication.decide(decided_by_me.pk, role_users["adjudicator"], "wrong")
    adjudication.decide(decided_by_other.pk, User.objects.create_user(username="other-adjudicator"), "wrong")
    return SimpleNamespace(mine=mine, theirs=theirs, queued=queued, decided_by_me=decided_by_me,
                           decided_by_other=decided_by_other)


def ids(client, url):
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return {row["id"] for row in response.json()["results"]}


def trajectory_ids(client, url):
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return {row["trajectory"] for row in response.json()["results"]}


def media(trajectory):
    return "/media/" + trajectory.steps.get().screenshot.name


def test_annotators_see_only_their_own_sessions_and_staff_everything(client_as, world):
    client = client_as("annotator")
    assert ids(client, "/api/trajectories/") == {world.mine.pk}
    assert trajectory_ids(client, "/api/steps/") == {world.mine.pk}
    assert trajectory_ids(client, "/api/attributions/") == {world.mine.pk}
    assert trajectory_ids(client, "/api/repairs/") == {world.mine.pk}
    assert client.get(f"/api/trajectories/{world.theirs.pk}/").status_code == 404
    assert client.get(f"/api/steps/{world.theirs.steps.get().pk}/").status_code == 404
    assert client.get(f"/api/steps/?trajectory={world.theirs.pk}").json()["results"] == []
    # the model's replies of their own session, and no one else's
    assert client.get(f"/api/steps/{world.mine.steps.get().pk}/").json()["model_io"]["response"].endswith(
        "annotator-user")
    assert client.get(media(world.mine)).status_code == 200
    assert client.get(media(world.theirs)).status_code == 404
    assert client.get(media(world.queued)).status_code == 404
    # managers and admins see everything
    every = {world.mine.pk, world.theirs.pk, world.queued.pk, world.decided_by_me.pk, world.decided_by_other.pk}
    for role in ("manager", "admin"):
        client = client_as(role)
        assert ids(client, "/api/trajectories/") == every
        assert trajectory_ids(client, "/api/steps/") == every
        assert trajectory_ids(client, "/api/adjudications/") == {world.decided_by_me.pk, world.decided_by_other.pk}
        assert client.get(media(world.theirs)).status_code == 200


def test_annotators_see_the_failures_waiting_in_the_human_repair_queue(client_as, world):
    """A repair the Teacher could not make is any annotator's work: its trajectory, steps and
    screenshots are visible to them while it waits (and to whoever claimed or made it after)."""
    client = client_as("annotator")
    Repair.objects.create(trajectory=world.theirs, path="step", status="needs_human")
    assert ids(client, "/api/trajectories/") == {world.mine.pk, world.theirs.pk}
    assert client.get(media(world.theirs)).status_code == 200
    assert client.get(media(world.queued)).status_code == 404
    Repair.objects.filter(trajectory=world.theirs, status="needs_human").update(status="failed")
    assert ids(client, "/api/trajectories/") == {world.mine.pk}


def test_adjudicators_see_the_queue_and_what_they_decided(client_as, world):
    client = client_as("adjudicator")
    visible = {world.queued.pk, world.decided_by_me.pk}
    assert ids(client, "/api/trajectories/") == visible
    assert trajectory_ids(client, "/api/steps/") == visible
    assert trajectory_ids(client, "/api/votes/") == visible
    assert trajectory_ids(client, "/api/verdicts/") == visible
    assert trajectory_ids(client, "/api/adjudications/") == {world.decided_by_me.pk}
    assert client.get(f"/api/trajectories/{world.decided_by_other.pk}/").status_code == 404
    assert client.get(f"/api/trajectories/{world.mine.pk}/").status_code == 404
    assert client.get(media(world.queued)).status_code == 200
    assert client.get(media(world.mine)).status_code == 404


def test_phone_accounts_are_for_staff_only(client_as):
    Device.objects.create(serial="emulator-5554", adb_server="127.0.0.1:5037", accounts=["alice@example.com"])
    for role in ("annotator", "adjudicator"):
        phones = client_as(role).get("/api/devices/").json()["results"]
        assert phones[0]["serial"] == "emulator-5554" and "accounts" not in phones[0], role
    for role in ("manager", "admin"):
        assert client_as(role).get("/api/devices/").json()["results"][0]["accounts"] == ["alice@example.com"]
