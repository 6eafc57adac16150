"""The compact policy: a small trained head that ranks a screen's candidate actions (issue #16).

It acts through the same interface and protocol as every policy: it reads the goal, the full text
history and the current UI hierarchy (never a known path), scores each candidate of
compact_features.featurize with its MLP, writes the five tags from templates, and its output text
goes through protocol.parse_output like any model's. Inference is numpy (the web app has no
torch); the weights are written by training/trainer/compact.py:

    <artifact>/weights.npz   mean, std (feature standardisation), w1, b1, w2, b2
    <artifact>/config.json   {"format": "compact-ranker-v1", "features": d, "hidden": h, ...}
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np

from flywheel.policies.base import PolicyError, PolicyState, Proposal
from flywheel.policies.compact_features import SCALARS, V1_SCALARS, Candidate, featurize
from flywheel.policies.protocol import (
    DEFAULT_COORDS,
    ProtocolError,
    describe_action,
    format_output,
    history_text,
    parse_output,
)
from flywheel.screens.ocr_candidates import PixelCandidates, pixel_candidates

FORMAT = "compact-ranker-v1"
_heads: dict[str, CompactHead] = {}
_lock = threading.Lock()


class CompactHead:
    """The trained MLP: standardised features → ReLU hidden layer → one score per candidate."""

    def __init__(self, directory: Path):
        config_path, weights_path = directory / "config.json", directory / "weights.npz"
        if not config_path.exists() or not weights_path.exists():
            raise PolicyError(f"compact model files are missing in {directory} (config.json, weights.npz)")
        self.config = json.loads(config_path.read_text())
        if self.config.get("format") != FORMAT:
            raise PolicyError(f"{directory}: not a {FORMAT} model ({self.config.get('format')!r})")
        with np.load(weights_path) as weights:
            self.w = {name: weights[name].astype(np.float32) for name in ("mean", "std", "w1", "b1", "w2", "b2")}
        # A head reads the first `features` columns: one trained before columns were appended still
        # scores what it learned; one from newer code than this refuses rather than guess.
        self.features = int(self.config.get("features") or self.w["w1"].shape[0])
        if not V1_SCALARS <= self.features <= SCALARS or self.w["w1"].shape[0] != self.features:
            raise PolicyError(f"{directory}: the head reads {self.features} features (weights for "
                              f"{self.w['w1'].shape[0]}); this code computes {SCALARS} — retrain it")

    def knows(self, candidate: Candidate) -> bool:
        """Whether the head was trained with this kind of candidate (call_user came with the stop evidence)."""
        return candidate.kind != "call_user" or self.features > V1_SCALARS

    def scores(self, features: np.ndarray) -> np.ndarray:
        w = self.w
        x = (features[:, :self.features] - w["mean"]) / w["std"]
        hidden = np.maximum(x @ w["w1"] + w["b1"], 0)
        return (hidden @ w["w2"] + w["b2"]).reshape(-1)


def load_head(artifact: str) -> CompactHead:
    """The head of an artifact directory, loaded once per process (a new round is a new directory)."""
    with _lock:
        if artifact not in _heads:
            _heads[artifact] = CompactHead(Path(artifact))
        return _heads[artifact]


def reasoning(state: PolicyState, chosen: Candidate, candidates: list[Candidate], repeated: bool,
              pixels: PixelCandidates | None = None) -> dict:
    """The five tags from templates: what is on screen, whether the last step stalled, the plan."""
    package = (state.foreground or {}).get("package") or "the current app"
    labels = [c.label for c in candidates if c.kind == "tap" and c.label][:4]
    shown = ", ".join(f"\"{label}\"" for label in labels) or "no labelled elements"
    seen = ""
    if pixels is not None and pixels.nodes:
        seen = " The UI dump is blind; its words were read from the screenshot."
    elif pixels is not None and pixels.why_none():
        seen = f" {pixels.why_none()[:1].upper()}{pixels.why_none()[1:]}."
    return {
        "Observation": f"{package} is in front; the screen offers {shown}.{seen}",
        "Reflection": "The last action left the screen unchanged; trying something else." if repeated else "",
        "Plan": f"Work toward the goal: {state.goal}",
        "Decision": describe_action(chosen.action, chosen.label or chosen.span or chosen.app or None),
        "Memory": "",
    }


class CompactPolicy:
    """Greedy over the head's scores (temperature 0), else a sample of their softmax at that
    temperature (RL rollouts); the chosen candidate's softmax share is the confidence."""

    def __init__(self, artifact: str, name: str = "compact", temperature: float = 0.0, seed: int | None = None):
        self.artifact, self.name, self.temperature = artifact, name, max(0.0, float(temperature))
        self.rng = np.random.default_rng(seed)  # seed None: each rollout of a group draws its own

    def propose(self, state: PolicyState) -> Proposal:
        head = load_head(self.artifact)
        history = history_text(state.history) if state.history else ""
        package = (state.foreground or {}).get("package", "")
        # On a blind page (web view, canvas) the lines OCR reads are candidates too, tapped at their center.
        pixels = pixel_candidates(state.hierarchy_xml, state.screenshots[-1] if state.screenshots else None,
                                  state.screen_size)
        candidates, features = featurize(state.goal, history, state.hierarchy_xml, state.screen_size,
                                         list(state.apps or []), package, extra_nodes=pixels.nodes,
                                         app_labels=dict(state.app_labels or {}))
        known = [i for i, c in enumerate(candidates) if head.knows(c)]
        candidates, features = [candidates[i] for i in known], features[known]
        scores = head.scores(features)
        shares = np.exp(scores - scores.max())
        shares /= shares.sum()
        if self.temperature > 0:
            tempered = np.exp((scores - scores.max()) / self.temperature)
            best = int(self.rng.choice(len(scores), p=tempered / tempered.sum()))
        else:
            best = int(np.argmax(scores))
        confidence = float(shares[best])
        repeated = len(state.history) >= 2 and state.history[-1].action == state.history[-2].action
        chosen = candidates[best]
        text = format_output(reasoning(state, chosen, candidates, repeated, pixels), chosen.action)
        model_io = {"policy": self.name, "artifact": self.artifact, "output": text, "temperature": self.temperature,
                    "pixels": {"outcome": pixels.outcome.value, "nodes": len(pixels.nodes), "detail": pixels.detail},
                    "candidates": len(candidates), "top": [
                        {"action": candidates[i].action, "label": candidates[i].label[:60], "score": round(float(scores[i]), 3)}
                        for i in np.argsort(-scores)[:3]]}
        try:
            parsed = parse_output(text, screen=state.screen_size, default_coords=DEFAULT_COORDS)
        except ProtocolError as error:
            raise PolicyError(f"compact policy output does not parse: {error}", model_io=model_io) from None
        return Proposal(cot=parsed.cot, action=parsed.action, confidence=round(confidence, 3),
                        model_io=model_io, policy=self.name)
