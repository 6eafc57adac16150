"""The self-evolution loop's trainer for served models: per round, SFT on a fresh snapshot, then the
loop's RL iterations, each started only once the checkpoint before it is served and healthy; a round
that needs a person pauses with the reason."""
import json

import pytest

from flywheel.models import EvolutionLoop, LoopRound, ModelVersion
from tests.training.test_exports import make_trajectory, sft
from training.models import Serving, TrainingRun
from training.round_trainer import train_round

pytestmark = pytest.mark.django_db
HEALTHY = {"ok": True, "models": ["m"]}


@pytest.fixture
def loop_round(settings, tmp_path):
    settings.TRAINING_ROOT = tmp_path / "training"
    settings.TRAINING_LOOP_CONFIG = json.dumps({"run": {"max_steps": 2}, "snapshot": {"k": 2},
                                                "rl": {"group_size": 3, "queries_per_iteration": 2}})
    model = ModelVersion.objects.create(name="M0", kind="endpoint", endpoint_url="http://127.0.0.1:9/v1",
                                        artifact="/tmp/m0", health=HEALTHY)
    loop = EvolutionLoop.objects.create(name="loop", model_version=model, config={"rl_iterations": 2})
    return LoopRound.objects.create(loop=loop, number=1, model_version=model)


def finish(run, name):
    """The run is done and made checkpoint `name` (as the supervisor's finish_run records it)."""
    produced = ModelVersion.objects.create(name=name, kind="checkpoint", parent=run.base_model,
                                           artifact=f"/tmp/{name}")
    TrainingRun.objects.filter(pk=run.pk).update(status="done", produced_model=produced)
    return produced


def serve(model, host="host-1"):
    """What a model host does once the checkpoint's server answers."""
    Serving.objects.update_or_create(version=model, defaults={"state": "serving", "host": host})
    ModelVersion.objects.filter(pk=model.pk).update(kind="endpoint", endpoint_url="http://127.0.0.1:9/v1",
                                                    health=HEALTHY)


def newest_run():
    return TrainingRun.objects.order_by("-pk").first()


def test_an_empty_sft_pool_pauses_the_round_with_the_reason(loop_round):
    reply = train_round(loop_round)
    assert reply["status"] == "paused" and "SFT pool has no entries yet" in reply["detail"]


def test_a_round_is_sft_then_its_rl_iterations_each_on_the_served_checkpoint_before_it(loop_round):
    sft(make_trajectory(n_steps=2))
    first = train_round(loop_round)
    assert first["status"] == "running" and "SFT: training run" in first["detail"]
    sft_run = newest_run()
    assert sft_run.stage == "sft" and sft_run.base_model == loop_round.model_version
    assert sft_run.config["max_steps"] == 2 and sft_run.config["model"] == {"path": "/tmp/m0"}
    assert train_round(loop_round)["status"] == "running" and TrainingRun.objects.count() == 1  # asked again
    m1 = finish(sft_run, "M1")
    waiting = train_round(loop_round)
    assert waiting["status"] == "running" and "waiting for a model host" in waiting["detail"]
    assert Serving.objects.get(version=m1).wanted_until is not None  # asked for: a full host makes room
    Serving.objects.filter(version=m1).update(state="starting", host="gpu-1")
    assert "gpu-1" in train_round(loop_round)["detail"] and TrainingRun.objects.count() == 1
    serve(m1)
    assert "RL iteration 1" in train_round(loop_round)["detail"]
    rl_1 = newest_run()
    assert rl_1.stage == "rl" and rl_1.base_model == m1 and rl_1.config["model"] == {"path": "/tmp/M1"}
    assert rl_1.config["group_size"] == 3 and rl_1.config["queries_per_iteration"] == 2
    assert rl_1.progress["loop_round"] == loop_round.pk and rl_1.progress["loop_stage"] == 1
    m2 = finish(rl_1, "M2")
    ModelVersion.objects.filter(pk=m2.pk).update(kind="endpoint", endpoint_url="http://127.0.0.1:9/v1",
                                                 health={"ok": False, "error": "HTTP 502"})
    Serving.objects.update_or_create(version=m2, defaults={"state": "serving", "host": "host-1"})
    unhealthy = train_round(loop_round)
    assert unhealthy["status"] == "running" and "not healthy yet: HTTP 502" in unhealthy["detail"]
    serve(m2)
    train_round(loop_round)
    rl_2 = newest_run()
    assert rl_2.base_model == m2 and rl_2.progress["loop_stage"] == 2
    m3 = finish(rl_2, "M3")
    assert train_round(loop_round)["status"] == "running"  # M(t+1) too is only handed over once served
    serve(m3)
    done = train_round(loop_round)
    assert done["status"] == "done" and done["model_version"].pk == m3.pk
    assert TrainingRun.objects.count() == 3
    assert [m.name for m in (m3, m3.parent, m3.parent.parent)] == ["M3", "M2", "M1"]


