"""The benchmark API goes through the same services as the pages: checked quota tables, frozen
versions that refuse changes, evaluation runs created by launching them, read-only results."""
import pytest

from benchmark.models import Benchmark, EvalResult, EvalRun
from benchmark.presets import BASIC
from flywheel.models import ModelVersion
from flywheel.policies import default_policy_version
from tests.benchmark.test_views import draft_version, evaluation_with, frozen_version

pytestmark = pytest.mark.django_db

JSON = "application/json"


def test_creating_a_version_checks_its_quota_table(client_as, role_users):
    client = client_as("manager")
    bad = {"name": "api", "version": "v1", "quota_table": {"shares": {"path_complexity": {"simple": 0.2}},
                                                           "colour": "blue"}}
    response = client.post("/api/benchmarks/", bad, content_type=JSON)
    assert response.status_code == 400
    problems = response.json()["quota_table"]
    assert "unknown field 'colour'" in problems and "shares.path_complexity: the shares sum to 0.200, not 1" in problems
    assert not Benchmark.objects.exists()
    response = client.post("/api/benchmarks/", {"name": "api", "version": "v1", "quota_table": BASIC,
                                                "status": "frozen", "frozen": True, "content_hash": "x"},
                           content_type=JSON)
    assert response.status_code == 201, response.content
    benchmark = Benchmark.objects.get()
    assert (benchmark.status, benchmark.frozen, benchmark.content_hash) == ("draft", False, "")
    assert benchmark.created_by == role_users["manager"] and benchmark.purpose == BASIC["purpose"]
    again = client.post("/api/benchmarks/", {"name": "api", "version": "v1"}, content_type=JSON)
    assert again.status_code == 400
    assert client_as("annotator").post("/api/benchmarks/", {"name": "x", "version": "v1"},
                                       content_type=JSON).status_code == 403
    assert client_as("adjudicator").get("/api/benchmarks/").status_code == 403


def test_a_draft_changes_a_frozen_version_refuses(client_as, role_users):
    client = client_as("manager")
    draft = draft_version(name="draft")
    response = client.patch(f"/api/benchmarks/{draft.pk}/", {"purpose": "sharper", "status": "frozen"},
                            content_type=JSON)
    assert response.status_code == 200, response.content
    draft.refresh_from_db()
    assert draft.purpose == "sharper" and draft.status == "draft"
    response = client.patch(f"/api/benchmarks/{draft.pk}/", {"quota_table": {"size": 0}}, content_type=JSON)
    assert response.status_code == 400 and "size: a positive whole number" in str(response.json())

    frozen = frozen_version(role_users["manager"])
    for method in ("patch", "put"):
        response = getattr(client, method)(f"/api/benchmarks/{frozen.pk}/", {"name": "bench", "version": "v1",
                                                                             "purpose": "changed"}, content_type=JSON)
        assert response.status_code == 409, method
        assert "is frozen: it never changes; derive a new version" in response.json()["detail"]
    response = client.delete(f"/api/benchmarks/{frozen.pk}/")
    assert response.status_code == 409 and "is frozen or has evaluation runs" in response.json()["detail"]
    frozen.refresh_from_db()
    assert frozen.purpose == "" and Benchmark.objects.filter(pk=frozen.pk).exists()
    assert client.delete(f"/api/benchmarks/{draft.pk}/").status_code == 204
    assert not Benchmark.objects.filter(pk=draft.pk).exists()


