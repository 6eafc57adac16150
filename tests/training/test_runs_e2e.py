"""Training runs end to end through a real Celery worker on the `training` queue and the real
trainer (torchrun + the tiny Qwen2.5-VL): SFT on a real export, cancel, a worker killed mid-epoch
and resumed, and one agentic-RL update on rollouts collected on the virtual farm."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pytest

from devices.registry import discover_devices
from flywheel.models import App, ModelVersion, Query, RlQueryEntry, Trajectory
from flywheel.policies.protocol import describe_action, format_output
from tests.conftest import BIN, ROOT, process_env, stop
from tests.flywheel.collection.test_worker import wait_for
from tests.flywheel.openai_stub import StubOpenAI
from tests.training.test_commands import SMALL_TINY
from tests.training.test_exports import make_trajectory, sft
from training.models import TrainingRun
from training.runs import cancel_run, create_run, resume_stalled_runs
from training.snapshots import create_snapshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("torch")]
TRAINING_DIR = tempfile.mkdtemp(prefix="training-e2e-")
WORKER_ENV = {"TRAINING_ROOT": TRAINING_DIR, "OMP_NUM_THREADS": "1"}   # torch's one thread (tests/conftest.py)
TINY = {"model": {"tiny": SMALL_TINY}, "batch_size": 2, "micro_batch_size": 1, "learning_rate": 2e-3,
        "min_learning_rate": 2e-4, "warmup_ratio": 0.0, "max_seq_len": 4096}


@pytest.fixture(autouse=True)
def training_root(settings):
    settings.TRAINING_ROOT = Path(TRAINING_DIR)


@pytest.fixture(scope="module", autouse=True)
def remove_training_dir():
    yield
    shutil.rmtree(TRAINING_DIR, ignore_errors=True)


def sft_snapshot(trajectories=3, steps=3):
    for _ in range(trajectories):
        sft(make_trajectory(n_steps=steps))
    snapshot = create_snapshot("sft", {"k": 2})
    assert snapshot.status == "ready", snapshot.error
    return snapshot


def settled(run_id):
    run = TrainingRun.objects.get(pk=run_id)
    return run if run.status not in TrainingRun.ACTIVE else None


def test_an_sft_run_trains_the_tiny_model_and_produces_a_model_version(celery_worker_process):
    base = ModelVersion.objects.create(name="tiny-base", kind="checkpoint")
    snapshot = sft_snapshot()
    run = create_run("sft", {**TINY, "max_steps": 6, "save_every": 3}, snapshot=snapshot, base_model=base)
    run = wait_for(lambda: settled(run.pk), timeout=240, what="the SFT run to finish")
    assert run.status == "done", run.error
    losses = [point["loss"] for point in run.metrics]
    assert [point["step"] for point in run.metrics] == [1, 2, 3, 4, 5, 6]
    assert sum(losses[-2:]) / 2 < sum(losses[:2]) / 2, losses  # loss falls
    assert run.progress["step"] == run.progress["total_steps"] == 6 and run.attempts == 1
    produced = run.produced_model
    assert produced.kind == "checkpoint" and produced.parent == base and Path(produced.artifact).is_dir()
    assert (Path(run.directory) / "config.json").exists() and run.checkpoint.endswith("checkpoint-6")
    # the artifact reloads as a model (what vLLM would serve)
    from training.trainer.tiny import load_model

    model, processor = load_model({"path": produced.artifact})
    assert model is not None and processor is not None


def test_a_run_is_cancelled_mid_training_with_a_checkpoint(celery_worker_process):
    snapshot = sft_snapshot(trajectories=4)
    run = create_run("sft", {**TINY, "max_steps": 400, "save_every": 1000}, snapshot=snapshot)
    wait_for(lambda: TrainingRun.objects.get(pk=run.pk).progress.get("step", 0) >= 2, timeout=240,
             what="two training steps")
    cancel_run(run)
    run = wait_for(lambda: settled(run.pk), timeout=120, what="the cancel to land")
    assert run.status == "cancelled" and run.produced_model is None
    assert 2 <= run.progress["step"] < 400 and "checkpoint-" in run.checkpoint and Path(run.checkpoint).is_dir()


def start_worker(log_path):
    return subprocess.Popen(
        [str(BIN / "celery"), "-A", "config", "worker", "--pool", "solo", "-l", "info", "-Q", "training",
         "-n", f"resumer{os.getpid()}@%h", "--without-mingle", "--without-gossip"],
        cwd=ROOT, env=process_env(**WORKER_ENV), stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)


def test_a_worker_killed_mid_epoch_resumes_from_the_last_checkpoint(celery_worker_process, tmp_path):
    snapshot = sft_snapshot(trajectories=4)
    run = create_run("sft", {**TINY, "max_steps": 20, "save_every": 2}, snapshot=snapshot)
    first, deadline = Path(run.directory) / "checkpoint-2", time.monotonic() + 240
    while not first.is_dir() and time.monotonic() < deadline:   # on disk: the kill lands a step or two later
        time.sleep(0.05)
    assert first.is_dir(), "no first checkpoint"
    os.kill(celery_worker_process.pid, signal.SIGKILL)  # as an out-of-memory kill would
    celery_worker_process.wait(timeout=10)
    run.refresh_from_db()
    assert run.status == "running"
    stopped_at = run.progress["step"]
    time.sleep(2)  # the trainer follows its worker (PR_SET_PDEATHSIG) and saves where it is
    assert resume_stalled_runs(stale_after=timedelta(seconds=0)) == [run.pk]
    worker = start_worker(tmp_path / "resumer.log")
    try:
        run = wait_for(lambda: settled(run.pk), timeout=300, what="the resumed run to finish")
    finally:
        stop(worker)
    assert run.status == "done", run.error + (tmp_path / "resumer.log").read_text()[-3000:]
    assert run.attempts == 2 and run.progress["step"] == 20
    steps = [point["step"] for point in run.metrics]
    assert steps == sorted(set(steps)) and steps[-1] == 20  # no step twice, none lost
    assert stopped_at < 20


# -- agentic RL on the virtual farm -------------------------------------------------------------------

def reply(cot_observation, action):
    cot = {"Observation": cot_observation, "Reflection": "", "Plan": "open Settings, then stop",
           "Decision": describe_action(action), "Memory": ""}
    return format_output(cot, action)


def test_one_rl_update_on_rollouts_from_the_virtual_farm(farm_settings, celery_worker_process):
    """G = 2 rollouts of an endpoint policy (a stub answering like vLLM): the first opens Settings and
    succeeds, the second gives up; HTSC judges both, the group is useful, eq. 3–5 give advantages,
    and the tiny model takes one clipped-objective update with KL to its SFT reference."""
    discover_devices()
    query = Query.objects.create(key="rl-open-settings", text="Open the Settings app", tier="L1",
                                 verification={"terminal": [{"check": "foreground",
                                                             "package": "com.android.settings"}], "milestones": []},
                                 reset={"force_stop": ["com.android.settings"], "clear": [], "home": True})
    query.set_apps([App.objects.get_or_create(package="com.android.settings")[0]])
    RlQueryEntry.objects.create(query=query, state="active", channel="routing", success_rate=0.5)
    with StubOpenAI(model="policy-7b") as stub:
        opened = {"action": "open", "app": "com.android.settings"}
        stub.replies = [(200, stub.chat_reply(reply("the home screen", opened)), 0),
                        (200, stub.chat_reply(reply("Settings is open", {"action": "terminate",
                                                                        "status": "success"})), 0),
                        (200, stub.chat_reply(reply("the home screen", {"action": "terminate",
                                                                       "status": "failure"})), 0)]
        policy = ModelVersion.objects.create(name="policy-7b", kind="endpoint", endpoint_url=stub.url,
                                             served_model_name="policy-7b")
        run = create_run("rl", {**TINY, "group_size": 2, "queries_per_iteration": 1, "max_rollout_steps": 4,
                                "reference": {"tiny": SMALL_TINY}, "judge_passes": 3, "batch_size": 8},
                         base_model=policy)
        run = wait_for(lambda: settled(run.pk), timeout=300, what="the RL run to finish")
        prompts = [request["messages"] for request in stub.requests]
    assert run.status == "done", run.error
    rollouts = Trajectory.objects.filter(run_id=run.progress["rl_run"]).order_by("pk")
    assert sorted(t.verdict for t in rollouts) == ["false", "true"] and all(t.destination for t in rollouts)
    # the goal alone in the prompt (no known path), as on every RL rollout
    assert all("Known operation path" not in messages[0]["content"] for messages in prompts)
    stats = run.progress["rollouts"]
    assert stats["rows"] == 3 and stats["groups_kept"] == 1
    rows = [json.loads(line) for line in (Path(run.directory) / "rollouts" / "rollouts.jsonl").read_text().splitlines()]
    success = [row for row in rows if row["success"]]
    failure = [row for row in rows if not row["success"]]
    assert all(row["advantage"] > 0 for row in success) and all(row["advantage"] < 0 for row in failure)
    update = run.metrics[-1]
    assert {"objective", "kl", "clip_fraction"} <= set(update)
    assert run.produced_model.parent == policy and Path(run.produced_model.artifact).is_dir()
    # the pool metabolised the group: a mixed group keeps the query in the RL pool
    assert RlQueryEntry.objects.get(query=query).state == "active"
