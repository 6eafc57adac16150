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

from flywheel.collection.launch import cancel_run as cancel_collection
from flywheel.collection.launch import launch_run
from flywheel.models import CollectionRun, Line, RlQueryEntry, RlRollout, Trajectory
from flywheel.rules.stops import StopKind
from training.models import TrainingRun
from training.reward_model import trained_reward_model
from training.rules.curriculum import sample_queries, sampling_weights, smoothed_success_rate
from training.rules.rewards import MAJORITY, REWARD_MODEL
from training.runs import RunError
from training.supervisor import cancel_requested, set_phase

FINISHED = (CollectionRun.Status.DONE, CollectionRun.Status.FAILED, CollectionRun.Status.CANCELLED)
POLL_S = 5.0  # how often a waiting RL run looks at its rollouts again


def query_history() -> dict[int, tuple[int, int]]:
    """(successes, scored attempts) of every RL-pool query over all its recorded groups."""
    history: dict[int, list[int]] = {}
    for entry_id, outcomes in RlRollout.objects.values_list("entry_id", "outcomes"):
        counts = history.setdefault(entry_id, [0, 0])
        counts[0] += sum(1 for outcome in outcomes if outcome == "true")
        counts[1] += sum(1 for outcome in outcomes if outcome in ("true", "false"))
    return {entry: (s, a) for entry, (s, a) in history.items()}


def rl_iterations_behind(model) -> int:
    """How many RL updates made `model`: the RL runs along its lineage."""
    count, seen = 0, set()
    while model is not None and model.pk not in seen:
        seen.add(model.pk)
        count += TrainingRun.objects.filter(produced_model=model, stage=TrainingRun.Stage.RL).exists()
        model = model.parent
    return count


def curriculum_progress(config: dict, base_model) -> float:
    """The config's progress, else the share of the planned iterations the lineage has done."""
    curriculum = config.get("curriculum") or {}
    if curriculum.get("progress") is not None:
        return float(curriculum["progress"])
    return min(1.0, rl_iterations_behind(base_model) / max(1, int(curriculum.get("iterations", 10))))


def curriculum_keys(config: dict, base_model=None) -> list[str]:
    """Xiaomi-GUI-0 §4.4: smoothed success rates, a softmax whose preference moves from easier to
    harder queries as training progresses (config "curriculum": {"progress", "iterations", "temperature"})."""
    entries = list(RlQueryEntry.objects.filter(state__in=("active", "banked"), query__evaluation_only=False)
                   .select_related("query").order_by("pk"))
    if not entries:
        raise RunError("the RL query pool has no active or banked queries: bank queries (Phase 0) or admit "
                       "them through an RL run first")
    history = query_history()
    rates = [smoothed_success_rate(*history.get(entry.pk, (0, 0))) for entry in entries]
    curriculum = config.get("curriculum") or {}
    weights = sampling_weights(rates, progress=curriculum_progress(config, base_model),
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
    try:
        keys = curriculum_keys(config, run.base_model)
    except RunError:
        set_phase(run, "rollout", no_signal=NO_QUERIES)  # nothing to sample: not a fault to repair
        raise
    collection = launch_run(Line.RL, {"keys": keys, "pool": "rl"}, model_version=run.base_model,
                            config={"repeats": int(config["group_size"]), "max_steps": int(config["max_rollout_steps"]),
                                    "phones": settings.TRAINING_ROLLOUT_PHONES},
                            user=run.created_by)
    set_phase(run, "rollout", rl_run=collection.pk, queries=keys)
    return collection


def rollouts_settled(collection: CollectionRun) -> bool:
    collection.refresh_from_db()
    return collection.status in FINISHED and not Trajectory.objects.filter(
        run=collection, verdict="pending").exists()


WAITING, CANCELLED, READY = "waiting", "cancelled", "ready"
# Why an RL run learnt nothing (progress["no_signal"]): an empty RL pool, or no group in the useful range.
NO_QUERIES, NO_USEFUL_GROUP = "no_queries", "no_useful_group"


def endpoint_failures(collection: CollectionRun) -> None:
    """RunError when the policy's server, not the policy, ended most rollouts (down, killed, answering
    garbage): learning from them would teach the model its server's outage."""
    rollouts = Trajectory.objects.filter(run=collection)
    total = rollouts.count()
    failed = rollouts.filter(stop_kind=StopKind.ENDPOINT_FAILED)
    if total and failed.count() * 2 > total:
        last = failed.order_by("-pk").values_list("stop_reason", flat=True).first() or ""
        raise RunError(f"the policy's endpoint failed on {failed.count()} of {total} rollouts of RL run "
                       f"#{collection.pk} (last: {last[:150]}); nothing was learnt from them")


def _step_reward_model(config: dict):
    """The step reward model version that rates the rollouts' steps (source reward_model), else None."""
    if config.get("step_reward_source") != REWARD_MODEL:
        return None
    try:
        return trained_reward_model(config.get("step_reward_model") or "")
    except ValueError as error:  # deleted or retrained away since the run was created
        raise RunError(f"step_reward_model: {error}") from None


def poll_rollouts(run: TrainingRun, run_dir: Path) -> tuple[str, Path | None]:
    """One look at the run's rollouts: (WAITING, None) while they are collected and judged — the
    task asks again later instead of holding a worker the rollouts themselves need —, (CANCELLED,
    None), or (READY, the rollouts file for the update)."""
    from training.rl_data import build_rollouts

    collection = start_rollouts(run)
    if not rollouts_settled(collection):
        if cancel_requested(run):
            if collection.status not in FINISHED:
                cancel_collection(collection)
            return CANCELLED, None
        started = float((TrainingRun.objects.get(pk=run.pk).progress or {}).get("rollout_started") or time.time())
        if time.time() - started > settings.TRAINING_ROLLOUT_TIMEOUT_S:
            raise RunError(f"the rollouts of RL run #{collection.pk} did not settle in time "
                           f"({collection.completed}/{collection.total} collected)")
        set_phase(run, "rollout", rl_run=collection.pk, collected=collection.completed, total=collection.total,
                  rollout_started=started, waiting=True)
        return WAITING, None
    endpoint_failures(collection)
    config = run.config
    stats = build_rollouts(collection, run_dir / "rollouts", lam=float(config["lambda"]),
                           advantage=config["advantage"], passes=int(config["judge_passes"]),
                           useful=tuple(config["useful_range"]), fallback_cap=int(config["fallback_cap"]),
                           # a run configured before the key existed keeps eq. 4's majority
                           step_reward_source=config.get("step_reward_source", MAJORITY),
                           reward_model=_step_reward_model(config))
    set_phase(run, "update", rl_run=collection.pk, rollouts=stats, waiting=False)
    if not stats.get("rows"):
        set_phase(run, "update", rl_run=collection.pk, rollouts=stats, waiting=False, no_signal=NO_USEFUL_GROUP)
        raise RunError(f"no rollout group of RL run #{collection.pk} is in the useful range: "
                       f"{stats.get('dropped_reasons') or stats.get('rollouts_left_out') or 'nothing to learn from'}")
    return READY, run_dir / "rollouts" / "rollouts.jsonl"
