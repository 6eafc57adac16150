"""Benchmark: the rest of the recipe (issue #39) on the virtual farm, end to end.

In a PostgreSQL database made for the run (DATABASE_URL names the server; dropped afterwards):

1. the farm's tasks (RECIPE_TASKS of them, in key order) on the schema-guided line: frames with their UI
   dumps, judged and routed (SFT pool for successes, CPT pool for every cleaned step);
2. the same tasks on the automatic line with the built-in offline policy (the goal alone); its failures go
   through the ECDM as a repair worker runs it (attribution, the offline Teacher's corrections): the
   explained corrections;
3. high-frequency data: the RECIPE_APPS are explored into a GEM and function trees; a farm has no real users,
   so their usage is drawn here (seeded: RECIPE_USED_FUNCTIONS leaves, 5, 4, 3... requests each, imported
   as external queries) — then the top functions get one query per entry-point path, approved and collected
   on the schema-guided line: the functions with two or more distinct paths judged True;
4. an SFT and a CPT snapshot with the screen corpora mixed in (grounding, screen QA, captions at ratio 1);
   the figures are the SFT snapshot's (the CPT one, printed too, draws on the same frames);
5. the step reward model trained on the judged steps above (ClawGUI §3.2): its held-out accuracy;
6. one GSPO update (importance_ratio "sequence", turn batching) of the tiny Qwen2.5-VL over rollouts made
   from the SFT snapshot's samples (two groups of four), start-up included, as perf/training.py times GRPO.

Ends with one line:
`recipe: grounding_samples= qa_samples= explained_corrections= high_freq_functions= prm_step_accuracy= gspo_update_s_tiny=`
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from throwaway_db import create_database, drop_database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PHONES = int(os.environ.get("RECIPE_PHONES", "4"))
TASKS_LIMIT = int(os.environ.get("RECIPE_TASKS", "60"))
APPS = os.environ.get("RECIPE_APPS", "com.sim.notes").split(",")
USED_FUNCTIONS = int(os.environ.get("RECIPE_USED_FUNCTIONS", "6"))
TOP_K, PER_FUNCTION = 4, 3
VAR = tempfile.mkdtemp(prefix="bench-recipe-")
os.environ["FLYWHEEL_VAR_DIR"] = VAR
os.environ["TRAINING_ROOT"] = f"{VAR}/training"
os.environ["ECDM_AUTOMATIC"] = "0"     # the ECDM runs below, in this process, in order
os.environ["HANDBACK_SAMPLES"] = "0"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
BASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
if not BASE_URL.startswith(("postgres://", "postgresql://")):
    raise SystemExit("perf/recipe.py needs DATABASE_URL to name a PostgreSQL server")
NAME = f"recipe_{time.strftime('%Y%m%d_%H%M%S')}_{os.getpid()}"
os.environ["DATABASE_URL"] = create_database(BASE_URL, NAME)

import django

django.setup()

from django.conf import settings
from django.core.management import call_command

from devices.models import Device
from devices.registry import discover_devices
from flywheel.collection.driver import drive_host
from flywheel.collection.launch import launch_run
from flywheel.judging.pipeline import evaluate_pending
from flywheel.models import FunctionNode, Query, Repair, Trajectory
from flywheel.queries.jsonl import import_queries
from flywheel.queries.recipes import import_recipes
from simfarm.launch import running_farm

TASKS = ROOT / "simfarm" / "tasks" / "tasks.jsonl"
RECIPES = ROOT / "simfarm" / "setup_recipes.jsonl"


def collect(line: str, keys: list[str], address: str, config: dict | None = None):
    run = launch_run(line, {"keys": keys}, config={"phones": PHONES, "max_steps": 20, "clarify_wait_s": 0,
                                                   **(config or {})}, dispatch=False)
    started = time.perf_counter()
    drive_host(run.pk, address, PHONES, budget_s=3600)
    evaluate_pending(limit=10_000, older_than=timedelta(0))
    verdicts = {}
    for verdict in Trajectory.objects.filter(run=run).values_list("verdict", flat=True):
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
    print(f"{line}: {len(keys)} queries in {time.perf_counter() - started:.0f} s, verdicts {verdicts}", flush=True)
    return run


def repair_failures(run) -> None:
    from flywheel.models import Outcome
    from flywheel.repair.ecdm import process_failure, run_repair

    failed = list(Trajectory.objects.filter(run=run, verdict__in=[Outcome.FALSE, Outcome.ENV_ERROR])
                  .values_list("pk", flat=True))
    for trajectory_id in failed:
        process_failure(trajectory_id)
    for repair_id in Repair.objects.filter(trajectory_id__in=failed, status="pending").exclude(
            path="counterfactual").values_list("pk", flat=True):
        run_repair(repair_id)
    print(f"ecdm: {len(failed)} failures, {Repair.objects.filter(status='done').count()} repairs done", flush=True)


def high_frequency(address: str) -> int:
    from flywheel.models import App
    from flywheel.queries import high_frequency as hf
    from flywheel.queries.exploration.runs import explore_apps_now
    from flywheel.queries.function_tree.builder import build_tree_from_gem

    devices = list(Device.objects.order_by("serial"))[:1]
    run = explore_apps_now(APPS, {"max_seconds": 240}, devices=devices)
    print(f"explored {', '.join(APPS)}: {run.status}", flush=True)
    for package in APPS:
        build_tree_from_gem(App.objects.get(package=package))
    leaves = list(FunctionNode.objects.filter(app__package__in=APPS, is_leaf=True, reuse_of__isnull=True,
                                              page__isnull=False).order_by("pk"))
    rng = random.Random(39)
    for rank, leaf in enumerate(rng.sample(leaves, min(USED_FUNCTIONS, len(leaves)))):
        for i in range(max(1, 5 - rank)):   # drawn usage: 5, 4, 3, 2, 1, 1 requests
            query = Query.objects.create(key=f"usage-{leaf.pk}-{i}", text=f"{leaf.label or leaf.path} (a user's request {i})",
                                         tier="L2", source="external", verification={})
            query.set_functions([leaf])
    result = hf.create_high_frequency_queries(top_k=TOP_K, per_function=PER_FUNCTION)
    written = Query.objects.filter(generation_run=result.run) if result.run else Query.objects.none()
    written.update(status="ready")   # a reviewer's approval
    keys = list(written.values_list("key", flat=True))
    print(f"high-frequency: {len(leaves)} leaves, {len(keys)} queries for {len(result.functions)} functions "
          f"({'; '.join(str(p) for p in result.problems[:3]) if result.problems else 'no problem'})", flush=True)
    if keys:
        collect("schema", keys, address)
    return hf.functions_with_collected_paths()


def corpora() -> tuple[int, int]:
    from training.screen_corpora import screen_corpus_counts
    from training.snapshots import create_snapshot

    ratios = {"grounding": 1.0, "screen_qa": 1.0, "captions": 1.0}
    counts = {}
    for kind in ("sft", "cpt"):
        snapshot = create_snapshot(kind, {"corpora": ratios}, background=False)
        counts[kind] = screen_corpus_counts(snapshot) if snapshot.status == "ready" else {}
        print(f"{kind} snapshot #{snapshot.pk}: {snapshot.status}, {snapshot.row_count} samples, corpora {counts[kind]}"
              f"{' — ' + snapshot.error if snapshot.error else ''}", flush=True)
    # the figure: the SFT snapshot's (the CPT one draws on the same frames, weighted by its own pool)
    return counts["sft"].get("grounding", 0), counts["sft"].get("screen_qa", 0)


def gspo_update() -> float:
    """One GSPO update of the tiny model over two groups of four trajectories' samples (rewards drawn,
    eq. 5 advantages), as perf/training.py times GRPO; start-up included."""
    from training.config import validate_config
    from training.launch import trainer_command, write_launch_files
    from training.rules.advantages import grpo_advantages
    from training.snapshots import create_snapshot

    snapshot = create_snapshot("sft", {}, background=False)
    directory = Path(snapshot.directory)
    by_trajectory = {}
    for line in (directory / "data.jsonl").read_text().splitlines():
        sample = json.loads(line)
        by_trajectory.setdefault(sample["meta"]["trajectory"], []).append(sample)
    trajectories = list(by_trajectory.values())[:8]
    rng, rows = random.Random(7), []
    for group in (0, 1):
        members = trajectories[group * 4:(group + 1) * 4]
        rewards = [rng.random() for _ in members]
        advantages = grpo_advantages(rewards, [[rng.choice((1, 0, -1)) for _ in m] for m in members], lam=0.0)
        for trajectory, row_advantages in zip(members, advantages):
            for turn, (sample, advantage) in enumerate(zip(trajectory, row_advantages)):
                rows.append({"messages": sample["messages"][:2], "images": [str(directory / p) for p in sample["images"]],
                             "response": sample["messages"][2]["content"], "advantage": advantage,
                             "trajectory_advantage": advantage, "group": group,
                             "trajectory": sample["meta"]["trajectory"], "step": turn, "turn": turn,
                             "steps_in_trajectory": len(trajectory), "group_size": len(members)})
    run_dir = Path(settings.TRAINING_ROOT) / "runs" / "gspo"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "rollouts.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = validate_config("rl", {"model": {"tiny": {}}, "reference": {"tiny": {}}, "batch_size": 64,
                                    "micro_batch_size": 1, "max_seq_len": 4096, "importance_ratio": "sequence",
                                    "batching": "turn"})
    config.update(rollouts=str(run_dir / "rollouts.jsonl"), dataset_dir="", stage="rl", output_dir=str(run_dir))
    command = trainer_command("rl", write_launch_files(config, run_dir), "torchrun", nproc=1)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    status = json.loads((run_dir / "status.json").read_text()) if (run_dir / "status.json").exists() else {}
    if done.returncode or status.get("state") != "done":
        raise SystemExit(f"the GSPO update failed: {status.get('error')}\n{done.stderr[-2000:]}")
    print(f"gspo: one update over {len(rows)} turns of {len(trajectories)} trajectories in {seconds:.1f} s", flush=True)
    return seconds


def measure() -> dict:
    from flywheel.repair.explanations import explained_corrections
    from training.reward_model import prm_held_out

    call_command("migrate", verbosity=0)
    import_queries(TASKS.read_text())
    import_recipes(RECIPES.read_text())
    keys = list(Query.objects.order_by("key").values_list("key", flat=True))[:TASKS_LIMIT]
    started = time.perf_counter()
    with running_farm(devices=PHONES, seed=39, log_path=Path(VAR) / "farm.log") as farm:
        settings.ADB_SERVERS = [farm.address]
        discover_devices([farm.address])
        collect("schema", keys, farm.address)
        repair_failures(collect("automatic", keys, farm.address, {"teacher_takeover_after": 0}))
        functions = high_frequency(farm.address)
    grounding, qa = corpora()
    figures = {"grounding_samples": grounding, "qa_samples": qa, "explained_corrections": explained_corrections(),
               "high_freq_functions": functions}
    held = prm_held_out(seed=0)
    figures["prm_step_accuracy"] = held["accuracy"]
    print(f"step reward model: held-out accuracy {held['accuracy']} on {held['steps']} steps "
          f"(majority class share {held['majority_share']}; decided outside the band: {held.get('coverage')})",
          flush=True)
    figures["gspo_update_s_tiny"] = gspo_update()
    figures["minutes"] = (time.perf_counter() - started) / 60
    return figures


def fmt(value) -> str:
    return "n/a" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))


def main():
    try:
        figures = measure()
    finally:
        drop_database(BASE_URL, NAME)
    print(f"whole run {figures['minutes']:.1f} min on this machine")
    print("recipe: " + " ".join(f"{name}={fmt(figures[name])}" for name in (
        "grounding_samples", "qa_samples", "explained_corrections", "high_freq_functions", "prm_step_accuracy",
        "gspo_update_s_tiny")))


if __name__ == "__main__":
    main()
