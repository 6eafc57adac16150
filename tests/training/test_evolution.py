"""The self-evolution loop's trainer: one SFT run per round on a fresh snapshot, and M(t+1) is only
handed to the loop once it can act (served and registered)."""
import json

import pytest

from flywheel.models import EvolutionLoop, LoopRound, ModelVersion
from tests.training.test_exports import make_trajectory, sft
from training.models import TrainingRun
from training.round_trainer import train_round

pytestmark = pytest.mark.django_db


@pytest.fixture
def loop_round(settings, tmp_path):
    settings.TRAINING_ROOT = tmp_path / "training"
    settings.TRAINING_LOOP_CONFIG = json.dumps({"run": {"model": {"tiny": {}}, "max_steps": 2},
                                                "snapshot": {"k": 2}})
    model = ModelVersion.objects.create(name="M0", kind="endpoint", endpoint_url="http://127.0.0.1:9/v1")
    loop = EvolutionLoop.objects.create(name="loop", model_version=model)
    return LoopRound.objects.create(loop=loop, number=1, model_version=model)


def test_an_empty_sft_pool_fails_the_round_with_the_reason(loop_round):
    reply = train_round(loop_round)
    assert reply["status"] == "failed" and "SFT pool has no entries yet" in reply["detail"]


def test_one_run_per_round_then_the_served_model_moves_the_loop_on(loop_round):
    sft(make_trajectory(n_steps=2))
    first = train_round(loop_round)
    assert first["status"] == "running" and "queued" in first["detail"]
    run = TrainingRun.objects.get()
    assert run.base_model == loop_round.model_version and run.config["max_steps"] == 2
    assert train_round(loop_round)["status"] == "running" and TrainingRun.objects.count() == 1  # asked again
    produced = ModelVersion.objects.create(name="M1", kind="checkpoint", parent=loop_round.model_version,
                                           artifact="/tmp/m1")
    TrainingRun.objects.filter(pk=run.pk).update(status="done", produced_model=produced)
    waiting = train_round(loop_round)
    assert waiting["status"] == "running" and "register its endpoint" in waiting["detail"]
    from training.models import Serving

    serving = Serving.objects.create(version=produced, state="starting", host="gpu-1")
    assert train_round(loop_round)["status"] == "running" and "gpu-1" in train_round(loop_round)["detail"]
    serving.delete()
    ModelVersion.objects.filter(pk=produced.pk).update(kind="endpoint", endpoint_url="http://127.0.0.1:9/v1")
    done = train_round(loop_round)
    assert done["status"] == "done" and done["model_version"].pk == produced.pk


def test_a_checkpoint_that_cannot_be_served_fails_the_round(loop_round):
    from training.models import Serving

    sft(make_trajectory(n_steps=2))
    train_round(loop_round)
    produced = ModelVersion.objects.create(name="M1", kind="checkpoint", parent=loop_round.model_version,
                                           artifact="/tmp/m1")
    TrainingRun.objects.update(status="done", produced_model=produced)
    Serving.objects.create(version=produced, state="failed", error="no model at /tmp/m1")
    reply = train_round(loop_round)
    assert reply["status"] == "failed" and "no model at /tmp/m1" in reply["detail"]


def test_a_failed_run_fails_the_round(loop_round):
    sft(make_trajectory(n_steps=2))
    train_round(loop_round)
    TrainingRun.objects.update(status="failed", error="out of memory")
    reply = train_round(loop_round)
    assert reply["status"] == "failed" and "out of memory" in reply["detail"]