def test_freeze_and_derive_actions(client_as, role_users):
    client = client_as("manager")
    benchmark = draft_version(n=2)
    response = client.post(f"/api/benchmarks/{benchmark.pk}/freeze/")
    assert response.status_code == 400 and "2 queries are not reviewed yet" in response.json()["detail"]
    for item in benchmark.items.all():
        client.post(f"/benchmarks/{benchmark.pk}/review/{item.pk}/", {"text": item.query.text, "decision": "approve"})
    response = client.post(f"/api/benchmarks/{benchmark.pk}/freeze/")
    assert response.status_code == 200 and response.json()["frozen"] and len(response.json()["content_hash"]) == 64
    assert client.post(f"/api/benchmarks/{benchmark.pk}/freeze/").status_code == 409

    bad = client.post(f"/api/benchmarks/{benchmark.pk}/derive/", {"version": "v2", "shifts": {"operation": 3}},
                      content_type=JSON)
    assert bad.status_code == 400 and "shifts.operation: a mapping" in str(bad.json())
    response = client.post(f"/api/benchmarks/{benchmark.pk}/derive/",
                           {"version": "v2", "shifts": {"operation": {"gesture-level": 0.5}}}, content_type=JSON)
    assert response.status_code == 201, response.content
    child = Benchmark.objects.get(pk=response.json()["id"])
    assert child.parent == benchmark and child.quota_table["shares"]["operation"] == {"gesture-level": 1.0}
    assert child.evolution["moved"][0]["dimension"] == "operation"
    composition = client.get(f"/api/benchmarks/{child.pk}/composition/").json()
    assert composition["size"] == 2 and composition["drift"][0]["dimension"] == "operation"


def test_generate_action_dispatches_after_commit(client_as, role_users, monkeypatch, django_capture_on_commit_callbacks):
    from benchmark import tasks

    sent = []
    monkeypatch.setattr(tasks.generate, "delay", lambda *args: sent.append(args))
    draft = draft_version()
    client = client_as("manager")
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"/api/benchmarks/{draft.pk}/generate/").status_code == 202
    assert sent == [(draft.pk, role_users["manager"].pk)]
    frozen = frozen_version(role_users["manager"], name="frozen")
    assert client.post(f"/api/benchmarks/{frozen.pk}/generate/").status_code == 409 and len(sent) == 1


def test_an_evaluation_run_is_created_by_launching_it(client_as, role_users):
    client = client_as("manager")
    version = ModelVersion.objects.create(name="policy-v1")
    draft = draft_version(name="draft")
    refused = client.post("/api/eval-runs/", {"benchmark": draft.pk, "model_version": version.pk}, content_type=JSON)
    assert refused.status_code == 400 and "is not frozen: review its queries and freeze it first" in refused.json()["detail"]
    frozen = frozen_version(role_users["manager"])
    refused = client.post("/api/eval-runs/", {"benchmark": frozen.pk, "model_version": version.pk,
                                              "config": {"temperature": 2}}, content_type=JSON)
    assert refused.status_code == 400 and "unknown evaluation setting(s): temperature" in str(refused.json())
    refused = client.post("/api/eval-runs/", {"benchmark": frozen.pk, "model_version": version.pk,
                                              "config": {"max_steps": -3}}, content_type=JSON)
    assert refused.status_code == 400 and "max_steps: between 1 and 500" in str(refused.json())
    refused = client.post("/api/eval-runs/", {"benchmark": frozen.pk, "model_version": version.pk, "split": "x"},
                          content_type=JSON)
    assert refused.status_code == 400
    assert not EvalRun.objects.exists()
    created = client.post("/api/eval-runs/", {"benchmark": frozen.pk, "model_version": version.pk, "split": "open",
                                              "config": {"max_steps": 9}, "status": "done", "scores": {"sr": 1.0},
                                              "created_by": role_users["admin"].pk}, content_type=JSON)
    assert created.status_code == 201, created.content
    run = EvalRun.objects.get()
    assert created.json()["id"] == run.pk
    assert (run.status, run.scores, run.created_by, run.split) == ("queued", {}, role_users["manager"], "open")
    assert run.config["infer"]["max_steps"] == 9 and run.collection_run is not None and run.total == 3
    for method in ("put", "patch", "delete"):
        response = getattr(client, method)(f"/api/eval-runs/{run.pk}/", {"status": "done"}, content_type=JSON)
        assert response.status_code == 405, method
    assert EvalRun.objects.get().status == "queued"


