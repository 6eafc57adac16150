"""The self-evolution loop's trainer (flywheel/repair/loop.py's EVOLUTION_TRAINER contract).

Set EVOLUTION_TRAINER=training.round_trainer.train_round: each round exports a new SFT snapshot of the
pools and trains M(t+1) from M(t) with it, one run per round (keyed by the round). The loop moves on
once M(t+1) can act: a checkpoint is served with its vLLM recipe and registered as an endpoint, and
until then the round says exactly that.
"""
import json

from django.conf import settings

from flywheel.models import ModelVersion
from training.config import ConfigError
from training.models import DataSnapshot, Serving, TrainingRun
from training.runs import RunError, create_run
from training.snapshots import create_snapshot


def loop_settings() -> tuple[dict, dict]:
    """(run config, snapshot config) for loop rounds: TRAINING_LOOP_CONFIG is JSON in the environment."""
    raw = settings.TRAINING_LOOP_CONFIG or "{}"
    data = json.loads(raw) if isinstance(raw, str) else dict(raw)
    return dict(data.get("run") or {}), dict(data.get("snapshot") or {})


def train_round(loop_round) -> dict:
    run = TrainingRun.objects.filter(progress__loop_round=loop_round.pk).order_by("pk").first()
    if run is None:
        run_config, snapshot_config = loop_settings()
        snapshot = create_snapshot(DataSnapshot.Kind.SFT, snapshot_config, name=f"loop round {loop_round.pk}")
        if snapshot.status != DataSnapshot.Status.READY:
            return {"status": "failed", "detail": f"SFT snapshot #{snapshot.pk}: {snapshot.error or snapshot.status}"}
        try:
            run = create_run("sft", run_config, snapshot=snapshot, base_model=loop_round.model_version)
        except (ConfigError, RunError) as error:
            return {"status": "failed", "detail": str(error)}
        TrainingRun.objects.filter(pk=run.pk).update(progress={**run.progress, "loop_round": loop_round.pk})
        return {"status": "running", "detail": f"training run #{run.pk} queued on snapshot #{snapshot.pk}"}
    if run.status in (TrainingRun.Status.FAILED, TrainingRun.Status.CANCELLED):
        return {"status": "failed", "detail": f"training run #{run.pk} {run.status}: {run.error[:200]}"}
    if run.status != TrainingRun.Status.DONE:
        step, total = run.progress.get("step", 0), run.progress.get("total_steps", 0)
        return {"status": "running", "detail": f"training run #{run.pk}: step {step}/{total or '?'}"}
    model = run.produced_model
    if model is not None and model.kind == ModelVersion.Kind.CHECKPOINT:
        serving = Serving.objects.filter(version=model).first()
        if serving is not None and serving.state == Serving.State.FAILED:
            # A model host never retries it by itself: the round cannot roll it out.
            return {"status": "failed", "detail": f"{model.name} cannot be served: {serving.error[:300]}"}
        if serving is not None and serving.state in Serving.ACTIVE:
            return {"status": "running", "detail": f"{model.name} is trained; model host {serving.host} is "
                                                   f"starting its server"}
        return {"status": "running", "detail": f"{model.name} is trained; waiting for a model host to serve it "
                                               "(or serve it with the vLLM recipe on its model page and register "
                                               "its endpoint) to roll it out"}
    return {"status": "done", "model_version": model, "detail": f"M(t+1) = {model}"}
