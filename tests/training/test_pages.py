"""The training pages: managers export, launch, watch and serve; other roles are refused."""
import html
import json

import pytest

from flywheel.models import ModelVersion
from tests.flywheel.openai_stub import StubOpenAI
from tests.training.test_exports import make_trajectory, sft
from training.models import DataSnapshot, TrainingRun
from training.snapshots import create_snapshot

pytestmark = pytest.mark.django_db
PAGES = ["/training/"]


@pytest.fixture(autouse=True)
def training_root(settings, tmp_path):
    settings.TRAINING_ROOT = tmp_path / "training"


@pytest.mark.parametrize("role, status", [("annotator", 403), ("adjudicator", 403), (None, 403)])
def test_only_managers_and_admins_see_training(client_as, role, status):
    client = client_as(role)
    assert client.get("/training/").status_code == status
    assert client.post("/training/snapshots/", {"kind": "sft"}).status_code == status
    assert client.post("/training/runs/", {"stage": "sft"}).status_code == status
    assert not DataSnapshot.objects.exists() and not TrainingRun.objects.exists()


def test_anonymous_goes_to_login(client):
    assert client.get("/training/").status_code == 302


def test_empty_states_say_what_to_do(client_as):
    page = client_as("manager").get("/training/").content.decode()
    assert "No ready snapshot yet: export the CPT or SFT pool" in page
    assert "No training run yet" in page and "No snapshot yet" in page


def test_export_then_launch_from_the_page(client_as):
    sft(make_trajectory(n_steps=3))
    client = client_as("manager")
    reply = client.post("/training/snapshots/", {"kind": "sft", "name": "round 1", "snapshot_config": '{"k": 2}'})
    snapshot = DataSnapshot.objects.get()
    assert reply.status_code == 302 and reply["Location"] == f"/training/snapshots/{snapshot.pk}/"
    page = client.get(reply["Location"]).content.decode()
    assert snapshot.status == "ready" and snapshot.content_hash in page and "[Observation]" in page
    # a misspelt key is refused with its name, nothing is launched
    reply = client.post("/training/runs/", {"stage": "sft", "snapshot": snapshot.pk,
                                            "run_config": '{"lerning_rate": 0.1, "model": {"tiny": {}}}'},
                        follow=True)
    assert "lerning_rate" in reply.content.decode() and not TrainingRun.objects.exists()
    # the test model's key at the top level: one message, whose example is the form that works
    reply = client.post("/training/runs/", {"stage": "sft", "snapshot": snapshot.pk, "run_config": '{"tiny": {}}'},
                        follow=True)
    page = html.unescape(reply.content.decode())
    assert '{"model": {"tiny": {}}}' in page and "unknown configuration key" not in page
    assert not TrainingRun.objects.exists()
    reply = client.post("/training/runs/", {"stage": "sft", "snapshot": snapshot.pk, "run_config": "{not json"},
                        follow=True)
    assert "not valid JSON" in reply.content.decode()
    reply = client.post("/training/runs/", {"stage": "sft", "snapshot": snapshot.pk,
                                            "run_config": json.dumps({"model": {"tiny": {}}, "max_steps": 2})})
    run = TrainingRun.objects.get()
    assert reply["Location"] == f"/training/runs/{run.pk}/"
    assert run.status == "queued" and run.snapshot == snapshot and run.config["max_steps"] == 2
    assert run.config["learning_rate"] == 1e-5  # the report's default filled in
    page = client.get(reply["Location"]).content.decode()
    assert "No step finished yet" in page and 'hx-trigger="every 2s"' in page
    # cancelled while queued: it stops at once
    client.post(f"/training/runs/{run.pk}/cancel/")
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_an_empty_pool_gives_an_empty_snapshot_that_cannot_be_trained(client_as):
    client = client_as("manager")
    reply = client.post("/training/snapshots/", {"kind": "sft"}, follow=True)
    assert "SFT pool has no entries yet" in reply.content.decode()
    snapshot = DataSnapshot.objects.get()
    reply = client.post("/training/runs/", {"stage": "sft", "snapshot": snapshot.pk,
                                            "run_config": '{"model": {"tiny": {}}}'}, follow=True)
    assert "empty" in reply.content.decode().lower() and not TrainingRun.objects.exists()


def test_the_run_page_charts_the_loss(client_as):
    sft(make_trajectory(n_steps=2))
    snapshot = create_snapshot("sft")
    run = TrainingRun.objects.create(stage="sft", snapshot=snapshot, status="running", config={"model": {"tiny": {}}},
                                     progress={"step": 2, "total_steps": 4, "loss": 1.5},
                                     metrics=[{"step": 1, "loss": 2.0, "lr": 1e-5}, {"step": 2, "loss": 1.5, "lr": 9e-6}])
    client = client_as("manager")
    page = client.get(f"/training/runs/{run.pk}/").content.decode()
    assert 'id="loss-chart"' in page and '"data": [2.0, 1.5]' in page
    live = client.get(f"/training/runs/{run.pk}/", HTTP_HX_REQUEST="true")
    assert live.status_code == 200 and "step 2 of 4" in live.content.decode()
    run.status = "done"
    run.save()
    assert client.get(f"/training/runs/{run.pk}/", HTTP_HX_REQUEST="true").status_code == 286  # polling stops


