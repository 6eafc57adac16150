"""The step-level reward model (issue #39; ClawGUI §3.2.2's process reward): trained from the judged
steps the pools hold, served in-process like the compact policy, usable as eq. 4's step reward.

    version = launch_reward_model_training("prm-1", user)   # a ModelVersion now; a training worker trains it
    train_reward_model(version.pk)                           # the task's body: data → trainer → metrics.json
    reward_model_step_rewards(version, steps) -> [+1|0|−1]   # eq. 4, one per Step row given
    prm_step_accuracy(seed=0) -> float | None                # a script's figure: trains on the database now

The artifact directory holds status.json (queued, reading, training, done or failed, with progress),
features.npz (the training split), weights.npz + config.json (training/trainer/reward_model.py
writes them, torch in a subprocess) and metrics.json: held-out accuracy, the confusion of labels
against rewards, per-class and per-source counts. Inference is numpy; the band is
training/rules/process_reward.py's PROCESS_REWARD_BAND, recorded in config.json.
"""
from __future__ import annotations

import json
import logging
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from flywheel.models import ModelVersion, Step
from training import reward_data, runs
from training.reward_features import FEATURES, step_features
from training.rules.process_reward import (
    PROCESS_REWARD_BAND,
    RIGHT,
    SOURCE_WORDS,
    WRONG,
    process_reward,
    step_confusion,
)

log = logging.getLogger(__name__)

FORMAT = "step-reward-v1"
DEFAULT_EPOCHS = 300
TRAIN_TIMEOUT_S = 600


class RewardModelError(RuntimeError):
    """The step reward model could not be trained or used; the message says why."""


