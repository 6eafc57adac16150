"""The self-evolution loop's trainer for served models (flywheel/repair/loop.py's trainer contract).

A round trains M(t+1) from M(t) as §3 does, with nobody acting: SFT on a new snapshot of the SFT pool,
then `rl_iterations` RL iterations. Each iteration is one RL run: G rollouts per query (queries chosen by
the curriculum) sampled by the checkpoint being trained, judged by HTSC, one eq. 6 update with π_old =
the policy that sampled, a new checkpoint. Between stages a model host (training/model_host/) serves the
new checkpoint; the next stage starts once it answers, and the round is done once the last one does.

Runs are keyed by (loop round, stage index) in their progress, so asking again at any time (the loop
does, every step) never starts a stage twice. What stops the round is said as data: "paused" with the
reason when a person must act (a run failed, a checkpoint cannot be served, its endpoint is unhealthy);
resuming the loop asks again, and a failed run a person resumed on its page simply carries on.

Settings: TRAINING_LOOP_CONFIG (JSON) {"run": SFT run config, "snapshot": SFT snapshot config, "rl": RL
run config (G = group_size, queries_per_iteration: the report's 8 and 8 by default)}; the loop's own
`rl_iterations` setting says how many RL iterations follow the SFT stage.
"""
import json

from django.conf import settings

from flywheel.models import ModelVersion
from training.config import ConfigError
from training.model_host.host import request_serving
from training.models import DataSnapshot, Serving, TrainingRun
from training.rl_round import NO_QUERIES, NO_USEFUL_GROUP
from training.runs import RunError, create_run
from training.snapshots import create_snapshot

DEFAULT_RL_ITERATIONS = 2
FAILED = (TrainingRun.Status.FAILED, TrainingRun.Status.CANCELLED)


def loop_settings() -> dict:
    """TRAINING_LOOP_CONFIG as a dict: "run", "snapshot" and "rl" sections (each may be absent)."""
    raw = settings.TRAINING_LOOP_CONFIG or "{}"
    data = json.loads(raw) if isinstance(raw, str) else dict(raw)
    return {key: dict(data.get(key) or {}) for key in ("run", "snapshot", "rl")}


def round_plan(loop_round) -> list[str]:
    """The stages of a round: SFT, then the loop's RL iterations."""
    iterations = (loop_round.loop.config or {}).get("rl_iterations", DEFAULT_RL_ITERATIONS)
    return [TrainingRun.Stage.SFT] + [TrainingRun.Stage.RL] * int(iterations)


def round_runs(loop_round) -> dict[int, TrainingRun]:
    """The round's newest run of each stage index (a stage started again after a failure is newer)."""
    runs = {}
    for run in TrainingRun.objects.filter(progress__loop_round=loop_round.pk).order_by("pk"):
        runs[int(run.progress.get("loop_stage", 0))] = run
    return runs


def serving_state(model: ModelVersion) -> dict | None:
    """None when `model` can act on phones now; else the trainer's reply saying what it waits for."""
    if model.kind in (ModelVersion.Kind.OFFLINE, ModelVersion.Kind.COMPACT):
        return None
    serving = Serving.objects.filter(version=model).first()
    if serving is not None and serving.state == Serving.State.FAILED:
        # A model host never retries it by itself: a person fixes it ("Serve again" on its page).
        return {"status": "paused", "detail": f"{model.name} cannot be served: {serving.error[:250]}. "
                                              f"Fix it, use Serve again on its model page, then resume the loop."}
    if model.kind == ModelVersion.Kind.ENDPOINT:
        health = model.health or {}
        if health.get("ok"):
            return None
        if serving is None:  # an endpoint registered by hand: its operator must bring it back
            return {"status": "paused", "detail": f"{model.name}'s endpoint does not answer: "
                                                  f"{health.get('error') or 'not checked yet'}"[:300]}
        return {"status": "running", "detail": f"{model.name} is served by {serving.host or 'a model host'} but "
                                               f"not healthy yet: {health.get('error') or 'checking'}"[:300]}
    if serving is not None and serving.state in Serving.ACTIVE:
        return {"status": "running", "detail": f"{model.name} is trained; model host {serving.host} is starting "
                                               "its server"}
    request_serving(model)  # the loop needs it: a full model host makes room for it
    return {"status": "running", "detail": f"{model.name} is trained; waiting for a model host to serve it "
                                           "(`make model-host`, or its vLLM recipe on its model page)"}


