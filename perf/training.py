"""Training (issue #15's measured figures): exports, a tiny SFT run, one tiny RL update, on CPU.

Builds its own pool in a throwaway database (BENCH_DATABASE_URL, else SQLite): N_TRAJECTORIES
SFT-pool trajectories of STEPS steps with real PNG screenshots, then

    export_rows_per_s      SFT samples written per second by create_snapshot (chat format + images)
    sft_steps_per_min_tiny optimizer steps per minute of the tiny Qwen2.5-VL on that export, through
                           torchrun like every run (batch 2, micro-batch 1; start-up excluded: the
                           figure is taken from the trainer's own step timestamps)
    rl_update_s_tiny       seconds of one GRPO update (eq. 6 + KL) of the tiny model over the rollouts
                           of 2 groups × 4 trajectories, start-up included

Ends with one line: `training: export_rows_per_s=<n> sft_steps_per_min_tiny=<n> rl_update_s_tiny=<n>`.
"""
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VAR = tempfile.mkdtemp(prefix="bench-training-")
os.environ["FLYWHEEL_VAR_DIR"] = VAR
os.environ["TRAINING_ROOT"] = f"{VAR}/training"
os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL") or f"sqlite:///{VAR}/bench.sqlite3"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from django.conf import settings
from django.core.management import call_command
from PIL import Image

from flywheel.blobs import store_blob
from flywheel.models import Query, SftEntry, Step, Trajectory
from training.launch import trainer_command, write_launch_files
from training.snapshots import create_snapshot

N_TRAJECTORIES = int(os.environ.get("BENCH_TRAJECTORIES", "60"))
STEPS = 6
SFT_STEPS = int(os.environ.get("BENCH_SFT_STEPS", "12"))


def screenshot(seed: int) -> bytes:
    rng = random.Random(seed)
    image = Image.new("RGB", (270, 600), (rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    for _ in range(12):
        x, y = rng.randrange(250), rng.randrange(580)
        image.paste((rng.randrange(256), 40, 90), (x, y, x + 20, y + 20))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def build_pool():
    for n in range(N_TRAJECTORIES):
        query = Query.objects.create(key=f"bench-{n}", text=f"Open the settings page number {n} and turn it on",
                                     tier="L2")
        trajectory = Trajectory.objects.create(query=query, line="automatic", status="completed", verdict="true")
        for index in range(STEPS):
            Step.objects.create(
                trajectory=trajectory, index=index, screenshot=store_blob(screenshot(n * 100 + index), "png"),
                cot={"Observation": f"a list of settings, row {index}", "Plan": "open the next page",
                     "Decision": f"Tap row {index}", "Reflection": "", "Memory": ""},
                executed_action={"action": "click", "point": [135, 40 + 80 * index], "coords": "pixel"},
                foreground_package="com.android.settings", activity_stack=["com.android.settings/.Settings"])
        SftEntry.objects.create(trajectory=trajectory, intake="htsc_true")


def measure_export():
    started = time.perf_counter()
    snapshot = create_snapshot("sft", {"k": 2})
    elapsed = time.perf_counter() - started
    assert snapshot.status == "ready", snapshot.error
    return snapshot, snapshot.row_count / elapsed


def trainer_run(stage: str, config: dict, name: str) -> Path:
    run_dir = settings.TRAINING_ROOT / "runs" / name
    config = {**config, "stage": stage, "output_dir": str(run_dir)}
    path = write_launch_files(config, run_dir)
    command = trainer_command(stage, path, "torchrun", nproc=1)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    status = json.loads((run_dir / "status.json").read_text()) if (run_dir / "status.json").exists() else {}
    if result.returncode != 0 or status.get("state") != "done":
        raise SystemExit(f"{stage} trainer failed: {status.get('error')}\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return run_dir


def tiny_config(snapshot_dir: str, steps: int) -> dict:
    from training.config import validate_config

    config = validate_config("sft", {"model": {"tiny": {}}, "max_steps": steps, "batch_size": 2,
                                     "micro_batch_size": 1, "learning_rate": 1e-3, "min_learning_rate": 1e-4,
                                     "save_every": 1000, "max_seq_len": 4096})
    return {**config, "dataset_dir": snapshot_dir}


def measure_sft(snapshot) -> float:
    run_dir = trainer_run("sft", tiny_config(snapshot.directory, SFT_STEPS), "sft")
    points = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    times = [point["time_s"] for point in points]
    per_step = statistics.median(b - a for a, b in zip(times, times[1:]))
    return 60.0 / per_step


def rollouts_file(snapshot, directory: Path) -> Path:
    """Two groups of four rollouts from the exported samples, with eq. 5 advantages of made-up rewards."""
    from training.rules.advantages import grpo_advantages

    samples = [json.loads(line) for line in (Path(snapshot.directory) / "data.jsonl").read_text().splitlines()]
    by_trajectory = {}
    for sample in samples:
        by_trajectory.setdefault(sample["meta"]["trajectory"], []).append(sample)
    trajectories = list(by_trajectory.values())[:8]
    rng = random.Random(7)
    rows = []
    for group in (0, 1):
        members = trajectories[group * 4:(group + 1) * 4]
        rewards = [rng.random() for _ in members]
        steps = [[rng.choice((1, 0, -1)) for _ in m] for m in members]
        advantages = grpo_advantages(rewards, steps, lam=1.0)
        for trajectory, advantage_row in zip(members, advantages):
            for t, (sample, advantage) in enumerate(zip(trajectory, advantage_row)):
                images = [str(Path(snapshot.directory) / p) for p in sample["images"]]
                rows.append({"messages": sample["messages"][:2], "images": images,
                             "response": sample["messages"][2]["content"], "advantage": advantage,
                             "group": group, "trajectory": sample["meta"]["trajectory"], "step": t,
                             "steps_in_trajectory": len(trajectory), "group_size": len(members)})
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "rollouts.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def measure_rl(snapshot) -> float:
    from training.config import validate_config

    rollouts = rollouts_file(snapshot, settings.TRAINING_ROOT / "rollouts")
    config = validate_config("rl", {"model": {"tiny": {}}, "reference": {"tiny": {}}, "batch_size": 64,
                                    "micro_batch_size": 1, "max_seq_len": 4096})
    config.update(rollouts=str(rollouts), dataset_dir="")
    started = time.perf_counter()
    trainer_run("rl", config, "rl")
    return time.perf_counter() - started


def main():
    call_command("migrate", verbosity=0)
    build_pool()
    snapshot, export_rate = measure_export()
    print(f"export: {snapshot.row_count} samples, {export_rate:.1f}/s", flush=True)
    sft_rate = measure_sft(snapshot)
    print(f"sft: {sft_rate:.1f} steps/min (tiny model, batch 2)", flush=True)
    rl_seconds = measure_rl(snapshot)
    print(f"rl: one update in {rl_seconds:.1f} s", flush=True)
    print(f"training: export_rows_per_s={export_rate:.1f} sft_steps_per_min_tiny={sft_rate:.1f} "
          f"rl_update_s_tiny={rl_seconds:.1f}")


if __name__ == "__main__":
    main()