def artifact_directory(version: ModelVersion) -> Path:
    """Named by the version's id too: two names may give the same slug ("prm 1", "prm-1")."""
    slug = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in version.name)[:120]
    return Path(settings.TRAINING_ROOT) / "reward_models" / f"{version.pk}-{slug}"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_json(path: Path, value: dict) -> None:
    """Written beside and renamed, so a page never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(value, indent=2))
    partial.replace(path)


def set_status(directory: Path, state: str, **fields) -> None:
    _write_json(directory / "status.json", {"state": state, "updated": timezone.now().isoformat(), **fields})


# -- training ----------------------------------------------------------------------------------------

def run_trainer(data_path: Path, out: Path, epochs: int, seed: int) -> dict:
    """The torch trainer as a subprocess (training/runs.run_cpu_trainer); its printed summary."""
    return runs.run_cpu_trainer("training.trainer.reward_model",
                                ["--data", str(data_path), "--out", str(out), "--epochs", str(epochs), "--seed", str(seed)],
                                what="reward model trainer", error=RewardModelError, timeout=TRAIN_TIMEOUT_S)


def _class_counts(labels: np.ndarray) -> dict:
    return {"+1": int(np.sum(labels == RIGHT)), "-1": int(np.sum(labels == WRONG))}


def fit(dataset: reward_data.Dataset, out: Path, *, seed: int = 0, epochs: int = DEFAULT_EPOCHS,
        held_out_share: float = reward_data.DEFAULT_HELD_OUT_SHARE) -> dict:
    """Train on the trajectories of the training queries, score the held-out queries' with the numpy head
    (what serving computes), write metrics.json; the metrics."""
    if not len(dataset.label):
        raise RewardModelError("no judged step in the pools yet: judge trajectories (HTSC, adjudication, "
                               "ECDM attribution) before training a step reward model")
    held = reward_data.split_by_query(dataset.query.tolist(), held_out_share, seed)
    test = np.isin(dataset.query, list(held))
    train = ~test
    out.mkdir(parents=True, exist_ok=True)
    data_path = out / "features.npz"
    np.savez(data_path, x=dataset.x[train], y=(dataset.label[train] == RIGHT).astype(np.int64))
    summary = run_trainer(data_path, out, epochs, seed)
    config = _read_json(out / "config.json")
    config["band"] = list(PROCESS_REWARD_BAND)
    _write_json(out / "config.json", config)
    head = RewardHead(out)
    labels = dataset.label[test]
    probabilities = head.probabilities(dataset.x[test]) if len(labels) else np.zeros(0)
    rewards = [process_reward(float(p), head.band) for p in probabilities]
    majority = max(_class_counts(labels).values()) / len(labels) if len(labels) else None
    metrics = {
        "format": FORMAT, "seed": seed, "epochs": epochs, "held_out_share": held_out_share,
        "band": list(head.band), "labelled_steps": int(len(dataset.label)),
        "truncated_at_max_steps": dataset.stats.get("truncated", False),
        "trajectories": {"considered": dataset.stats.get("trajectories_considered"),
                         "labelled": dataset.stats.get("trajectories_labelled"),
                         "train": int(len(set(dataset.trajectory[train].tolist()))),
                         "held_out": int(len(set(dataset.trajectory[test].tolist())))},
        "queries": {"train": int(len(set(dataset.query[train].tolist()))), "held_out": len(held)},
        "sources": dataset.stats.get("sources", {}),
        "classes": {"train": _class_counts(dataset.label[train]), "held_out": _class_counts(labels)},
        "held_out": {
            "steps": int(len(labels)),
            # p ≥ 0.5 is "right": every held-out step counts, the band's 0s included.
            "accuracy": round(float(np.mean((probabilities >= 0.5) == (labels == RIGHT))), 4) if len(labels) else None,
            "majority_share": round(majority, 4) if majority is not None else None,
            **step_confusion(labels.tolist(), rewards)},
        "trainer": summary, "featurise_seconds": dataset.stats.get("featurise_seconds"),
    }
    _write_json(out / "metrics.json", metrics)
    return metrics


def launch_reward_model_training(name: str, user=None, *, seed: int = 0, launch: bool = True) -> ModelVersion:
    """A new step reward model version (its page shows the training's progress) and the training
    task on the training queue, sent after commit. ValueError when the name is taken or empty."""
    name = (name or "").strip()[:200]
    if not name:
        raise ValueError("name the step reward model")
    if ModelVersion.objects.filter(name=name).exists():
        raise ValueError(f"a model named {name!r} exists already")
    try:
        with transaction.atomic():
            version = ModelVersion.objects.create(name=name, kind=ModelVersion.Kind.REWARD_MODEL,
                                                  sampling={"seed": int(seed)})
            version.artifact = str(artifact_directory(version))
            version.save(update_fields=["artifact"])
    except IntegrityError:  # made at the same moment elsewhere
        raise ValueError(f"a model named {name!r} exists already") from None
    set_status(Path(version.artifact), "queued", by=getattr(user, "username", ""))
    if launch:
        transaction.on_commit(lambda: enqueue(version.pk))
    return version


def enqueue(version_id: int) -> str:
    from training.tasks import train_reward_model_task

    return train_reward_model_task.apply_async((version_id,), queue="training").id


def train_reward_model(version_id: int, *, epochs: int = DEFAULT_EPOCHS) -> str:
    """The training task's body: reads the judged steps, trains, writes metrics; the state it ended in."""
    version = ModelVersion.objects.filter(pk=version_id, kind=ModelVersion.Kind.REWARD_MODEL).first()
    if version is None or not version.artifact:
        return "skipped"
    directory = Path(version.artifact)
    if status_of(version).get("state") == "done":
        return "done"   # a redelivered task: it was trained
    seed = int((version.sampling or {}).get("seed", 0))
    try:
        set_status(directory, "reading", done=0, total=0)
        dataset = reward_data.build_dataset(progress=lambda done, total: set_status(directory, "reading", done=done,
                                                                                   total=total))
        set_status(directory, "training", steps=int(len(dataset.label)))
        fit(dataset, directory, seed=seed, epochs=epochs)
    except RewardModelError as error:
        set_status(directory, "failed", error=str(error))
        return "failed"
    except Exception as error:  # the time limit, a lost database: the page says it stopped, the log says why
        log.exception("step reward model %s: training stopped", version.name)
        set_status(directory, "failed", error=f"training stopped ({type(error).__name__}); the worker's log has the details")
        return "failed"
    set_status(directory, "done")
    return "done"


def prm_held_out(seed: int = 0, epochs: int = DEFAULT_EPOCHS,
                 max_steps: int = reward_data.DEFAULT_MAX_STEPS) -> dict:
    """Trains on the database as it is now (in a temporary directory, no model version is made)
    and returns the held-out figures (accuracy, majority_share, steps, counts...)."""
    dataset = reward_data.build_dataset(max_steps=max_steps)
    with tempfile.TemporaryDirectory(prefix="prm-") as scratch:
        return fit(dataset, Path(scratch), seed=seed, epochs=epochs)["held_out"]


def prm_step_accuracy(seed: int = 0, epochs: int = DEFAULT_EPOCHS,
                      max_steps: int = reward_data.DEFAULT_MAX_STEPS) -> float | None:
    """The held-out step accuracy of prm_held_out (None when no step is held out)."""
    return prm_held_out(seed, epochs, max_steps)["accuracy"]


# -- serving -----------------------------------------------------------------------------------------

_heads: dict[str, RewardHead] = {}
_lock = threading.Lock()


class RewardHead:
    """The trained MLP in numpy: standardised features → ReLU → one logit → p(the step is right)."""

    def __init__(self, directory: Path):
        config_path, weights_path = directory / "config.json", directory / "weights.npz"
        if not config_path.exists() or not weights_path.exists():
            raise RewardModelError(f"the step reward model in {directory} is not trained (no weights yet)")
        self.config = json.loads(config_path.read_text())
        if self.config.get("format") != FORMAT:
            raise RewardModelError(f"{directory}: not a {FORMAT} model ({self.config.get('format')!r})")
        with np.load(weights_path) as weights:
            self.w = {name: weights[name].astype(np.float32) for name in ("mean", "std", "w1", "b1", "w2", "b2")}
        if self.w["w1"].shape[0] != FEATURES:
            raise RewardModelError(f"{directory}: the head reads {self.w['w1'].shape[0]} features; this code "
                                   f"computes {FEATURES}: train it again")
        self.band = tuple(self.config.get("band") or PROCESS_REWARD_BAND)

    def probabilities(self, rows: np.ndarray) -> np.ndarray:
        w = self.w
        hidden = np.maximum((rows - w["mean"]) / w["std"] @ w["w1"] + w["b1"], 0)
        logits = (hidden @ w["w2"] + w["b2"]).reshape(-1)
        return 1.0 / (1.0 + np.exp(-np.clip(logits, -30, 30)))


def load_head(artifact: str) -> RewardHead:
    """A trained head, loaded once per process (a new training is a new directory)."""
    with _lock:
        if artifact not in _heads:
            _heads[artifact] = RewardHead(Path(artifact))
        return _heads[artifact]


def _head_of(version: ModelVersion) -> RewardHead:
    if version is None or version.kind != ModelVersion.Kind.REWARD_MODEL:
        raise ValueError(f"{version} is not a step reward model")
    if not version.artifact:
        raise RewardModelError(f"{version.name} has no artifact directory")
    return load_head(version.artifact)


def trained_reward_model(name: str) -> ModelVersion:
    """The step reward model version named `name`, trained and ready to rate steps; ValueError saying
    what is missing (an RL run's step_reward_model is checked when the run is created and used)."""
    version = ModelVersion.objects.filter(name=name).first()
    if version is None:
        raise ValueError(f"no model version is named {name!r}: train a step reward model first")
    if version.kind != ModelVersion.Kind.REWARD_MODEL:
        raise ValueError(f"{name} is a {version.get_kind_display().lower()}, not a step reward model")
    try:
        _head_of(version)
    except (RewardModelError, OSError) as error:
        raise ValueError(f"{name} cannot rate steps yet ({status_of(version).get('state', 'not trained')}): "
                         f"{error}") from None
    return version


def reward_model_step_probabilities(version: ModelVersion, steps: Sequence[Step]) -> list[float]:
    """p(the step was right) for each Step row given (each must carry an action: executed, or
    blocked by the audit); the rows may come from several trajectories."""
    head = _head_of(version)
    by_trajectory: dict[int, set[int]] = {}
    for step in steps:
        by_trajectory.setdefault(step.trajectory_id, set()).add(step.index)
    inputs = {}
    for trajectory_id, wanted in by_trajectory.items():
        all_steps = list(Step.objects.filter(trajectory_id=trajectory_id).select_related("trajectory__query")
                         .order_by("index"))
        trajectory = all_steps[0].trajectory if all_steps else None
        found = reward_data.step_inputs(trajectory, all_steps, wanted) if trajectory else {}
        missing = sorted(wanted - set(found))
        if missing:
            raise ValueError(f"trajectory #{trajectory_id}: step(s) {missing} carry no action to rate")
        inputs.update({(trajectory_id, index): value for index, value in found.items()})
    if not steps:
        return []
    rows = np.stack([step_features(inputs[(s.trajectory_id, s.index)]) for s in steps])
    return [round(float(p), 6) for p in head.probabilities(rows)]


def reward_model_step_rewards(version: ModelVersion, steps: Sequence[Step]) -> list[int]:
    """Eq. 4's step reward (+1, 0, −1) of each Step row given, in order: the model's probability
    mapped through its band (process_reward: ≥ 0.65 → +1, ≤ 0.35 → −1, else 0)."""
    head = _head_of(version)
    return [process_reward(p, head.band) for p in reward_model_step_probabilities(version, steps)]


# -- the model page ----------------------------------------------------------------------------------

def status_of(version: ModelVersion) -> dict:
    return _read_json(Path(version.artifact) / "status.json") if version.artifact else {}


def metrics_of(version: ModelVersion) -> dict:
    return _read_json(Path(version.artifact) / "metrics.json") if version.artifact else {}


def page_summary(version: ModelVersion) -> dict:
    """What the model page shows of a step reward model: its training state and, once trained, the
    held-out accuracy, the confusion rows, the label counts per class and per source."""
    status = status_of(version)
    metrics = metrics_of(version)
    held = metrics.get("held_out") or {}
    counts = held.get("counts") or {}
    confusion = [{"label": label, "right": row.get("1", 0), "unsure": row.get("0", 0), "wrong": row.get("-1", 0)}
                 for label, row in (("+1 (right)", counts.get("1", {})), ("−1 (wrong)", counts.get("-1", {})))]
    classes = metrics.get("classes") or {}
    class_rows = [{"label": label, "train": (classes.get("train") or {}).get(key, 0),
                   "held_out": (classes.get("held_out") or {}).get(key, 0)}
                  for label, key in (("+1 (right)", "+1"), ("−1 (wrong)", "-1"))]
    return {"state": status.get("state", "unknown"), "status": status, "metrics": metrics, "held_out": held,
            "confusion": confusion if counts else [], "classes": class_rows,
            "sources": [(SOURCE_WORDS.get(source, source), count) for source, count in (metrics.get("sources") or {}).items()],
            "live": status.get("state") in ("queued", "reading", "training"),
            "band": metrics.get("band") or list(PROCESS_REWARD_BAND)}
