"""Issue #32's proof on this machine: the tiny Qwen2.5-VL goes through two loop rounds with nobody
acting — SFT, served, RL iterations with rollouts on the virtual farm, served again, evaluated on the
benchmark's held-out split — through a real Celery worker, a real model host and the virtual farm
(the scenario: tests/training/vlm_loop.py; its figures at full size: perf/vlm_loop.py)."""
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from devices.registry import discover_devices
from flywheel.models import Destination, Line, Trajectory
from tests.conftest import ROOT, free_first_port, process_env, stop
from tests.training.vlm_loop import VlmLoop, applied_settings, line
from training.models import Serving, TrainingRun

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("torch")]
TRAINING_DIR = tempfile.mkdtemp(prefix="vlm-loop-")
PHONES = 3
WORKER_ENV = {"TRAINING_ROOT": TRAINING_DIR, "OMP_NUM_THREADS": "1", "ECDM_AUTOMATIC": "1", "ECDM_REPLAY": "0",
              **applied_settings(PHONES)}


@pytest.fixture(scope="module", autouse=True)
def remove_training_dir():
    yield
    shutil.rmtree(TRAINING_DIR, ignore_errors=True)


@pytest.fixture
def model_host(transactional_db, tmp_path):
    """`manage.py model_host` (what `make model-host` runs), built-in servers on CPU."""
    log = open(tmp_path / "model-host.log", "wb")
    process = subprocess.Popen(
        [str(ROOT / ".venv/bin/python"), "manage.py", "model_host", "--name", "test-host", "--interval", "1"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        env=process_env(TRAINING_ROOT=TRAINING_DIR, MODEL_HOST_PORT=str(free_first_port()), MODEL_HOST_ENGINE="builtin",
                        MODEL_HOST_DEVICE="cpu", MODEL_HOST_KEEP_WARM="2", MODEL_HOST_MAX_SERVERS="2",
                        OMP_NUM_THREADS="1"))
    yield process
    stop(process, timeout=30)
    log.close()


def test_the_tiny_vlm_goes_round_the_loop_twice_with_nobody_acting(farm_settings, celery_worker_process, model_host,
                                                                    settings, tmp_path, client_as):
    settings.TRAINING_ROOT = Path(TRAINING_DIR)
    for key, value in applied_settings(PHONES).items():
        setattr(settings, key, int(value) if value.isdigit() else value)
    discover_devices([farm_settings.address])
    scenario = VlmLoop(tmp_path / "scenario", phones=PHONES, rounds=2, rl_iterations=1, group=2, queries=2,
                       max_steps=3, timeout_s=1800)
    figures = scenario.run()
    assert model_host.poll() is None, (tmp_path / "model-host.log").read_text()[-3000:]
    print(line(figures))

    # Two rounds, each SFT then one RL iteration on the served SFT checkpoint: M0 → sft → rl → sft → rl.
    # An RL iteration whose groups carried no contrast (the tiny model's replies often do not parse)
    # says so and its round ends with the SFT checkpoint; at least one must have learnt.
    lineage = scenario.lineage
    assert figures["rounds"] == 2 and figures["unattended"] is True
    rl_runs = TrainingRun.objects.filter(stage="rl").order_by("pk")
    assert rl_runs.count() == 2 and figures["iterations"] >= 1, [(r.status, r.error) for r in rl_runs]
    for run in rl_runs:
        rollouts = Trajectory.objects.filter(run_id=run.progress["rl_run"], line=Line.RL)
        # G rollouts of each query; a rollout routed to Env_ERROR may be collected again (§2.4.2)
        originals = rollouts.filter(recollection_of__isnull=True)
        assert run.base_model.parent is not None and originals.count() == 2 * 6
        assert all(t.recollection_of.destination == Destination.ENV_HEALING
                   for t in rollouts.filter(recollection_of__isnull=False))
        assert {t.run.model_version_id for t in rollouts} == {run.base_model_id}   # sampled by what it trains
        if run.status != "done":
            assert run.progress.get("no_signal"), run.error
            continue
        assert run.produced_model in lineage and run.produced_model.parent == run.base_model
        assert run.metrics and "objective" in run.metrics[-1]
        # π_old is the policy that sampled: the sampler's log-probs and the trainer's agree
        assert run.metrics[-1].get("pi_old_mismatch", 0) == 0, run.metrics[-1]
    stages = [TrainingRun.objects.get(produced_model=m).stage for m in lineage]
    assert stages[0] == "sft" and stages.count("sft") == 3 and stages.count("rl") == figures["iterations"]
    # Every checkpoint was served by the model host, has its page, metrics and a held-out evaluation.
    client = client_as("manager")
    for model in lineage:
        assert Serving.objects.get(version=model).first_served_at is not None
        assert TrainingRun.objects.get(produced_model=model).metrics
        evaluation = scenario.evaluations[model.name]
        assert evaluation.split == "held_out" and evaluation.status == "done", (model, evaluation.status)
        page = client.get(f"/training/models/{model.pk}/").content.decode()
        assert 'data-testid="model-evaluations"' in page and f"/benchmarks/runs/{evaluation.pk}/" in page
    held_out = set(scenario.benchmark.items.filter(split="held_out").values_list("query__key", flat=True))
    trained_on = set(Trajectory.objects.exclude(line=Line.BENCHMARK).values_list("query__key", flat=True))
    assert held_out and not held_out & trained_on
    assert figures["serve_s_p50"] is not None and figures["rollouts_per_min"]
