"""One agentic-RL update of the policy (report §3.3.3, eq. 6) over an RL run's rollouts:
`python -m training.trainer.rl --config config.json` (also under torchrun).

rollouts.jsonl holds one row per step of a rollout: the prompt the policy saw (system prompt, goal,
history, screenshots), the response it gave, the step's advantage A_{i,t} (eq. 5, computed on the
web side), its group (the query), T_i and G. The update:

1. old log-probs of every response under the policy before the update (π_θ_old; no gradient) and
   reference log-probs under the SFT model (π_ref, for the KL term);
2. ppo_epochs optimizer steps, each over all rows: maximise
       J = mean over groups of (1/G) Σ_i (1/T_i) Σ_t min(ρ A, clip(ρ, 1 − ε, 1 + ε) A)  −  kl_coef · KL
   with KL(π_θ ‖ π_ref) by the k3 estimator per token, averaged over the step's tokens and weighed
   like the objective. training/rules/objective.py holds the same formulas on plain numbers.

π_old is checked against the sampler: a rollout row that carries the log-probabilities its server
returned for exactly the tokens trained on ("sampled") is compared with π_old's on the same tokens;
the mean absolute gap of the per-row sums, per token, goes into the metrics (pi_old_sampling_gap)
and pi_old_mismatch says it is above pi_old_tolerance (other weights, another processor, another
prompt): a warning, the update goes on. A server reports log-probs either at its sampling temperature
(the built-in server, vLLM V0) or raw, at temperature 1 (vLLM V1): the closer of the two is taken.

Each row is one turn (a step with its fixed-window history); "batching" chooses which turns share a
micro-batch: "trajectory" (the default: file order, a trajectory's turns together) or "turn"
(Xiaomi-GUI-0 §4.4: the same turn of several trajectories, after checking that every turn carries
its trajectory's advantage; training/trainer/turns.py). rl_steps.jsonl keeps each row's trajectory
id, turn index and micro-batch.

The update is one unit: a run killed or cancelled part-way leaves the base model as it was and is
simply run again (no mid-update checkpoint; status "cancelled" names none).
"""
from __future__ import annotations

import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

from training.trainer import data as samples_io
from training.trainer import efficiency
from training.trainer.sft import autocast, freeze, make_engine
from training.trainer.state import (
    CancelWatch,
    Distributed,
    TrainerError,
    append_metrics,
    run_main,
    seed_everything,
    write_status,
)
from training.trainer.tiny import load_model, save_artifact
from training.trainer.turns import BATCHINGS, TurnError, batch_order

DEFAULTS = {"learning_rate": 1e-6, "micro_batch_size": 1, "max_seq_len": 12288, "freeze_vision": True,
            "freeze_projector": True, "seed": 0, "deepspeed": "", "image_max_pixels": 200704,
            "clip_epsilon": 0.2, "kl_coef": 0.04, "ppo_epochs": 1, "importance_ratio": "sequence",
            "batching": "trajectory",
            # bf16 forward passes on two machines differ by a few hundredths of a nat per token; fp32 by far less
            "pi_old_tolerance": 0.05, **efficiency.DEFAULTS}


class Cancelled(Exception):
    pass


