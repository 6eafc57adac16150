"""The shell commands go through the same services as the pages."""
import json

import pytest
from django.core.management import CommandError, call_command

from tests.training.test_exports import make_trajectory, sft
from training.models import DataSnapshot, TrainingRun

pytestmark = pytest.mark.django_db
# The smallest tiny Qwen2.5-VL (one layer, one head of 16): an export's sample is ~2,600 tokens (the
# system prompt, a byte a token), and the default tiny model's attention over it makes a step ~6×
# dearer. These tests are about the runs (config, steps, status, artifact), not what the model learns.
SMALL_TINY = {"hidden_size": 16, "num_attention_heads": 1, "num_key_value_heads": 1, "intermediate_size": 32,
              "num_hidden_layers": 1}


@pytest.fixture(autouse=True)
def training_root(settings, tmp_path):
    settings.TRAINING_ROOT = tmp_path / "training"


def test_export_then_train_inline_on_the_tiny_model(capsys, torch):
    sft(make_trajectory(n_steps=3))
    call_command("export_snapshot", "--kind", "sft", "--config", '{"k": 2}')
    snapshot = DataSnapshot.objects.get()
    assert f"snapshot #{snapshot.pk} ready: 3 samples" in capsys.readouterr().out
    call_command("train", "--stage", "sft", "--snapshot", str(snapshot.pk), "--inline", "--config",
                 json.dumps({"model": {"tiny": SMALL_TINY}, "max_steps": 2, "batch_size": 2, "max_seq_len": 4096}))
    run = TrainingRun.objects.get()
    assert run.status == "done" and run.produced_model and "produced" in capsys.readouterr().out


def test_refusals_name_the_problem():
    with pytest.raises(CommandError, match="SFT pool has no entries"):
        call_command("export_snapshot", "--kind", "sft")
    with pytest.raises(CommandError, match="'sorces'"):
        call_command("export_snapshot", "--kind", "sft", "--config", '{"sorces": {}}')
    with pytest.raises(CommandError, match="no snapshot #99"):
        call_command("train", "--stage", "sft", "--snapshot", "99")
    sft(make_trajectory(n_steps=1))
    call_command("export_snapshot", "--kind", "sft")
    snapshot = DataSnapshot.objects.get(status="ready")
    with pytest.raises(CommandError, match="'lr'"):
        call_command("train", "--stage", "sft", "--snapshot", str(snapshot.pk), "--config", '{"lr": 1}')
    with pytest.raises(CommandError, match="--out"):
        call_command("export_snapshot", "--verl-run", "1")


def test_a_tiny_snapshot_trains_one_step_with_the_reports_batch(capsys, torch):
    """One sample and the §5.1 batch of 128: one epoch is one optimizer step, not an error."""
    sft(make_trajectory(n_steps=1))
    call_command("export_snapshot", "--kind", "sft")
    snapshot = DataSnapshot.objects.get()
    call_command("train", "--stage", "sft", "--snapshot", str(snapshot.pk), "--inline", "--config",
                 json.dumps({"model": {"tiny": SMALL_TINY}, "max_seq_len": 4096}))   # 128 micro steps
    run = TrainingRun.objects.get()
    assert run.status == "done" and run.config["batch_size"] == 128
    assert run.progress["total_steps"] == 1 and [p["step"] for p in run.metrics] == [1]
