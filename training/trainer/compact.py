"""Train the compact policy's head (issue #16) on featurised pool-export steps, on CPU in seconds.

    python -m training.trainer.compact --data features.npz --out DIR [--init DIR] [--epochs N] [--seed S]

features.npz (training/compact.py writes it from an SFT snapshot): `x` [candidates, d] float32,
`offsets` [steps + 1] (step i's candidates are x[offsets[i]:offsets[i+1]]), `target` [steps] (the
index, within its step, of the action the pool's sample took), optionally `stop` [steps] (the index of
its terminate candidate, for the premature stop rate in metrics.json), and optionally the rejected
success claims (training/compact_claims.py) as `neg_x`, `neg_offsets`, `neg_target`: the same layout,
the target the claimed terminate. The loss is the listwise softmax cross-entropy of each step's
candidate scores, plus `claim_weight` × the unlikelihood −log(1 − p) of each rejected claim (a batch
of them beside every batch of steps), so a stop is ranked first only where the judges' data allow it.
`--epochs 0` writes the untrained (seeded random) head: round 0 of the flywheel demo. Writes weights.npz, config.json and metrics.json into DIR (the
format flywheel/policies/compact.py reads; numpy at inference, torch only here).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

FORMAT = "compact-ranker-v1"


def build(features: int, hidden: int) -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))


def load_init(model, directory: Path | None, features: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Warm start from the parent's head (M(t) → M(t+1)); its standardisation (mean, std), or None
    when there is no parent or its hidden width differs. A parent trained on fewer features (a head
    from before features were appended) starts the new columns at zero weight, so it still computes
    its own function."""
    if directory is None or not (directory / "weights.npz").exists():
        return None
    with np.load(directory / "weights.npz") as weights:
        w1, mean, std = weights["w1"], weights["mean"], weights["std"]
        if w1.shape[0] > features or w1.shape[1] != model[0].out_features:
            return None
        grown = features - w1.shape[0]
        w1 = np.concatenate([w1, np.zeros((grown, w1.shape[1]), w1.dtype)])
        mean = np.concatenate([mean, np.zeros(grown, mean.dtype)])
        std = np.concatenate([std, np.ones(grown, std.dtype)])
        with torch.no_grad():
            model[0].weight.copy_(torch.from_numpy(w1.T.astype(np.float32)))
            model[0].bias.copy_(torch.from_numpy(weights["b1"].astype(np.float32)))
            model[2].weight.copy_(torch.from_numpy(weights["w2"].T.astype(np.float32)))
            model[2].bias.copy_(torch.from_numpy(weights["b2"].astype(np.float32)))
        return mean.astype(np.float32), std.astype(np.float32)


def restandardise(model, old: tuple[np.ndarray, np.ndarray], new: tuple[np.ndarray, np.ndarray]):
    """Re-express the first layer for the new standardisation so the head computes the same function:
    ((x - m0) / s0) @ W1 + b1 == ((x - m1) / s1) @ W1' + b1' with W1' = W1 * (s1 / s0)[:, None] and
    b1' = b1 + ((m1 - m0) / s0) @ W1 (W1 shaped [features, hidden], as weights.npz stores it)."""
    (m0, s0), (m1, s1) = (np.asarray(a, np.float64) for a in old), (np.asarray(a, np.float64) for a in new)
    with torch.no_grad():
        w1 = model[0].weight.numpy().T.astype(np.float64)
        b1 = model[0].bias.numpy().astype(np.float64)
        model[0].weight.copy_(torch.from_numpy((w1 * (s1 / s0)[:, None]).T.astype(np.float32)))
        model[0].bias.copy_(torch.from_numpy((b1 + ((m1 - m0) / s0) @ w1).astype(np.float32)))


def padded_index(offsets: np.ndarray) -> torch.Tensor:
    """Each step's candidate rows as one padded row of indices into x (-1 = padding), so a batch's
    listwise softmax is one call."""
    starts, ends = offsets[:-1], offsets[1:]
    width = int((ends - starts).max()) if len(starts) else 0
    index = np.full((len(starts), width), -1, dtype=np.int64)
    for i, (s, e) in enumerate(zip(starts, ends)):
        index[i, :e - s] = np.arange(s, e)
    return torch.from_numpy(index)


def unlikelihood(scores: torch.Tensor, rejected: torch.Tensor) -> torch.Tensor:
    """Mean −log(1 − p) of each row's rejected candidate under the row's softmax (padding at -inf):
    log(1 − p) = logsumexp(the other candidates) − logsumexp(all), finite even where p → 1."""
    others = scores.scatter(1, rejected[:, None], float("-inf"))
    kept = torch.logsumexp(others, dim=1) - torch.logsumexp(scores, dim=1)
    return -kept.clamp(min=-30.0).mean()


