"""The training worker's side of a run: start the trainer process (torchrun, accelerate or
LLaMA-Factory), follow its metrics and status files into the TrainingRun, pass a cancel on, and
record what it produced.

The trainer runs in its own process so that the very same command runs on a GPU node, and so a
Celery worker stays small. Its files are the contract (training/trainer/state.py): metrics.jsonl,
status.json, checkpoint-<step>/, final/. A worker that dies takes its trainer with it
(PR_SET_PDEATHSIG), and beat's resume_stalled_runs starts the run again from its last checkpoint.
"""
import ctypes
import json
import logging
import os
import signal
import subprocess
import time
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from training.launch import LaunchError, trainer_command, write_launch_files
from training.models import TrainingRun
from training.runs import RunError, enqueue, finish_run

log = logging.getLogger(__name__)
POLL_S = 1.0
HEARTBEAT_S = 15.0  # well inside runs.STALE_AFTER
MAX_CURVE_POINTS = 2000
PR_SET_PDEATHSIG = 1


def _die_with_parent():  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def claim(run_id: int) -> TrainingRun | None:
    """Queued → running, once, however often the task is delivered; or the next look of an RL run
    that waits for its rollouts (one delivery takes the turn)."""
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            return None
        progress = run.progress or {}
        if run.status == TrainingRun.Status.RUNNING and progress.get("waiting"):
            run.progress, run.heartbeat_at = {**progress, "waiting": False}, timezone.now()
            run.save(update_fields=["progress", "heartbeat_at"])
            return run
        if run.status != TrainingRun.Status.QUEUED:
            return None
        now = timezone.now()
        run.status, run.attempts, run.heartbeat_at = TrainingRun.Status.RUNNING, run.attempts + 1, now
        run.started_at = run.started_at or now
        run.progress = {**(run.progress or {}), "phase": "starting"}
        run.save(update_fields=["status", "attempts", "heartbeat_at", "started_at", "progress"])
    return run


def end(run: TrainingRun, status: str, error: str = "") -> None:
    TrainingRun.objects.filter(pk=run.pk, status=TrainingRun.Status.RUNNING).update(
        status=status, error=error[:5000], finished_at=timezone.now(),
        progress={**(TrainingRun.objects.get(pk=run.pk).progress or {}), "phase": status})


def cancel_requested(run: TrainingRun) -> bool:
    return TrainingRun.objects.filter(pk=run.pk, cancel_requested=True).exists()