def test_rejudge_cancel_and_resume_actions(client_as, role_users, monkeypatch, django_capture_on_commit_callbacks):
    from benchmark import tasks

    sent = []
    monkeypatch.setattr(tasks.rejudge, "delay", lambda run_id: sent.append(run_id))
    client = client_as("manager")
    run = evaluation_with(frozen_version(role_users["manager"]), ["success", "split", "failure"], done=False)
    response = client.post(f"/api/eval-runs/{run.pk}/rejudge/")
    assert response.status_code == 409 and "re-judge it once it has finished" in response.json()["detail"]
    assert client.post(f"/api/eval-runs/{run.pk}/resume/").status_code == 409
    response = client.post(f"/api/eval-runs/{run.pk}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert client.post(f"/api/eval-runs/{run.pk}/cancel/").status_code == 409
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/api/eval-runs/{run.pk}/rejudge/")
    assert response.status_code == 202 and sent == [run.pk]
    assert client_as("adjudicator").post(f"/api/eval-runs/{run.pk}/rejudge/").status_code == 403


def test_results_are_read_only_and_experts_score_splits(client_as, role_users):
    manager = role_users["manager"]
    run = evaluation_with(frozen_version(manager), ["success", "split", "failure"])
    other = evaluation_with(frozen_version(manager, name="other"), ["success"])
    client = client_as("manager")
    listed = client.get(f"/api/eval-results/?eval_run={run.pk}").json()
    assert listed["count"] == 3 and {r["eval_run"] for r in listed["results"]} == {run.pk}
    assert [r["state"] for r in listed["results"]] == ["scored", "split", "scored"]
    assert client.get(f"/api/eval-results/?eval_run={other.pk}").json()["count"] == 1
    assert client.get("/api/eval-results/?state=split").json()["count"] == 1
    split = run.results.get(state="split")
    assert client.post("/api/eval-results/", {"eval_run": run.pk, "item": split.item_id}, content_type=JSON
                       ).status_code == 405
    for method in ("put", "patch", "delete"):
        response = getattr(client, method)(f"/api/eval-results/{split.pk}/", {"outcome": "success"}, content_type=JSON)
        assert response.status_code == 405, method

    assert client_as("annotator").get("/api/eval-results/").status_code == 403
    assert client_as("annotator").post(f"/api/eval-results/{split.pk}/expert-verdict/", {"outcome": "success"},
                                       content_type=JSON).status_code == 403
    expert = client_as("adjudicator")
    assert expert.get(f"/api/eval-results/{split.pk}/").json()["state"] == "split"
    bad = expert.post(f"/api/eval-results/{split.pk}/expert-verdict/", {"outcome": "probably"}, content_type=JSON)
    assert bad.status_code == 400
    done = expert.post(f"/api/eval-results/{split.pk}/expert-verdict/", {"outcome": "success", "note": "ok"},
                       content_type=JSON)
    assert done.status_code == 200 and done.json()["state"] == "expert"
    assert done.json()["expert_by"] == role_users["adjudicator"].pk
    assert EvalRun.objects.get(pk=run.pk).scores["sr"] == pytest.approx(2 / 3, abs=1e-4)
    not_scored = EvalResult.objects.create(eval_run=run, item=split.item, state="not_scored", superseded=True)
    refused = expert.post(f"/api/eval-results/{not_scored.pk}/expert-verdict/", {"outcome": "failure"},
                          content_type=JSON)
    assert refused.status_code == 409 and "cannot be scored by hand" in refused.json()["detail"]


def test_the_default_offline_policy_can_be_evaluated(client_as, role_users):
    frozen = frozen_version(role_users["manager"])
    created = client_as("admin").post("/api/eval-runs/", {"benchmark": frozen.pk,
                                                          "model_version": default_policy_version().pk},
                                      content_type=JSON)
    assert created.status_code == 201 and created.json()["split"] == "all"
