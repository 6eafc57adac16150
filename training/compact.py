"""Training the compact policy (issue #16) from the pools, through their exports only.

    model = train_compact("compact-r1", parent=m0)        # SFT snapshot → features → head → ModelVersion

Each training exports a new SFT snapshot of the pools (training/snapshots.py: held-out queries are
never exported), reads the samples back out of the snapshot's files — the goal, the history text and
the device context from the protocol's user message, the UI dump and screen size the sample names,
the target action from the assistant's output — featurises them with the policy's own
compact_features.featurize, and hands the arrays to the torch trainer (training/trainer/compact.py)
in a subprocess, so the web app and this module never import torch. A sample whose action the screen
offers no candidate for (a wait, a clarify, a tap on nothing) is counted and skipped.

Beside the pool's steps, the success claims the judges rejected (training/compact_claims.py, read
from the judged trajectories as the step reward model reads them, never a held-out query's) teach
the head where not to stop: the pools hold only what was right, and a stop must be earned.

The evolution loop's trainer for compact models is `loop_trainer` (EVOLUTION_TRAINER); it trains in
the call, keyed by the round (the model's name), so asking again returns the same model.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import IntegrityError, transaction

from flywheel.models import ModelVersion
from flywheel.policies.compact_features import SCALARS, featurize, prompt_parts, target_index
from flywheel.policies.protocol import ProtocolError, parse_output
from training import runs
from training.compact_claims import false_claim_arrays
from training.models import DataSnapshot
from training.snapshots import create_snapshot

log = logging.getLogger(__name__)

FEATURES = SCALARS
DEFAULT_EPOCHS = 40
TRAIN_TIMEOUT_S = 900


class CompactTrainingError(RuntimeError):
    """The compact policy could not be trained; the message says why."""


def artifact_directory(name: str) -> Path:
    slug = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name)[:120]
    return Path(settings.TRAINING_ROOT) / "compact" / slug


def exported_app_labels(meta: dict) -> dict[str, str]:
    """{package: label} from a sample's meta: a list beside `apps` (exports now), or the object older
    snapshots wrote."""
    labels = meta.get("app_labels") or {}
    if isinstance(labels, list):
        return {app: label for app, label in zip(meta.get("apps") or [], labels) if label}
    return dict(labels)


def featurize_snapshot(snapshot: DataSnapshot) -> tuple[dict, dict]:
    """(arrays x, offsets, target, stop (each step's terminate candidate); stats) from an SFT snapshot's data.jsonl and hierarchies/."""
    directory = Path(snapshot.directory)
    blocks, offsets, targets, stops = [], [0], [], []
    stats = {"samples": 0, "used": 0, "skipped": {}}

    def skip(reason):
        stats["skipped"][reason] = stats["skipped"].get(reason, 0) + 1

    with open(directory / "data.jsonl", encoding="utf-8") as handle:
        for raw in handle:
            stats["samples"] += 1
            record = json.loads(raw)
            meta = record.get("meta") or {}
            messages = {m.get("role"): m.get("content", "") for m in record.get("messages", [])}
            goal, history, package = prompt_parts(messages.get("user", ""))
            screen = tuple(meta.get("screen") or ())
            if not meta.get("hierarchy") or len(screen) != 2:
                skip("no UI dump stored")
                continue
            try:
                action = parse_output(messages.get("assistant", "")).action
            except ProtocolError:
                skip("unparseable target")
                continue
            hierarchy = (directory / meta["hierarchy"]).read_text(encoding="utf-8", errors="replace")
            found, features = featurize(goal, history, hierarchy, screen, list(meta.get("apps") or []), package,
                                        app_labels=exported_app_labels(meta))
            index = target_index(found, action, screen)
            if index is None:
                skip(f"no candidate for {action.get('action')}")
                continue
            blocks.append(features)
            offsets.append(offsets[-1] + len(found))
            targets.append(index)
            stops.append(next(i for i, c in enumerate(found) if c.kind == "terminate"))
    stats["used"] = len(targets)
    x = np.concatenate(blocks) if blocks else np.zeros((0, FEATURES), np.float32)
    return {"x": x, "offsets": np.array(offsets, np.int64), "target": np.array(targets, np.int64),
            "stop": np.array(stops, np.int64)}, stats


def run_trainer(data_path: Path, out: Path, parent: ModelVersion | None, epochs: int, seed: int) -> dict:
    """The torch trainer as a subprocess (training/runs.run_cpu_trainer); its printed summary."""
    arguments = ["--data", str(data_path), "--out", str(out), "--epochs", str(epochs), "--seed", str(seed)]
    if parent is not None and parent.kind == ModelVersion.Kind.COMPACT and parent.artifact:
        arguments += ["--init", parent.artifact]
    return runs.run_cpu_trainer("training.trainer.compact", arguments, what="compact trainer",
                                error=CompactTrainingError, timeout=TRAIN_TIMEOUT_S)


def train_compact(name: str, parent: ModelVersion | None = None, *, sources: dict | None = None,
                  epochs: int = DEFAULT_EPOCHS, seed: int = 0, counterfactual_queries: bool = True,
                  success_judge: str | None = None, false_claims: bool = True) -> ModelVersion:
    """The compact model `name` (made once: asking again returns it). epochs=0 is the untrained head;
    counterfactual_queries=False trains without the samples of counterfactual-derived queries, and
    success_judge on the judged trajectories as that one judge would have routed them (ablations).
    false_claims: the success claims the judges rejected train the head not to stop there
    (training/compact_claims.py), read with the same two settings."""
    existing = ModelVersion.objects.filter(name=name).first()
    if existing is not None:
        if existing.kind != ModelVersion.Kind.COMPACT:
            raise CompactTrainingError(f"a model named {name!r} exists and is not a compact policy")
        return existing
    out = artifact_directory(name)
    out.mkdir(parents=True, exist_ok=True)
    report = {"snapshot": None, "sources": sources or {}, "epochs": epochs}
    if epochs > 0:
        snapshot = create_snapshot(DataSnapshot.Kind.SFT, {"sources": sources or {},
                                                           "counterfactual_queries": counterfactual_queries,
                                                           "success_judge": success_judge},
                                   name=f"{name} training data", background=False)
        if snapshot.status != DataSnapshot.Status.READY:
            raise CompactTrainingError(f"SFT snapshot #{snapshot.pk} is {snapshot.status}: {snapshot.error}")
        arrays, stats = featurize_snapshot(snapshot)
        if not len(arrays["target"]):
            raise CompactTrainingError(f"snapshot #{snapshot.pk} gave no trainable step: {stats['skipped']}")
        report.update(snapshot=snapshot.pk, snapshot_rows=len(snapshot.row_ids),
                      by_source=snapshot.stats.get("by_source", {}), **stats)
        if false_claims:
            negatives, claim_stats = false_claim_arrays(counterfactual_queries, success_judge)
            arrays.update(negatives)
            report["false_claims"] = claim_stats
    else:
        arrays = {"x": np.zeros((0, FEATURES), np.float32), "offsets": np.zeros(1, np.int64),
                  "target": np.zeros(0, np.int64), "stop": np.zeros(0, np.int64)}
    data_path = out / "features.npz"
    np.savez(data_path, **arrays)
    report["trainer"] = run_trainer(data_path, out, parent, epochs, seed)
    (out / "training.json").write_text(json.dumps(report, indent=2))
    try:
        with transaction.atomic():
            return ModelVersion.objects.create(name=name, kind=ModelVersion.Kind.COMPACT, parent=parent,
                                               artifact=str(out))
    except IntegrityError:  # made at the same moment elsewhere: that one stands
        return ModelVersion.objects.get(name=name)


def training_report(model: ModelVersion) -> dict:
    """What train_compact wrote about the model's training (samples, skipped, loss, accuracy)."""
    try:
        return json.loads((Path(model.artifact) / "training.json").read_text())
    except (OSError, ValueError, TypeError):
        return {}


def loop_trainer(loop_round) -> dict:
    """EVOLUTION_TRAINER for loops over a compact model: M(t+1) trained now on a new snapshot of the
    pools; other models go to the SFT trainer (training.round_trainer.train_round)."""
    model = loop_round.model_version
    if model is None or model.kind != ModelVersion.Kind.COMPACT:
        from training.round_trainer import train_round

        return train_round(loop_round)
    name = f"{model.name}+loop{loop_round.loop_id}r{loop_round.number}"[:200]
    try:
        trained = train_compact(name, parent=model)
    except CompactTrainingError as error:
        return {"status": "failed", "detail": str(error)}
    report = training_report(trained)
    return {"status": "done", "model_version": trained,
            "detail": f"{trained} trained on {report.get('used', '?')} steps of snapshot #{report.get('snapshot')}"}