def step_terms(logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor,
               advantage: torch.Tensor, epsilon: float, importance: str = "sequence") -> dict:
    """Per row (a rollout step): the mean log-ratio, the clipped term of eq. 6, the mean k3 KL, the
    share of the row the clip holds. All inputs are [rows, tokens] except advantage [rows].

    importance "sequence" (the default, GSPO): ρ = exp(mean over the response's tokens of
    log π_θ − log π_old), clipped once. Eq. 6's ρ_{i,t} belongs to a whole step (one response of many
    tokens); the product of hundreds of token ratios explodes or vanishes, while their geometric mean
    stays near 1, so ε keeps meaning "at most ε away from the sampling policy" for a step of any length.
    importance "token" (GRPO): each token's ratio clipped on its own, the terms averaged over the
    response. training/rules/objective.step_term is the same on plain numbers.
    """
    mask = mask.to(logp.dtype)
    tokens = mask.sum(-1).clamp(min=1)
    token_log_ratio = (logp - old_logp) * mask
    log_ratio = token_log_ratio.sum(-1) / tokens
    if importance == "token":
        ratio, advantage_t = torch.exp(token_log_ratio), advantage.unsqueeze(-1)
        token_term = torch.minimum(ratio * advantage_t, ratio.clamp(1 - epsilon, 1 + epsilon) * advantage_t)
        term = (token_term * mask).sum(-1) / tokens
        held = ((advantage_t > 0) & (ratio > 1 + epsilon)) | ((advantage_t < 0) & (ratio < 1 - epsilon))
        clipped = (held.to(mask.dtype) * mask).sum(-1) / tokens
    elif importance == "sequence":
        ratio = torch.exp(log_ratio)
        term = torch.minimum(ratio * advantage, ratio.clamp(1 - epsilon, 1 + epsilon) * advantage)
        clipped = (((advantage > 0) & (ratio > 1 + epsilon)) | ((advantage < 0) & (ratio < 1 - epsilon))).to(mask.dtype)
    else:
        raise TrainerError(f"importance_ratio must be sequence or token, not {importance!r}")
    delta = (ref_logp - logp) * mask
    kl = ((torch.exp(delta) - delta - 1) * mask).sum(-1) / tokens   # k3: exp(d) − d − 1 ≥ 0, d = ref − logp
    return {"log_ratio": log_ratio, "term": term, "kl": kl, "clipped": clipped}


def step_weights(records: list[dict]) -> list[float]:
    """Eq. 6's weight of each row: 1 / (groups · G · T_i), so each group (task) counts the same, each
    trajectory the same within its group and each step the same within its trajectory."""
    groups = {record["group"] for record in records}
    weights = []
    for number, record in enumerate(records):
        size, steps = int(record.get("group_size") or 0), int(record.get("steps_in_trajectory") or 0)
        if size < 1 or steps < 1:
            raise TrainerError(f"rollout row {number} has group_size={size}, steps_in_trajectory={steps}")
        weights.append(1.0 / (len(groups) * size * steps))
    return weights


def settings(config: dict) -> dict:
    merged = {**DEFAULTS, **{key: value for key, value in config.items() if value is not None}}
    for key in ("output_dir", "model", "rollouts"):
        if not merged.get(key):
            raise TrainerError(f"the config has no {key!r}")
    merged.setdefault("reference", merged["model"])
    if merged["importance_ratio"] not in ("sequence", "token"):
        raise TrainerError(f"importance_ratio must be sequence (GSPO) or token (GRPO), not {merged['importance_ratio']!r}")
    if merged["batching"] not in BATCHINGS:
        raise TrainerError(f"batching must be one of {', '.join(BATCHINGS)}, not {merged['batching']!r}")
    return merged


