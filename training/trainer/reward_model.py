"""Train the step reward model's head (issue #39) on featurised judged steps, on CPU in seconds.

    python -m training.trainer.reward_model --data features.npz --out DIR [--epochs N] [--hidden H] [--seed S]

features.npz (training/reward_model.py writes it from the database): `x` [steps, d] float32 (the
training split only), `y` [steps] (1: the step was right, 0: wrong). A small MLP gives one logit
per step; the loss is binary cross-entropy with the classes weighted to count alike (the pools hold
many more right steps than located errors). Writes weights.npz (mean, std, w1, b1, w2, b2) and
config.json into DIR, the format training/reward_model.py reads with numpy; prints a summary line.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

FORMAT = "step-reward-v1"


def train(x: np.ndarray, y: np.ndarray, *, hidden: int = 32, epochs: int = 300, lr: float = 3e-3,
          weight_decay: float = 1e-3, seed: int = 0) -> tuple[dict, dict]:
    """(weights, summary). Full-batch AdamW: a few thousand rows fit in one batch."""
    torch.manual_seed(seed)
    features = x.shape[1]
    model = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))
    mean = x.mean(axis=0).astype(np.float32) if len(y) else np.zeros(features, np.float32)
    std = (x.std(axis=0) + 1e-3).astype(np.float32) if len(y) else np.ones(features, np.float32)
    xs = torch.from_numpy(((x - mean) / std).astype(np.float32))
    ys = torch.from_numpy(y.astype(np.float32))
    right, wrong = int(y.sum()), int(len(y) - y.sum())
    # Each class weighs as much as the other in the loss; a class with no row leaves the weight at 1.
    pos_weight = torch.tensor([wrong / right if right and wrong else 1.0])
    loss_of = torch.nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    curve = []
    for epoch in range(epochs if len(y) else 0):
        loss = loss_of(model(xs).squeeze(-1), ys)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if epoch % 25 == 0 or epoch == epochs - 1:
            curve.append({"epoch": epoch + 1, "loss": round(loss.item(), 5)})
    with torch.no_grad():
        weights = {"mean": mean, "std": std,
                   "w1": model[0].weight.numpy().T.copy(), "b1": model[0].bias.numpy().copy(),
                   "w2": model[2].weight.numpy().T.copy(), "b2": model[2].bias.numpy().copy()}
        accuracy = None
        if len(y):
            predicted = (model(xs).squeeze(-1) > 0).numpy()
            accuracy = round(float(np.mean(predicted == (y > 0.5))), 4)
    return weights, {"curve": curve, "train_accuracy": accuracy, "right": right, "wrong": wrong}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    with np.load(args.data) as data:
        x, y = data["x"], data["y"]
    started = time.perf_counter()
    weights, summary = train(x, y, hidden=args.hidden, epochs=args.epochs, seed=args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "weights.npz", **weights)
    (out / "config.json").write_text(json.dumps({"format": FORMAT, "features": int(x.shape[1]), "hidden": args.hidden,
                                                 "epochs": args.epochs, "seed": args.seed, "steps": int(len(y))},
                                                indent=2))
    print(json.dumps({"steps": int(len(y)), "seconds": round(time.perf_counter() - started, 2), **summary}))


if __name__ == "__main__":
    main()