def test_no_rl_iterations_makes_the_round_sft_only(loop_round):
    EvolutionLoop.objects.filter(pk=loop_round.loop_id).update(config={"rl_iterations": 0})
    loop_round.refresh_from_db()
    sft(make_trajectory(n_steps=2))
    train_round(loop_round)
    m1 = finish(newest_run(), "M1")
    serve(m1)
    done = train_round(loop_round)
    assert done["status"] == "done" and done["model_version"].pk == m1.pk and TrainingRun.objects.count() == 1


def test_a_checkpoint_that_cannot_be_served_pauses_the_round_with_the_loaders_words(loop_round):
    sft(make_trajectory(n_steps=2))
    train_round(loop_round)
    m1 = finish(newest_run(), "M1")
    Serving.objects.create(version=m1, state="failed", error="no model at /tmp/M1")
    reply = train_round(loop_round)
    assert reply["status"] == "paused" and "no model at /tmp/M1" in reply["detail"] and "Serve again" in reply["detail"]
    assert TrainingRun.objects.count() == 1


def test_a_hand_registered_endpoint_that_does_not_answer_pauses_the_round(loop_round):
    ModelVersion.objects.filter(pk=loop_round.model_version_id).update(health={"ok": False, "error": "timed out"})
    loop_round.refresh_from_db()
    sft(make_trajectory(n_steps=2))
    train_round(loop_round)  # SFT needs no served model: it starts
    m1 = finish(newest_run(), "M1")
    ModelVersion.objects.filter(pk=m1.pk).update(kind="endpoint", endpoint_url="http://127.0.0.1:9/v1",
                                                 health={"ok": False, "error": "connection refused"})
    reply = train_round(loop_round)
    assert reply["status"] == "paused" and "connection refused" in reply["detail"]


def test_a_failed_run_pauses_the_round_and_a_resumed_run_carries_on(loop_round):
    sft(make_trajectory(n_steps=2))
    train_round(loop_round)
    TrainingRun.objects.update(status="failed", error="out of memory")
    reply = train_round(loop_round)
    assert reply["status"] == "paused" and "out of memory" in reply["detail"] and "Resume the run" in reply["detail"]
    TrainingRun.objects.update(status="running", error="", progress={"loop_round": loop_round.pk, "loop_stage": 0,
                                                                     "phase": "train", "step": 1, "total_steps": 2})
    again = train_round(loop_round)
    assert again["status"] == "running" and "step 1/2" in again["detail"] and TrainingRun.objects.count() == 1


def test_an_rl_iteration_with_nothing_to_learn_from_ends_the_round_with_what_it_has(loop_round):
    sft(make_trajectory(n_steps=2))
    train_round(loop_round)
    m1 = finish(newest_run(), "M1")
    serve(m1)
    train_round(loop_round)
    rl_1 = newest_run()
    TrainingRun.objects.filter(pk=rl_1.pk).update(status="failed", error="no rollout group is in the useful range",
                                                  progress={**rl_1.progress, "no_signal": "no_useful_group"})
    done = train_round(loop_round)
    assert done["status"] == "done" and done["model_version"].pk == m1.pk
    assert "RL iteration 1 learnt nothing (no rollout group" in done["detail"] and TrainingRun.objects.count() == 2
    TrainingRun.objects.filter(pk=rl_1.pk).update(progress={**rl_1.progress, "no_signal": "no_queries"})
    assert "the RL pool had no query left" in train_round(loop_round)["detail"]
