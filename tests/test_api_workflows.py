"""Records a workflow owns are read-only over the API; adjudication's own actions go through its services."""
import pytest

from annotation import adjudication
from benchmark.models import Benchmark, EvalRun
from flywheel.models import Adjudication, ModelVersion, Repair, SftEntry
from tests.annotation.test_adjudication import adjudicator, undetermined_trajectory

pytestmark = pytest.mark.django_db

JSON = "application/json"


def test_adjudicators_cannot_write_adjudication_records(client_as, role_users):
    trajectory = undetermined_trajectory()
    client = client_as("adjudicator")
    lock = client.post("/api/adjudications/", {"trajectory": trajectory.pk, "claimed_until": "2099-01-01T00:00:00Z",
                                               "decision": "correct"}, content_type=JSON)
    assert lock.status_code == 405 and not Adjudication.objects.exists()
    claim = adjudication.claim(trajectory.pk, role_users["adjudicator"])
    for method in ("put", "patch", "delete"):
        response = getattr(client, method)(f"/api/adjudications/{claim.pk}/",
                                           {"decision": "correct", "claimed_until": "2099-01-01T00:00:00Z"},
                                           content_type=JSON)
        assert response.status_code == 405, method
    claim.refresh_from_db()
    assert claim.decision == "" and claim.claimed_until.year < 2099
    trajectory.refresh_from_db()
    assert trajectory.destination == "adjudication"


def test_annotators_cannot_write_repairs(client_as, role_users):
    trajectory = undetermined_trajectory()
    trajectory.annotator = role_users["annotator"]
    trajectory.save()
    client = client_as("annotator")
    forged = client.post("/api/repairs/", {"trajectory": trajectory.pk, "path": "step", "status": "done",
                                           "repaired_by": role_users["manager"].pk}, content_type=JSON)
    assert forged.status_code == 403 and not Repair.objects.exists()
    repair = Repair.objects.create(trajectory=trajectory, path="step", status="needs_human")
    assert client.get(f"/api/repairs/{repair.pk}/").status_code == 200  # still readable
    for method in ("put", "patch", "delete"):
        response = getattr(client, method)(f"/api/repairs/{repair.pk}/", {"status": "done"}, content_type=JSON)
        assert response.status_code == 403, method
    repair.refresh_from_db()
    assert repair.status == "needs_human" and repair.repaired_by is None


def test_adjudication_actions_go_through_the_workflow(client):
    first, second = undetermined_trajectory(), undetermined_trajectory()
    alice, bob = adjudicator("alice"), adjudicator("bob")
    client.force_login(alice)
    claimed = client.post("/api/adjudications/claim/", {"trajectory": first.pk}, content_type=JSON)
    assert claimed.status_code == 200, claimed.content
    assert claimed.json()["adjudicator"] == alice.pk and claimed.json()["decision"] == ""
    assert client.post("/api/adjudications/decide/", {"trajectory": first.pk, "decision": "maybe"},
                       content_type=JSON).status_code == 400

    client.force_login(bob)
    refused = client.post("/api/adjudications/claim/", {"trajectory": first.pk}, content_type=JSON)
    assert refused.status_code == 409 and "alice" in refused.json()["detail"]
    refused = client.post("/api/adjudications/decide/", {"trajectory": first.pk, "decision": "wrong"},
                          content_type=JSON)
    assert refused.status_code == 409
    taken = client.post("/api/adjudications/next/")
    assert taken.status_code == 200 and taken.json()["trajectory"] == second.pk
    assert client.post("/api/adjudications/release/", {"trajectory": second.pk}, content_type=JSON).status_code == 204
    assert not second.adjudications.exists()

    client.force_login(alice)
    decided = client.post("/api/adjudications/decide/", {"trajectory": first.pk, "decision": "correct",
                                                          "note": "the switch is on"}, content_type=JSON)
    assert decided.status_code == 200, decided.content
    record = first.adjudications.get()  # the same audit record as the page writes
    assert (record.adjudicator, record.decision, record.note) == (alice, "correct", "the switch is on")
    assert record.decided_at is not None and record.claimed_until is None
    first.refresh_from_db()
    assert (first.verdict, first.destination) == ("true", "sft")
    assert SftEntry.objects.filter(trajectory=first, intake="adjudicated").exists()
    gone = client.post("/api/adjudications/claim/", {"trajectory": first.pk}, content_type=JSON)
    assert gone.status_code == 409 and "no longer waiting" in gone.json()["detail"]
    assert client.post("/api/adjudications/claim/", {"trajectory": 10**6}, content_type=JSON).status_code == 400


def test_only_adjudicators_act_on_the_queue(client_as):
    trajectory = undetermined_trajectory()
    for role in ("annotator", "manager"):
        response = client_as(role).post("/api/adjudications/claim/", {"trajectory": trajectory.pk}, content_type=JSON)
        assert response.status_code == 403, role
    assert not Adjudication.objects.exists()
    assert client_as("adjudicator").post("/api/adjudications/next/").json()["trajectory"] == trajectory.pk


def test_what_an_evaluation_produces_is_not_written_over_the_api(client_as, role_users):
    from tests.benchmark.test_views import frozen_version

    version = ModelVersion.objects.create(name="policy-v1")
    draft = Benchmark.objects.create(name="draft", version="v1")
    refused = client_as("manager").post("/api/eval-runs/", {"benchmark": draft.pk, "model_version": version.pk},
                                        content_type=JSON)
    assert refused.status_code == 400 and "not frozen" in refused.json()["detail"]  # launched only through the service
    benchmark = frozen_version(role_users["manager"])
    created = client_as("manager").post("/api/eval-runs/", {
        "benchmark": benchmark.pk, "model_version": version.pk, "status": "done", "scores": {"sr": 1.0},
        "created_by": role_users["admin"].pk}, content_type=JSON)
    assert created.status_code == 201, created.content
    run = EvalRun.objects.get()
    assert (run.status, run.scores, run.created_by) == ("queued", {}, role_users["manager"])
    assert client_as("manager").patch(f"/api/eval-runs/{run.pk}/", {"status": "done"},
                                      content_type=JSON).status_code == 405