def train(x: np.ndarray, offsets: np.ndarray, target: np.ndarray, *, hidden: int = 64, epochs: int = 60,
          lr: float = 3e-3, weight_decay: float = 1e-4, seed: int = 0, init: Path | None = None,
          batch_steps: int = 64, stop: np.ndarray | None = None, negatives: dict | None = None,
          claim_weight: float = 1.0) -> tuple[dict, list]:
    """`stop`: each step's terminate candidate (its index within the step), for the premature stop
    rate: the share of steps not ending in terminate where the head ranks terminate first.
    `negatives`: {neg_x, neg_offsets, neg_target} (rejected success claims), weighted by `claim_weight`;
    metrics give the share of them the trained head still ranks first (train_false_claim)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    features = x.shape[1]
    model = build(features, hidden)
    inherited = load_init(model, init, features)
    # Every training standardises by its own data, the rejected claims' screens included (a parent's
    # 0/1 from an untrained round 0 would otherwise be inherited by every round); a warm start is
    # re-expressed in the new terms.
    if len(target):
        seen = x if negatives is None or not len(negatives["neg_target"]) else np.concatenate([x, negatives["neg_x"]])
        mean, std = seen.mean(axis=0).astype(np.float32), (seen.std(axis=0) + 1e-3).astype(np.float32)
        if inherited is not None:
            restandardise(model, inherited, (mean, std))
    elif inherited is not None:
        mean, std = inherited
    else:
        mean, std = np.zeros(features, np.float32), np.ones(features, np.float32)
    xs = torch.from_numpy(((x - mean) / std).astype(np.float32))
    starts, ends = offsets[:-1], offsets[1:]
    index, labels = padded_index(offsets), torch.from_numpy(target.astype(np.int64))
    claims = len(negatives["neg_target"]) if negatives is not None and len(target) else 0
    if claims:
        neg_xs = torch.from_numpy(((negatives["neg_x"] - mean) / std).astype(np.float32))
        neg_index = padded_index(negatives["neg_offsets"])
        neg_labels = torch.from_numpy(negatives["neg_target"].astype(np.int64))
        neg_order = torch.from_numpy(rng.permutation(claims))
    curve, drawn = [], 0
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    for epoch in range(epochs):
        order, total = torch.from_numpy(rng.permutation(len(target))), 0.0
        for first in range(0, len(order), batch_steps):
            chosen = order[first:first + batch_steps]
            rows = index[chosen]
            scores = model(xs[rows.clamp(min=0)]).squeeze(-1).masked_fill(rows < 0, float("-inf"))
            loss = torch.nn.functional.cross_entropy(scores, labels[chosen])
            if claims:   # the claims cycle in a fixed shuffled order, one batch beside each batch of steps
                picked = neg_order[torch.arange(drawn, drawn + min(batch_steps, claims)) % claims]
                drawn += len(picked)
                neg_rows = neg_index[picked]
                neg_scores = model(neg_xs[neg_rows.clamp(min=0)]).squeeze(-1).masked_fill(neg_rows < 0, float("-inf"))
                loss = loss + claim_weight * unlikelihood(neg_scores, neg_labels[picked])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(chosen)
        curve.append({"epoch": epoch + 1, "loss": round(total / max(1, len(target)), 5)})
    with torch.no_grad():
        weights = {"mean": mean.astype(np.float32), "std": std.astype(np.float32),
                   "w1": model[0].weight.numpy().T.copy(), "b1": model[0].bias.numpy().copy(),
                   "w2": model[2].weight.numpy().T.copy(), "b2": model[2].bias.numpy().copy()}
        accuracy = premature = None
        if len(target):
            scores = model(xs).squeeze(-1).numpy()
            best = np.array([int(np.argmax(scores[s:e])) for s, e in zip(starts, ends)])
            accuracy = round(float(np.mean(best == target)), 4)
            going_on = stop is not None and target != stop
            if stop is not None and going_on.any():
                premature = round(float(np.mean(best[going_on] == stop[going_on])), 4)
        false_claim = None
        if claims:
            neg_scores = model(neg_xs).squeeze(-1).numpy()
            neg_offsets = negatives["neg_offsets"]
            still = [int(np.argmax(neg_scores[s:e])) == t
                     for s, e, t in zip(neg_offsets[:-1], neg_offsets[1:], negatives["neg_target"])]
            false_claim = round(float(np.mean(still)), 4)
    return weights, [*curve, {"train_accuracy": accuracy, "train_premature_stop": premature,
                              "false_claims": claims, "train_false_claim": false_claim}]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--init", default="")
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--claim-weight", type=float, default=1.0)
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    with np.load(args.data) as data:
        x, offsets, target = data["x"], data["offsets"], data["target"]
        stop = data["stop"] if "stop" in data else None
        negatives = {name: data[name] for name in ("neg_x", "neg_offsets", "neg_target")} if "neg_x" in data else None
    started = time.perf_counter()
    weights, curve = train(x, offsets, target, hidden=args.hidden, epochs=args.epochs, seed=args.seed,
                           init=Path(args.init) if args.init else None, stop=stop, negatives=negatives,
                           claim_weight=args.claim_weight)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "weights.npz", **weights)
    (out / "config.json").write_text(json.dumps({"format": FORMAT, "features": int(x.shape[1]),
                                                 "hidden": args.hidden, "epochs": args.epochs, "seed": args.seed,
                                                 "claim_weight": args.claim_weight,
                                                 "steps": int(len(target)), "candidates": int(len(x))}, indent=2))
    metrics = {"seconds": round(time.perf_counter() - started, 2), "curve": curve[:-1], **curve[-1]}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    print(json.dumps({"steps": int(len(target)), **{k: v for k, v in metrics.items() if k != "curve"}}))


if __name__ == "__main__":
    main()
