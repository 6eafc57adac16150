"""Training runs: define, launch on the `training` queue, cancel, resume, and what a finished run
produces (a ModelVersion whose lineage is the run: base model, data snapshot, config, metrics).

State changes happen here in one transaction each; launching (Celery) happens after commit. The
worker side that supervises the trainer process is training/supervisor.py.
"""
import importlib.util
import json
import logging
import subprocess
import sys
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from flywheel.models import ModelVersion
from flywheel.policies import unservable_reason
from training.config import MODEL_EXAMPLE, ConfigError, validate_config
from training.models import DataSnapshot, TrainingRun
from training.rules.rewards import REWARD_MODEL

log = logging.getLogger(__name__)
SNAPSHOT_KIND = {"cpt": "cpt", "sft": "sft", "rl": "rl"}
STALE_AFTER = timedelta(seconds=120)  # a running run whose supervisor stopped beating this long is resumed
INSTALL_COMMAND = "make install-training"
INSTALL_HINT = ("Training cannot run here yet: the training extras are not installed where this console runs. "
                f"Run `{INSTALL_COMMAND}` in the console's directory (`make up` installs them too), "
                "then reload this page.")
TRAINING_EXTRAS = ("torch", "transformers")


class RunError(ValueError):
    """A run that cannot be created or changed as asked; the message says why."""