def _start(loop_round, index: int, stage: str, model: ModelVersion) -> dict:
    config = loop_settings()
    tag = {"loop_round": loop_round.pk, "loop_stage": index}
    try:
        if stage == TrainingRun.Stage.SFT:
            snapshot = create_snapshot(DataSnapshot.Kind.SFT, config["snapshot"], name=f"loop round {loop_round.pk}")
            if snapshot.status != DataSnapshot.Status.READY:
                return {"status": "paused", "detail": f"SFT snapshot #{snapshot.pk}: {snapshot.error or snapshot.status}"}
            run = create_run("sft", config["run"], snapshot=snapshot, base_model=model)
        else:
            run = create_run("rl", config["rl"], base_model=model)
    except (ConfigError, RunError) as error:
        return {"status": "paused", "detail": f"{stage.upper()} stage {index + 1} cannot start: {error}"[:300]}
    TrainingRun.objects.filter(pk=run.pk).update(progress={**run.progress, **tag})
    return {"status": "running", "detail": f"{_stage_words(index, stage)}: training run #{run.pk} queued"}


def _stage_words(index: int, stage: str) -> str:
    return "SFT" if stage == TrainingRun.Stage.SFT else f"RL iteration {index}"


NOTHING_LEARNT = {NO_QUERIES: "the RL pool had no query left to sample",
                  NO_USEFUL_GROUP: "no rollout group was in the useful range"}


def _no_signal(run: TrainingRun) -> str:
    """Why an RL iteration learnt nothing although nothing is wrong ("" when that is not why it failed)."""
    if run.stage != TrainingRun.Stage.RL:
        return ""
    return NOTHING_LEARNT.get((run.progress or {}).get("no_signal"), "")


def train_round(loop_round) -> dict:
    """How the round's training stands; starts its next stage when the one before is done and served."""
    plan, runs = round_plan(loop_round), round_runs(loop_round)
    model, notes = loop_round.model_version, []
    for index, stage in enumerate(plan):
        run = runs.get(index)
        if run is None:
            waiting = serving_state(model) if stage == TrainingRun.Stage.RL else None
            return waiting or _start(loop_round, index, stage, model)
        if run.status in FAILED and _no_signal(run):
            notes.append(f"{_stage_words(index, stage)} learnt nothing ({_no_signal(run)})")
            break  # the policy would sample the same rollouts again: the round ends with what it has
        if run.status in FAILED:
            return {"status": "paused", "detail": f"{_stage_words(index, stage)}: training run #{run.pk} "
                                                  f"{run.status}: {(run.error or 'no reason recorded')[:200]}. "
                                                  "Resume the run on its page, then resume the loop."}
        if run.status != TrainingRun.Status.DONE or run.produced_model is None:
            step, total = run.progress.get("step", 0), run.progress.get("total_steps", 0)
            phase = run.progress.get("phase", run.status)
            return {"status": "running", "detail": f"{_stage_words(index, stage)}: training run #{run.pk} "
                                                   f"{phase}, step {step}/{total or '?'}"}
        model = run.produced_model
    if model == loop_round.model_version:
        return {"status": "paused", "detail": "the round trained nothing: " + ("; ".join(notes) or "no stage ran")}
    waiting = serving_state(model)
    if waiting is not None:
        return waiting
    return {"status": "done", "model_version": model,
            "detail": "; ".join([f"M(t+1) = {model}", *notes])}