def trainer_config(run: TrainingRun, rollouts: Path | None = None) -> dict:
    config = {**run.config, "stage": run.stage, "output_dir": run.directory,
              "dataset_dir": run.snapshot.directory if run.snapshot_id else ""}
    if run.stage == "rl":
        config["rollouts"] = str(rollouts or "")
        config["reference"] = run.config.get("reference") or run.config["model"]
    return config


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def read_curve(run_dir: Path) -> list[dict]:
    """metrics.jsonl (ours) or trainer_log.jsonl (LLaMA-Factory's), as {step, loss, lr, ...} points."""
    points = []
    for name in ("metrics.jsonl", "trainer_log.jsonl"):
        path = run_dir / name
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            try:
                point = json.loads(line)
            except ValueError:
                continue  # a line being written right now
            if "current_steps" in point:  # LLaMA-Factory
                point = {"step": point["current_steps"], "loss": point.get("loss"), "lr": point.get("lr"),
                         "epoch": point.get("epoch"), "total_steps": point.get("total_steps")}
            if isinstance(point, dict) and "step" in point:
                points.append(point)
        break
    if len(points) > MAX_CURVE_POINTS:  # keep the page light: every n-th point and the last
        stride = -(-len(points) // MAX_CURVE_POINTS)
        points = points[::stride] + ([points[-1]] if (len(points) - 1) % stride else [])
    return points


def ingest(run: TrainingRun, run_dir: Path) -> dict:
    """Copy the trainer's files into the run row (progress, curve, last checkpoint); the status."""
    status = _read_json(run_dir / "status.json")
    curve = read_curve(run_dir)
    last = curve[-1] if curve else {}
    progress = {**(TrainingRun.objects.get(pk=run.pk).progress or {}),
                "step": status.get("step", last.get("step", 0)),
                "total_steps": status.get("total_steps") or last.get("total_steps") or 0,
                "epoch": last.get("epoch"), "loss": last.get("loss"), "trainer_state": status.get("state", "")}
    TrainingRun.objects.filter(pk=run.pk).update(progress=progress, metrics=curve, heartbeat_at=timezone.now(),
                                                 checkpoint=str(status.get("checkpoint") or "")[:400])
    return status


def set_phase(run: TrainingRun, phase: str, **extra) -> None:
    progress = {**(TrainingRun.objects.get(pk=run.pk).progress or {}), "phase": phase, **extra}
    TrainingRun.objects.filter(pk=run.pk).update(progress=progress, heartbeat_at=timezone.now())


def files_signature(run_dir: Path) -> tuple:
    """(size, mtime) of the files ingest reads: equal signatures, nothing new to read."""
    signature = []
    for name in ("metrics.jsonl", "trainer_log.jsonl", "status.json"):
        try:
            stat = (run_dir / name).stat()
            signature.append((stat.st_size, stat.st_mtime_ns))
        except OSError:
            signature.append(None)
    return tuple(signature)


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def supervise(run: TrainingRun, command: list[str], run_dir: Path) -> dict:
    """Run the trainer to its end; pass a cancel on as the CANCEL file. The trainer's last status."""
    log_path = run_dir / "trainer.log"
    env = {**os.environ, "PYTHONPATH": str(settings.BASE_DIR), "PYTHONUNBUFFERED": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    set_phase(run, "training", command=command)
    (run_dir / "CANCEL").unlink(missing_ok=True)  # a cancel that was already honoured is not the new one
    launched = time.time()
    with open(log_path, "ab") as output:
        process = subprocess.Popen(command, cwd=settings.BASE_DIR, stdout=output, stderr=subprocess.STDOUT,
                                   env=env, preexec_fn=_die_with_parent)
        cancel_sent, seen, beaten = False, None, 0.0
        while process.poll() is None:
            time.sleep(POLL_S)
            # The curve is read again only when the trainer wrote something; the heartbeat goes on anyway.
            signature = files_signature(run_dir)
            if signature != seen or time.monotonic() - beaten > HEARTBEAT_S:
                ingest(run, run_dir)
                seen, beaten = signature, time.monotonic()
            if not cancel_sent and cancel_requested(run):
                (run_dir / "CANCEL").touch()
                cancel_sent = True
        status = ingest(run, run_dir)
    # A status.json older than this start is an earlier attempt's ("running", "cancelled"): this trainer
    # wrote none (it died before its first line: the interpreter, torchrun, a killed process).
    status["written"] = float(status.get("updated_at") or 0) >= launched
    if not status["written"]:
        status["state"] = ""
    status.setdefault("state", "")
    status["returncode"] = process.returncode
    status["log_tail"] = _log_tail(log_path)
    return status


def execute_run(run_id: int) -> str:
    """The Celery task's body: the run's final status (or "skipped" when it was not queued)."""
    run = claim(run_id)
    if run is None:
        return "skipped"
    run_dir = Path(run.directory)
    try:
        if cancel_requested(run):
            end(run, TrainingRun.Status.CANCELLED)
            return TrainingRun.Status.CANCELLED
        rollouts = None
        if run.stage == "rl":
            from training.rl_round import CANCELLED, POLL_S, WAITING, poll_rollouts

            state, rollouts = poll_rollouts(run, run_dir)
            if state == WAITING:
                transaction.on_commit(lambda: enqueue(run.pk, countdown=POLL_S))
                return "waiting"
            if state == CANCELLED:
                end(run, TrainingRun.Status.CANCELLED)
                return TrainingRun.Status.CANCELLED
        config = trainer_config(run, rollouts)
        dataset_name = f"flywheel_{run.snapshot.kind}_{run.snapshot_id}" if run.snapshot_id else ""
        config_path = write_launch_files(config, run_dir, dataset_name)
        command = trainer_command(run.stage, config_path, config["launcher"], config["nproc"],
                                  config.get("deepspeed", ""))
        status = supervise(run, command, run_dir)
    except (LaunchError, RunError) as error:
        end(run, TrainingRun.Status.FAILED, str(error))
        return TrainingRun.Status.FAILED
    except Exception as error:  # recorded on the run, never lost in a worker log only
        log.exception("training run %s failed", run_id)
        end(run, TrainingRun.Status.FAILED, f"{type(error).__name__}: {error}")
        return TrainingRun.Status.FAILED
    final = run_dir / "final"
    if status["state"] == "done" and status["returncode"] == 0 and final.is_dir():
        finish_run(run, str(final))
        return TrainingRun.Status.DONE
    if status["state"] == "cancelled":
        end(run, TrainingRun.Status.CANCELLED)
        return TrainingRun.Status.CANCELLED
    if status["written"] and status.get("error"):
        why = status["error"]
    elif status["written"]:
        why = f"the trainer exited with code {status['returncode']}"
    else:
        why = f"the trainer exited with code {status['returncode']} before it wrote its status; the end of its log:"
    end(run, TrainingRun.Status.FAILED, f"{why}\n\n{status['log_tail'] or '(the log is empty)'}".strip())
    return TrainingRun.Status.FAILED