def training_extras_installed() -> bool:
    """Whether this environment can run the trainer. The one check every page and launch uses (the web
    app and the workers share it when `make up` runs them); call it as runs.training_extras_installed()
    so tests can stand in for a host without the extras."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in TRAINING_EXTRAS)
    except (ImportError, ValueError):  # a broken or blocked install counts as absent
        return False


def run_cpu_trainer(module: str, arguments: list[str], *, what: str, error: type[Exception], timeout: float) -> dict:
    """One of training/trainer/'s small CPU trainers (the compact head, the step reward model) as a
    subprocess — an argument list, no shell — and the JSON summary it prints last. `error`, whose message
    the pages show, when the extras are missing, it runs past `timeout` or it fails (the traceback goes
    to the worker's log, not the message)."""
    if not training_extras_installed():
        raise error(f"the training extras are not installed on the worker: run `{INSTALL_COMMAND}` there, "
                    "then start again")
    command = [sys.executable, "-m", module, *arguments]
    try:
        done = subprocess.run(command, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise error(f"the {what} ran past {timeout} s") from None
    if done.returncode != 0:
        log.error("the %s exited %s:\n%s", what, done.returncode, done.stderr or done.stdout)
        raise error(f"the {what} stopped with an error (exit code {done.returncode}); the worker's log has the "
                    "details")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_directory(run: TrainingRun):
    return settings.TRAINING_ROOT / "runs" / str(run.pk)


def model_spec(config: dict, base_model: ModelVersion | None) -> dict:
    """The weights a run starts from: the config's, else the base model's checkpoint, else the path
    settings.TRAINING_BASE_MODEL names; a config naming none is refused at creation."""
    if config.get("model"):
        return config["model"]
    if base_model is not None and base_model.artifact:
        return {"path": base_model.artifact}
    if settings.TRAINING_BASE_MODEL:
        return {"path": settings.TRAINING_BASE_MODEL}
    return {}


def create_run(stage: str, config=None, *, user=None, snapshot: DataSnapshot | None = None,
               base_model: ModelVersion | None = None, launch: bool = True) -> TrainingRun:
    """Validate, create and (after commit) launch a run. ConfigError/RunError say what is wrong."""
    config = validate_config(stage, config)
    if stage in ("cpt", "sft"):
        if snapshot is None:
            raise RunError(f"a {stage.upper()} run trains on a snapshot: export the {stage.upper()} pool first")
        if snapshot.kind != SNAPSHOT_KIND[stage]:
            raise RunError(f"snapshot #{snapshot.pk} holds {snapshot.get_kind_display()}, not {stage.upper()} data")
    if snapshot is not None and snapshot.status != DataSnapshot.Status.READY:
        raise RunError(f"snapshot #{snapshot.pk} is {snapshot.get_status_display().lower()}: "
                       f"{snapshot.error or 'only a ready snapshot can be trained on'}")
    if snapshot is not None and snapshot.row_count == 0:
        raise RunError(f"snapshot #{snapshot.pk} has no samples")
    if stage == "rl" and base_model is None and not config.get("rl_run"):
        raise RunError("an RL run rolls out a policy: choose the base model version whose rollouts it learns from")
    if stage == "rl" and not config.get("rl_run") and unservable_reason(base_model):
        raise RunError(f"its rollouts need a policy that acts: {unservable_reason(base_model)}")
    if stage == "rl" and config["step_reward_source"] == REWARD_MODEL:
        from training.reward_model import trained_reward_model  # it builds on this module

        try:
            trained_reward_model(config["step_reward_model"])
        except ValueError as error:
            raise RunError(f"step_reward_model: {error}") from None
    config["model"] = model_spec(config, base_model)
    if not config["model"]:
        raise ConfigError(f"model: choose a base model version with a checkpoint, or write {MODEL_EXAMPLE}")
    config["launcher"] = config["launcher"] or settings.TRAINING_LAUNCHER
    config["nproc"] = config["nproc"] or settings.TRAINING_NPROC
    with transaction.atomic():
        run = TrainingRun.objects.create(stage=stage, config=config, snapshot=snapshot, base_model=base_model,
                                         created_by=user, status=TrainingRun.Status.QUEUED,
                                         progress={"phase": "queued", "step": 0, "total_steps": 0})
        run.directory = str(run_directory(run))
        run.save(update_fields=["directory"])
        if launch:
            transaction.on_commit(lambda: enqueue(run.pk))
    return run


def enqueue(run_id: int, countdown: float = 0) -> str:
    from training.tasks import run_training

    result = run_training.apply_async((run_id,), queue="training", countdown=countdown)
    TrainingRun.objects.filter(pk=run_id).update(celery_task_id=result.id)
    return result.id


def cancel_run(run: TrainingRun) -> TrainingRun:
    """A queued run stops at once; a running one is asked to stop (its trainer saves a checkpoint)."""
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().get(pk=run.pk)
        if run.status not in TrainingRun.ACTIVE:
            raise RunError(f"run #{run.pk} is {run.get_status_display().lower()}; only a queued or running run "
                           "can be cancelled")
        run.cancel_requested = True
        fields = ["cancel_requested"]
        if run.status == TrainingRun.Status.QUEUED:
            run.status, run.finished_at = TrainingRun.Status.CANCELLED, timezone.now()
            run.progress = {**(run.progress or {}), "phase": "cancelled"}
            fields += ["status", "finished_at", "progress"]
        run.save(update_fields=fields)
    return run


def resume_run(run: TrainingRun) -> TrainingRun:
    """Start a failed or cancelled run again; the trainer continues from its last checkpoint."""
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().get(pk=run.pk)
        if run.status not in (TrainingRun.Status.FAILED, TrainingRun.Status.CANCELLED):
            raise RunError(f"run #{run.pk} is {run.get_status_display().lower()}; only a failed or cancelled run "
                           "can be resumed")
        run.status, run.cancel_requested, run.error, run.finished_at = TrainingRun.Status.QUEUED, False, "", None
        run.progress = {**(run.progress or {}), "phase": "queued"}
        run.save(update_fields=["status", "cancel_requested", "error", "finished_at", "progress"])
        transaction.on_commit(lambda: enqueue(run.pk))
    return run


def resume_stalled_runs(stale_after: timedelta = STALE_AFTER) -> list[int]:
    """Runs whose supervising worker died (killed mid-epoch, host lost) go back to the queue; the
    trainer resumes from the last checkpoint it wrote. Beat calls this."""
    cutoff = timezone.now() - stale_after
    resumed = []
    for run in TrainingRun.objects.filter(status=TrainingRun.Status.RUNNING, heartbeat_at__lt=cutoff):
        with transaction.atomic():
            updated = TrainingRun.objects.filter(pk=run.pk, status=TrainingRun.Status.RUNNING,
                                                 heartbeat_at__lt=cutoff).update(
                status=TrainingRun.Status.QUEUED, heartbeat_at=timezone.now())
            if updated:
                transaction.on_commit(lambda pk=run.pk: enqueue(pk))
                resumed.append(run.pk)
    if resumed:
        log.warning("training runs %s lost their worker; resumed from their last checkpoints", resumed)
    return resumed


def produced_name(run: TrainingRun) -> str:
    base = run.base_model.name if run.base_model_id else "tiny" if "tiny" in run.config.get("model", {}) else "model"
    return f"{base}+{run.stage}#{run.pk}"[:200]


def finish_run(run: TrainingRun, artifact: str) -> ModelVersion:
    """The run is done: M(t+1) exists as a checkpoint model version derived from M(t)."""
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().get(pk=run.pk)
        if run.produced_model_id:
            return run.produced_model
        version = ModelVersion.objects.create(name=produced_name(run), kind=ModelVersion.Kind.CHECKPOINT,
                                              parent=run.base_model, artifact=artifact)
        run.produced_model, run.status, run.finished_at = version, TrainingRun.Status.DONE, timezone.now()
        run.progress = {**(run.progress or {}), "phase": "done"}
        run.save(update_fields=["produced_model", "status", "finished_at", "progress"])
    return version


def lineage(version: ModelVersion, limit: int = 50) -> list[dict]:
    """M(0) → … → version: each model with the run that produced it (stage, snapshot, config, last loss)."""
    chain, seen = [], set()
    while version is not None and version.pk not in seen and len(chain) < limit:
        seen.add(version.pk)
        run = (TrainingRun.objects.select_related("snapshot").filter(produced_model=version).first())
        last = (run.metrics or [{}])[-1] if run else {}
        chain.append({"model": version, "run": run, "last_loss": last.get("loss")})
        version = version.parent
    return list(reversed(chain))