def test_an_rl_runs_page_says_where_its_step_rewards_came_from_and_why_groups_were_dropped(client_as):
    rollouts = {"rows": 12, "groups_dropped": 2, "dropped": {"7": "every rollout succeeded", "9": "every rollout succeeded"},
                "dropped_reasons": {"every rollout succeeded": 2}, "passes": 5, "step_reward_source": "reward_model",
                "step_reward_model": "prm-1"}
    run = TrainingRun.objects.create(stage="rl", status="running", config={"model": {"tiny": {}}},
                                     progress={"phase": "update", "rollouts": rollouts})
    page = html.unescape(client_as("manager").get(f"/training/runs/{run.pk}/").content.decode())
    summary = page.split('data-testid="rollout-summary">')[1].split("</p>")[0]
    assert "12 step samples" in summary and "the step reward model prm-1" in summary
    assert "2 groups dropped (every rollout succeeded: 2)" in summary and "{" not in summary


def test_the_model_page_shows_lineage_and_registers_the_served_endpoint(client_as, tmp_path):
    base = ModelVersion.objects.create(name="qwen-base", kind="endpoint", endpoint_url="http://127.0.0.1:9/v1")
    sft(make_trajectory(n_steps=2))
    snapshot = create_snapshot("sft")
    first = ModelVersion.objects.create(name="qwen-base+sft#1", kind="checkpoint", artifact=str(tmp_path / "a"),
                                        parent=base)
    TrainingRun.objects.create(stage="sft", snapshot=snapshot, base_model=base, produced_model=first, status="done",
                               config={"learning_rate": 1e-5, "batch_size": 128}, metrics=[{"step": 1, "loss": 0.25}])
    second = ModelVersion.objects.create(name="qwen-base+sft#1+rl#2", kind="checkpoint",
                                         artifact=str(tmp_path / "b"), parent=first)
    TrainingRun.objects.create(stage="rl", base_model=first, produced_model=second, status="done",
                               config={"learning_rate": 1e-6}, progress={"rl_run": 77}, metrics=[{"step": 1, "loss": -0.1}])
    client = client_as("manager")
    page = client.get(f"/training/models/{second.pk}/").content.decode()
    lineage = page[page.index('data-testid="lineage"'):]
    assert lineage.index("qwen-base") < lineage.index("qwen-base+sft#1") < lineage.index("qwen-base+sft#1+rl#2")
    assert snapshot.content_hash[:10] in lineage and "0.2500" in lineage and "RL run" in lineage
    assert "vllm serve" in page and "--limit-mm-per-prompt" in page
    assert 'data-testid="register-endpoint"' not in page  # an admin re-points endpoints (flywheel/model_endpoints.py)
    client = client_as("admin")
    with StubOpenAI(model="qwen-base-sft-1-rl-2") as stub:
        reply = client.post(f"/training/models/{second.pk}/endpoint/", {"endpoint_url": stub.url}, follow=True)
    second.refresh_from_db()
    assert second.kind == "endpoint" and second.health["ok"] and "answers" in reply.content.decode()
    reply = client.post(f"/training/models/{first.pk}/endpoint/", {"endpoint_url": "ftp://x"}, follow=True)
    assert "Endpoint not registered" in reply.content.decode()


def test_the_api_launches_through_the_workflow(client_as):
    sft(make_trajectory(n_steps=2))
    client = client_as("manager")
    reply = client.post("/api/snapshots/", {"kind": "sft", "config": {"k": 1}}, content_type="application/json")
    assert reply.status_code == 201 and reply.json()["status"] == "ready"
    snapshot_id = reply.json()["id"]
    reply = client.post("/api/training-runs/", {"stage": "sft", "snapshot": snapshot_id,
                                                "config": {"model": {"tiny": {}}, "bogus": 1}},
                        content_type="application/json")
    assert reply.status_code == 400 and "'bogus'" in reply.json()["detail"]
    reply = client.post("/api/training-runs/", {"stage": "sft", "snapshot": snapshot_id,
                                                "config": {"model": {"tiny": {}}}, "status": "done"},
                        content_type="application/json")
    assert reply.status_code == 201 and reply.json()["status"] == "queued"  # status is not the client's to set
    run_id = reply.json()["id"]
    assert client.patch(f"/api/training-runs/{run_id}/", {"status": "done"},
                        content_type="application/json").status_code == 405
    assert client.delete(f"/api/snapshots/{snapshot_id}/").status_code == 405
    assert client.post(f"/api/snapshots/{snapshot_id}/verify/").json() == {"problems": []}
    assert client.post(f"/api/training-runs/{run_id}/cancel/").json()["status"] == "cancelled"
    assert client.post(f"/api/training-runs/{run_id}/cancel/").status_code == 409
    assert client_as("annotator").get("/api/training-runs/").status_code == 403


@pytest.mark.django_db(transaction=True)
def test_a_large_pool_is_exported_by_a_worker(client_as, settings, monkeypatch):
    settings.TRAINING_SNAPSHOT_SYNC_ROWS = 1
    sent = []
    from training import tasks

    monkeypatch.setattr(tasks.build_snapshot_task, "apply_async", lambda args, queue: sent.append((args, queue)))
    for _ in range(2):
        sft(make_trajectory(n_steps=2))
    client = client_as("manager")
    reply = client.post("/training/snapshots/", {"kind": "sft"}, follow=True)
    snapshot = DataSnapshot.objects.get()
    assert snapshot.status == "building" and sent == [((snapshot.pk,), "training")]
    assert "a training worker builds it" in reply.content.decode() and 'hx-trigger="every 2s"' in reply.content.decode()
    assert tasks.build_snapshot_task(snapshot.pk) == "ready"  # what the worker runs
    assert tasks.build_snapshot_task(snapshot.pk) == "skipped"  # delivered twice: built once
