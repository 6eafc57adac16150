"""The rollout half of an RL training run (§3.3): choose queries by curriculum, collect G rollouts
per query through the policy (the goal alone in the prompt: the RL line), wait for their verdicts,
and turn them into the trainer's rollouts file (rewards eq. 3/4, advantages eq. 5).

The rollouts go through flywheel's RL line, so every one of them is judged by HTSC and returned
to the pools as any RL rollout is (partially successful queries stay, fully failed ones go to the
ECDM, mastered ones retire): training never keeps a private copy of the loop.
"""
import time
from pathlib import Path

from django.conf import settings

from flywheel.collection.runs import cancel_run as cancel_collection
from flywheel.collection.runs import launch_run
from flywheel.models import CollectionRun, Line, RlQueryEntry, RlRollout, Trajectory
from training.models import TrainingRun
from training.rules.curriculum import sample_queries, sampling_weights, smoothed_success_rate
from training.runs import RunError
from training.supervisor import cancel_requested, set_phase

FINISHED = (CollectionRun.Status.DONE, CollectionRun.Status.FAILED, CollectionRun.Status.CANCELLED)
POLL_S = 2.0


def query_history() -> dict[int, tuple[int, int]]:
    """(successes, scored attempts) of every RL-pool query over all its recorded groups."""
    history: dict[int, list[int]] = {}
    for entry_id, outcomes in RlRollout.objects.values_list("entry_id", "outcomes"):
        counts = history.setdefault(entry_id, [0, 0])
        counts[0] += sum(1 for outcome in outcomes if outcome == "true")
        counts[1] += sum(1 for outcome in outcomes if outcome in ("true", "false"))
    return {entry: (s, a) for entry, (s, a) in history.items()}


def curriculum_keys(config: dict) -> list[str]:
    """Xiaomi-GUI-0 §4.4: smoothed success rates, a softmax whose preference moves from easier to
    harder queries as training progresses (config "curriculum": {"progress", "temperature"})."""
    entries = list(RlQueryEntry.objects.filter(state__in=("active", "banked"), query__evaluation_only=False)
                   .select_related("query").order_by("pk"))
    if not entries:
        raise RunError("the RL query pool has no active or banked queries: bank queries (Phase 0) or admit "
                       "them through an RL run first")
    history = query_history()
    rates = [smoothed_success_rate(*history.get(entry.pk, (0, 0))) for entry in entries]
    curriculum = config.get("curriculum") or {}
    weights = sampling_weights(rates, progress=curriculum.get("progress", 0.0),
                               temperature=curriculum.get("temperature", 0.25))
    count = min(int(config["queries_per_iteration"]), len(entries))
    return sample_queries([entry.query.key for entry in entries], weights, count, seed=int(config.get("seed", 0)))


def start_rollouts(run: TrainingRun) -> CollectionRun:
    config = run.config
    if config.get("rl_run"):
        collection = CollectionRun.objects.filter(pk=config["rl_run"], line=Line.RL).first()
        if collection is None:
            raise RunError(f"rl_run {config['rl_run']} is not an RL collection run")
        return collection
    known = (run.progress or {}).get("rl_run")
    if known:  # resumed: the rollouts already launched are the ones to learn from
        return CollectionRun.objects.get(pk=known)
    keys = curriculum_keys(config)
    collection = launch_run(Line.RL, {"keys": keys, "pool": "rl"}, model_version=run.base_model,
                            config={"repeats": int(config["group_size"]), "max_steps": int(config["max_rollout_steps"]),
                                    "phones": int(getattr(settings, "TRAINING_ROLLOUT_PHONES", 4))},
                            user=run.created_by)
    set_phase(run, "rollout", rl_run=collection.pk, queries=keys)
    return collection


def rollouts_settled(collection: CollectionRun) -> bool:
    collection.refresh_from_db()
    return collection.status in FINISHED and not Trajectory.objects.filter(
        run=collection, verdict="pending").exists()


def prepare_rollouts(run: TrainingRun, run_dir: Path) -> Path | None:
    """The rollouts file for the update, or None when the run was cancelled while collecting."""
    from training.rl_data import build_rollouts

    collection = start_rollouts(run)
    deadline = time.monotonic() + float(getattr(settings, "TRAINING_ROLLOUT_TIMEOUT_S", 3 * 3600))
    while not rollouts_settled(collection):
        if cancel_requested(run):
            if collection.status not in FINISHED:
                cancel_collection(collection)
            return None
        if time.monotonic() > deadline:
            raise RunError(f"the rollouts of RL run #{collection.pk} did not settle in time "
                           f"({collection.completed}/{collection.total} collected)")
        set_phase(run, "rollout", rl_run=collection.pk, collected=collection.completed, total=collection.total)
        time.sleep(POLL_S)
    config = run.config
    stats = build_rollouts(collection, run_dir / "rollouts", lam=float(config["lambda"]),
                           advantage=config["advantage"], passes=int(config["judge_passes"]),
                           useful=tuple(config["useful_range"]), fallback_cap=int(config["fallback_cap"]))
    set_phase(run, "update", rl_run=collection.pk, rollouts=stats)
    if not stats.get("rows"):
        raise RunError(f"no rollout group of RL run #{collection.pk} is in the useful range: "
                       f"{stats.get('dropped') or 'nothing to learn from'}")
    return run_dir / "rollouts" / "rollouts.jsonl"