def align(values: list[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    """Per-row token values (1-D, in order) placed at the row's labelled columns of a [rows, positions] batch."""
    aligned = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    for row, row_values in enumerate(values):
        aligned[row, mask[row]] = row_values.to(mask.device)
    return aligned


@torch.no_grad()
def sequence_logprobs(model, samples: list, processor, device, screenshots=None, vision=None) -> list[torch.Tensor]:
    """Token log-probs of each sample's response under `model`, one 1-D CPU tensor per sample; `vision`:
    the model's own cache of frozen visual tokens."""
    results = []
    for sample in samples:
        batch = samples_io.collate([samples_io.encode(sample, processor, screenshots)], processor.tokenizer.pad_token_id)
        with autocast(device):
            logp, mask = samples_io.response_logprobs(model, efficiency.model_batch(model, batch, device, vision))
        results.append(logp[0][mask[0]].float().cpu())
    return results


def sampled_tokens(record: dict, response_ids: list[int], tokenizer) -> tuple[float, float] | None:
    """(the sampler's temperature, the sum of its log-probs) when the row carries the sampler's log-probs
    of exactly these tokens, drawn from the whole distribution (top_p 1, no top_k: a truncated one is
    not the policy's); else None."""
    sampled = record.get("sampled")
    if not isinstance(sampled, dict):
        return None
    tokens, logprobs = sampled.get("tokens"), sampled.get("logprobs")
    try:
        temperature = float(sampled.get("temperature") or 0.0)
        plain = float(sampled.get("top_p") or 1.0) >= 1.0 and int(sampled.get("top_k") or 0) <= 0
        total = math.fsum(float(value) for value in logprobs)
    except (TypeError, ValueError):
        return None
    if not plain or not isinstance(tokens, list) or not tokens or len(tokens) != len(response_ids) or not math.isfinite(total):
        return None
    if len(logprobs) != len(tokens) or [tokenizer.decode([token]) for token in response_ids] != tokens:
        return None
    return (temperature if temperature > 0 else 1.0), total   # greedy: the scores are the raw distribution


@torch.no_grad()
def old_logprobs(model, samples: list, processor, device,
                 screenshots=None, vision=None) -> tuple[list[torch.Tensor], list[dict | None]]:
    """sequence_logprobs (π_old), and for each sample whose row carries the sampler's log-probs of the
    same tokens, its absolute gap to π_old's sum at temperature 1 ("raw") and at the sampler's ("sampling")."""
    tokenizer = processor.tokenizer
    results, checks = [], []
    for sample in samples:
        encoded = samples_io.encode(sample, processor, screenshots)
        ids = encoded["labels"][encoded["labels"] != samples_io.IGNORE_INDEX].tolist()
        sampled = sampled_tokens(sample.record, ids, tokenizer)
        temperatures = (1.0,) if sampled is None or sampled[0] == 1.0 else (1.0, sampled[0])
        batch = samples_io.collate([encoded], tokenizer.pad_token_id)
        with autocast(device):
            picked, mask = samples_io.response_logprobs_at(model, efficiency.model_batch(model, batch, device, vision),
                                                           temperatures)
        logp = picked[0][0][mask[0]].float().cpu()
        results.append(logp)
        if sampled is None:
            checks.append(None)
            continue
        at_sampling = float(picked[-1][0][mask[0]].float().sum())
        checks.append({"tokens": len(ids), "raw": abs(sampled[1] - float(logp.sum())),
                       "sampling": abs(sampled[1] - at_sampling)})
    return results, checks


def pi_old_check(checks: list[dict], tolerance: float, dist) -> dict:
    """The metrics of the π_old check over every rank's compared rows (see the module's docstring)."""
    compared = int(dist.sum(len(checks)))
    if not compared:
        return {"pi_old_compared": 0}
    tokens = dist.sum(sum(check["tokens"] for check in checks))
    gaps = {at: dist.sum(math.fsum(check[at] for check in checks)) / tokens for at in ("sampling", "raw")}
    at = min(gaps, key=gaps.get)
    return {"pi_old_compared": compared, "pi_old_sampling_gap": round(gaps[at], 6), "pi_old_logprobs_at": at,
            "pi_old_tolerance": tolerance, "pi_old_mismatch": gaps[at] > tolerance}


def train(config: dict) -> int:
    config = settings(config)
    dist = Distributed()
    output_dir, seed = Path(config["output_dir"]), int(config["seed"])
    watch = CancelWatch(output_dir)
    seed_everything(seed)
    if dist.main:
        write_status(output_dir, "running", step=0, total_steps=int(config["ppo_epochs"]), error="", stage="rl",
                     world_size=dist.world_size, checkpoint="")
        for name in ("metrics.jsonl", "rl_steps.jsonl"):   # a rerun redoes the whole update
            (output_dir / name).unlink(missing_ok=True)
    if config.get("packing"):
        raise TrainerError("the RL update scores its rows one by one: leave packing off (it packs SFT and CPT)")
    policy, processor = load_model(config["model"], config["image_max_pixels"], seed=seed)
    reference, _ = load_model(config["reference"], config["image_max_pixels"], seed=seed)
    samples, skipped = samples_io.load_samples(Path(config["rollouts"]), processor, int(config["max_seq_len"]),
                                               empty="the rollouts file has no rows")
    records = [sample.record for sample in samples]
    weights = step_weights(records)
    advantages = [float(record["advantage"]) for record in records]
    try:
        order = batch_order(records, config["batching"])
    except TurnError as error:
        raise TrainerError(str(error)) from None
    counts = freeze(policy, bool(config["freeze_vision"]), bool(config["freeze_projector"]))
    counts.update(efficiency.configure_model(policy, config, dist.device))
    efficiency.configure_model(reference, {**config, "gradient_checkpointing": False}, dist.device)
    reference.requires_grad_(False)
    reference.to(dist.device).eval()
    sharded = config.get("sharding", "none") == "fsdp"
    if sharded and dist.enabled:
        from training.trainer.sharding import shard_model

        shard_model(reference, dist.device)
    policy.to(dist.device)
    mine = samples_io.shard(order, dist.rank, dist.world_size)
    micro = int(config["micro_batch_size"])
    chunks = samples_io.micro_batches(mine, micro)
    per_rank = -(-len(samples) // dist.world_size)
    accumulation = -(-per_rank // micro)
    chunks += [None] * (accumulation - len(chunks))   # every rank runs the same number of micro steps
    epochs = int(config["ppo_epochs"])
    constant = {**config, "warmup_ratio": 0.0, "min_learning_rate": config["learning_rate"]}
    engine = make_engine(policy, dist, constant, epochs, accumulation)
    policy.eval()   # π_old: the policy as it sampled (no dropout either way in Qwen2.5-VL)
    needed = mine or [0]   # a rank without rows still runs its (weight 0) micro steps on row 0
    if sharded:   # a sharded forward is collective: every rank scores as many rows (stand-ins repeat its first)
        needed = needed + [needed[0]] * (per_rank - len(needed))
    own = [samples[p] for p in needed]
    screenshots = samples_io.ScreenshotCache()   # each screenshot preprocessed once for all three passes
    # The policy's frozen visual tokens serve π_old and the update; the reference has its own tower.
    vision, reference_vision = efficiency.vision_cache(config), efficiency.vision_cache(config)
    old_values, checks = old_logprobs(policy, own, processor, dist.device, screenshots, vision)
    old = dict(zip(needed, old_values))
    ref = dict(zip(needed, sequence_logprobs(reference, own, processor, dist.device, screenshots, reference_vision)))
    del reference_vision
    # the rank's own rows only: not a stand-in (row 0 of a rank without rows, or a repeat for sharding)
    check = pi_old_check([checks[n] for n in range(len(mine)) if checks[n] is not None],
                         float(config["pi_old_tolerance"]), dist)
    if dist.main:
        if check.get("pi_old_mismatch"):
            print(f"warning: the sampler's log-probs differ from π_old by {check['pi_old_sampling_gap']:.4f} "
                  f"per token on average (tolerance {check['pi_old_tolerance']}) over {check['pi_old_compared']} "
                  "rows: the rollouts may not come from the policy being updated", file=sys.stderr)
        write_status(output_dir, "running", samples=len(samples), skipped=skipped, **counts)
    policy.train()
    epsilon, kl_coef, importance = float(config["clip_epsilon"]), float(config["kl_coef"]), config["importance_ratio"]
    started, pad_id = time.time(), processor.tokenizer.pad_token_id
    try:
        for epoch in range(1, epochs + 1):
            sums, rows, pending = defaultdict(float), [], []
            for index, chunk in enumerate(chunks):
                if (index == 0 or not dist.enabled) and dist.any(watch.requested()):
                    raise Cancelled
                positions = chunk or needed[:1]
                batch = samples_io.collate([samples_io.encode(samples[p], processor, screenshots) for p in positions],
                                           pad_id)
                if chunk:   # what right-padding the micro-batch to its longest turn costs (read on the CPU)
                    sums["positions"] += batch["attention_mask"].numel()
                    sums["padding"] += batch["attention_mask"].numel() - int(batch["attention_mask"].sum())
                    sums["micro_batches"] += 1
                    sums["trajectories"] += len({records[p].get("trajectory") for p in positions})
                with engine.micro_step(last=index == len(chunks) - 1), autocast(dist.device):
                    batch = efficiency.model_batch(engine.model, batch, dist.device, vision)
                    logp, mask = samples_io.response_logprobs(engine.model, batch)
                    old_logp, ref_logp = align([old[p] for p in positions], mask), align([ref[p] for p in positions], mask)
                    terms = step_terms(logp.float(), old_logp, ref_logp, mask,
                                       torch.tensor([advantages[p] for p in positions], device=dist.device), epsilon,
                                       importance)
                    weight = torch.tensor([weights[p] for p in positions], device=dist.device) * (1.0 if chunk else 0.0)
                    objective, kl = (weight * terms["term"]).sum(), (weight * terms["kl"]).sum()
                    # DDP averages gradients over ranks; the weights already sum to 1 over all rows.
                    engine.backward(-(objective - kl_coef * kl) * dist.world_size)
                if chunk:   # kept on the device; read once after the epoch's last micro step
                    pending.append((index, positions, objective.detach(), kl.detach(), terms["clipped"].detach(),
                                    terms["log_ratio"].detach(), terms["kl"].detach(), mask.sum(dim=-1)))
            for index, positions, objective, kl, clipped, log_ratio, row_kl, tokens in pending:
                sums["objective"] += float(objective)
                sums["kl"] += float(kl)
                sums["clipped"] += float(clipped.float().sum())
                sums["advantage"] += sum(advantages[p] for p in positions)
                for row, p in enumerate(positions):
                    rows.append({"epoch": epoch, "row": samples[p].position, "group": records[p]["group"],
                                 "trajectory": records[p].get("trajectory"), "step": records[p].get("step"),
                                 "turn": records[p].get("turn"), "micro_batch": index,
                                 "advantage": advantages[p], "weight": weights[p],
                                 "log_ratio": float(log_ratio[row]), "kl": float(row_kl[row]),
                                 "tokens": int(tokens[row])})
            lr = engine.lr()
            grad_norm = engine.step()
            totals = {key: dist.sum(sums[key]) for key in ("objective", "kl", "clipped", "advantage", "padding",
                                                           "positions", "micro_batches", "trajectories")}
            _write_rows(output_dir, rows, dist)
            if dist.main:
                append_metrics(output_dir, {
                    "step": epoch, "epoch": epoch, "loss": -(totals["objective"] - kl_coef * totals["kl"]),
                    "objective": totals["objective"], "kl": totals["kl"], "lr": lr, "grad_norm": grad_norm,
                    "clip_fraction": totals["clipped"] / len(samples), "mean_advantage": totals["advantage"] / len(samples),
                    "batching": config["batching"], "pad_fraction": round(totals["padding"] / totals["positions"], 6),
                    "trajectories_per_micro_batch": round(totals["trajectories"] / totals["micro_batches"], 4),
                    "total_steps": epochs, "time_s": round(time.time() - started, 3), **check})
                write_status(output_dir, "running", step=epoch)
    except Cancelled:
        if dist.main:
            write_status(output_dir, "cancelled", checkpoint="")
            watch.consume()
        dist.close()
        return 0
    weights_state = engine.full_state_dict()
    if dist.main:
        final = save_artifact(engine.model, processor, output_dir / "final", weights_state)
        (final / "training_run.json").write_text(json.dumps(
            {"stage": "rl", "ppo_epochs": epochs, "rows": len(samples), "skipped": skipped,
             "groups": len({record["group"] for record in records}),
             "config": {key: config[key] for key in DEFAULTS}}, indent=2, sort_keys=True))
        write_status(output_dir, "done", step=epochs, checkpoint=str(final), final=str(final))
    dist.barrier()
    dist.close()
    return 0


def _write_rows(output_dir: Path, rows: list[dict], dist: Distributed) -> None:
    """rl_steps.jsonl: each row's log-ratio, KL, advantage and weight per optimizer step (rank by rank)."""
    for rank in range(dist.world_size):
        if rank == dist.rank and rows:
            with open(output_dir / "rl_steps.jsonl", "a", encoding="utf-8") as handle:
                handle.writelines(json.dumps(row, sort_keys=True) + "\n" for row in rows)
        dist.barrier()


def main(argv=None) -> int:
    return run_main(lambda config: config["output_dir"], train, argv)


if __name__ == "__main__":
    sys.exit(main())
