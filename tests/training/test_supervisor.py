"""The worker's side of a run whose trainer fails before its first step: a trainer that exits without
writing status.json (or leaves only an earlier attempt's) is a failed run, the end of its log the
reason, and the run page shows it. The trainer here is a shell script standing in for one whose
interpreter or launcher died early (no torch needed)."""
import json
import time
from pathlib import Path

import pytest

from training import supervisor
from training.models import TrainingRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued_run(tmp_path, settings):
    settings.TRAINING_ROOT = tmp_path / "training"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return TrainingRun.objects.create(stage="sft", status=TrainingRun.Status.QUEUED, directory=str(run_dir),
                                      config={"model": {"tiny": {}}, "launcher": "torchrun", "nproc": 1})


def trainer_script(monkeypatch, script: str):
    monkeypatch.setattr(supervisor, "trainer_command", lambda *args, **kwargs: ["/bin/sh", "-c", script])
    monkeypatch.setattr(supervisor, "POLL_S", 0.05)


def test_a_trainer_that_dies_without_a_status_fails_the_run_with_its_logs_end(queued_run, monkeypatch, client_as):
    run_dir = Path(queued_run.directory)
    # An earlier attempt was cancelled: its status.json must not make this attempt "cancelled".
    (run_dir / "status.json").write_text(json.dumps({"state": "cancelled", "step": 4, "updated_at": time.time() - 60}))
    trainer_script(monkeypatch, "echo 'Traceback (most recent call last):'; "
                                "echo 'ModuleNotFoundError: No module named torch' >&2; exit 3")
    assert supervisor.execute_run(queued_run.pk) == TrainingRun.Status.FAILED
    queued_run.refresh_from_db()
    assert queued_run.status == TrainingRun.Status.FAILED and queued_run.finished_at
    headline, log = queued_run.error.split("\n\n", 1)
    assert headline == "the trainer exited with code 3 before it wrote its status; the end of its log:"
    assert log.splitlines()[-2:] == ["Traceback (most recent call last):", "ModuleNotFoundError: No module named torch"]
    page = client_as("manager").get(f"/training/runs/{queued_run.pk}/").content.decode()
    assert 'data-testid="run-error"' in page and "No module named torch" in page and "exited with code 3" in page


def test_a_trainer_that_wrote_its_failure_is_failed_with_its_own_words(queued_run, monkeypatch):
    trainer_script(monkeypatch, """printf '{"state": "failed", "error": "ImportError: transformers is broken on this host", """
                                f""""updated_at": %s}}' "$(date +%s.%N)" > '{queued_run.directory}/status.json'; exit 1""")
    assert supervisor.execute_run(queued_run.pk) == TrainingRun.Status.FAILED
    queued_run.refresh_from_db()
    assert queued_run.error.split("\n\n", 1)[0] == "ImportError: transformers is broken on this host"
    assert queued_run.progress["trainer_state"] == "failed"


def test_an_empty_log_is_said_to_be_empty(queued_run, monkeypatch):
    trainer_script(monkeypatch, "exit 0")
    assert supervisor.execute_run(queued_run.pk) == TrainingRun.Status.FAILED
    queued_run.refresh_from_db()
    assert queued_run.error.endswith("before it wrote its status; the end of its log:\n\n(the log is empty)")
