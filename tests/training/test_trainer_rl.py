"""The RL trainer (training/trainer/rl.py): one GRPO update of the tiny Qwen2.5-VL over rollouts.jsonl
rows (two groups of 2 and 3 trajectories). Its torch pieces are the pure formulas of
training/rules/objective.py; the update raises the log-probability of the responses with a positive
advantage and lowers those with a negative one; the KL to the reference starts at 0."""
import json
import random
import time
from collections import defaultdict
from pathlib import Path

import pytest
import torch

from flywheel.policies.protocol import format_output
from tests.conftest import BIN
from tests.training.test_trainer_sft import run_torchrun, step_sample
from training.rules.objective import clipped_term, grpo_objective, kl_k3, step_term
from training.trainer import data as samples_io
from training.trainer.rl import main as rl_main
from training.trainer.rl import sequence_logprobs, step_terms, step_weights
from training.trainer.state import read_metrics, read_status
from training.trainer.tiny import build_tiny, load_model

pytestmark = pytest.mark.usefixtures("torch")  # trains with torch: the slow tier

# (group, trajectory, steps, advantage per step): eq. 5's shape — the group-normalised trajectory
# reward (zero mean over a group's trajectories) plus a step term with zero mean within a trajectory,
# so that Σ_i (1/T_i) Σ_t A_{i,t} = 0 in each group.
TRAJECTORIES = [(1, 11, 2, [1.2, 0.8]), (1, 12, 1, [-1.0]),
                (2, 21, 1, [1.22]), (2, 22, 2, [-1.02, -1.42]), (2, 23, 1, [0.0])]
STALLING = format_output({"Observation": "The page is still loading.", "Reflection": "",
                          "Plan": "Wait until the page has loaded.", "Decision": "Wait two seconds.",
                          "Memory": ""}, {"action": "wait", "seconds": 2})


def make_rollouts(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    index = 0
    with open(directory / "rollouts.jsonl", "w") as handle:
        for group, trajectory, steps, advantages in TRAJECTORIES:
            size = sum(1 for entry in TRAJECTORIES if entry[0] == group)
            for t in range(steps):
                prompt, images, response = step_sample(directory, index, frames=1 + t, small=True)
                if advantages[t] < 0:   # the rollouts the judge scored down stalled instead of tapping
                    response = STALLING
                # the trajectory's own advantage: the mean of its turns' (their step terms have zero mean)
                handle.write(json.dumps({"messages": prompt, "images": images, "response": response,
                                         "advantage": advantages[t], "group": group, "trajectory": trajectory,
                                         "step": t, "turn": t, "steps_in_trajectory": steps, "group_size": size,
                                         "trajectory_advantage": sum(advantages) / steps}) + "\n")
                index += 1
    return directory / "rollouts.jsonl"


def write_config(tmp_path: Path, rollouts: Path, **overrides) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {"stage": "rl", "output_dir": str(run_dir), "dataset_dir": "", "rollouts": str(rollouts),
              "model": {"tiny": {}}, "reference": {"tiny": {}}, "learning_rate": 2e-3, "micro_batch_size": 2,
              "max_seq_len": 10240, "freeze_vision": True, "freeze_projector": True, "seed": 0, "deepspeed": "",
              "image_max_pixels": 200704, "clip_epsilon": 0.2, "kl_coef": 0.04, "ppo_epochs": 2,
              "lambda": 1.0, "group_size": 3, **overrides}
    (run_dir / "config.json").write_text(json.dumps(config))
    return run_dir / "config.json"


def test_the_torch_pieces_are_the_rules_formulas():
    generator = torch.Generator().manual_seed(7)
    rows, width, epsilon = 6, 9, 0.2
    logp = -torch.rand(rows, width, generator=generator) * 3
    shift = torch.tensor([-0.4, 0.4, 0.0, 0.3, -0.3, 0.1]).unsqueeze(1)   # ratios inside and outside the clip
    old = logp + shift + (torch.rand(rows, width, generator=generator) - 0.5) * 0.2
    ref = logp + (torch.rand(rows, width, generator=generator) - 0.5) * 0.5
    mask = torch.ones(rows, width, dtype=torch.bool)
    for row in range(rows):
        mask[row, : row] = False   # responses of different lengths
    advantage = torch.tensor([1.3, -0.7, 0.4, -1.5, 2.0, -0.2])
    terms = step_terms(logp * mask, old * mask, ref * mask, mask, advantage, epsilon)
    for row in range(rows):
        keep = mask[row]
        log_ratio = float((logp[row][keep] - old[row][keep]).mean())
        assert float(terms["log_ratio"][row]) == pytest.approx(log_ratio, abs=1e-6)
        assert float(terms["term"][row]) == pytest.approx(clipped_term(log_ratio, float(advantage[row]), epsilon),
                                                          abs=1e-6)
        kl = sum(kl_k3(float(a), float(b)) for a, b in zip(logp[row][keep], ref[row][keep])) / int(keep.sum())
        assert float(terms["kl"][row]) == pytest.approx(kl, abs=1e-6)
    assert bool(terms["clipped"].any()) and not bool(terms["clipped"].all())
    # The eq. 6 weights make the weighted sum the mean over groups of the rule's per-group objective.
    records = [{"group": g, "trajectory": t, "steps_in_trajectory": n, "group_size": s}
               for g, t, n, s in [(1, 1, 2, 2), (1, 1, 2, 2), (1, 2, 1, 2), (2, 3, 1, 2), (2, 4, 2, 2), (2, 4, 2, 2)]]
    weights = torch.tensor(step_weights(records))
    assert float(weights.sum()) == pytest.approx(1.0)
    trajectories = defaultdict(list)
    for record, log_ratio, a in zip(records, terms["log_ratio"].tolist(), advantage.tolist()):
        trajectories[(record["group"], record["trajectory"])].append((log_ratio, a))
    per_group = [grpo_objective([steps for (g, _), steps in trajectories.items() if g == group], epsilon)
                 for group in (1, 2)]
    assert float((weights * terms["term"]).sum()) == pytest.approx(sum(per_group) / 2, abs=1e-6)
    assert float(step_terms(logp, logp, logp, mask, advantage, epsilon)["kl"].abs().max()) == 0.0
    # Per token (GRPO): the rules' step_term on each row's token log-ratios; a share of tokens clipped.
    tokens = step_terms(logp * mask, old * mask, ref * mask, mask, advantage, epsilon, importance="token")
    for row in range(rows):
        keep = mask[row]
        token_log_ratios = (logp[row][keep] - old[row][keep]).tolist()
        assert float(tokens["term"][row]) == pytest.approx(
            step_term(token_log_ratios, float(advantage[row]), epsilon, "token"), abs=1e-6)
        assert float(terms["term"][row]) == pytest.approx(
            step_term(token_log_ratios, float(advantage[row]), epsilon, "sequence"), abs=1e-6)
    assert torch.equal(tokens["kl"], terms["kl"]) and torch.equal(tokens["log_ratio"], terms["log_ratio"])
    assert 0 < float(tokens["clipped"].sum()) and bool((tokens["clipped"] <= 1).all())


@pytest.mark.parametrize("importance", ["sequence", "token"])
def test_one_update_follows_the_advantages_and_starts_at_zero_kl(tmp_path, importance):
    rollouts = make_rollouts(tmp_path / "rollouts")
    config = write_config(tmp_path, rollouts, importance_ratio=importance)
    started = time.time()
    assert rl_main(["--config", str(config)]) == 0
    print(f"\ntiny RL: one update (2 PPO epochs, 7 rows) in {time.time() - started:.1f} s, model builds included")
    run_dir = config.parent
    status = read_status(run_dir)
    assert status["state"] == "done" and status["step"] == 2 and Path(status["final"]).is_dir()
    metrics = read_metrics(run_dir)
    assert [point["step"] for point in metrics] == [1, 2]
    first, second = metrics
    rows = [json.loads(line) for line in (run_dir / "rl_steps.jsonl").read_text().splitlines()]
    assert len(rows) == 14 and {row["epoch"] for row in rows} == {1, 2}
    # Before the first step the policy is π_old and π_ref: ρ = 1, KL = 0, nothing clipped.
    assert first["kl"] == 0.0 and first["clip_fraction"] == 0.0
    # (up to float rounding: π_old's log-probs come from a no-grad pass over a different batch layout)
    assert all(abs(row["log_ratio"]) < 1e-6 for row in rows if row["epoch"] == 1)
    weights = {row["row"]: row["weight"] for row in rows}
    advantages = {row["row"]: row["advantage"] for row in rows}
    assert first["objective"] == pytest.approx(sum(weights[r] * advantages[r] for r in weights), abs=1e-6)
    assert first["loss"] == pytest.approx(-first["objective"], abs=1e-9)
    assert first["mean_advantage"] == pytest.approx(sum(advantages.values()) / 7)
    assert first["objective"] == pytest.approx(0.0, abs=1e-6)   # zero-mean advantages at ρ = 1
    # The second step's objective is the rules' eq. 6 on the trainer's own log-ratios.
    trajectories = defaultdict(list)
    for row in sorted((row for row in rows if row["epoch"] == 2), key=lambda row: row["row"]):
        trajectories[(row["group"], row["trajectory"])].append((row["log_ratio"], row["advantage"]))
    expected = sum(grpo_objective([steps for (g, _), steps in trajectories.items() if g == group], 0.2)
                   for group in (1, 2)) / 2
    if importance == "sequence":  # per token, the rows' mean log-ratios do not give it (test_the_torch_pieces…)
        assert second["objective"] == pytest.approx(expected, abs=1e-5)
    else:  # clipped token by token, where a step's tokens moved apart: not the per-response value
        assert second["objective"] != pytest.approx(expected, abs=1e-5)
    assert second["kl"] > 0 and second["loss"] == pytest.approx(-(second["objective"] - 0.04 * second["kl"]), abs=1e-6)
    assert any(row["log_ratio"] != 0.0 for row in rows if row["epoch"] == 2)
    # The update moves each response the way its advantage says.
    initial, processor = build_tiny({}, seed=0)
    updated, _ = load_model({"path": status["final"]})
    samples, _ = samples_io.load_samples(rollouts, processor, 10240)
    before = [float(lp.mean()) for lp in sequence_logprobs(initial.eval(), samples, processor, torch.device("cpu"))]
    after = [float(lp.mean()) for lp in sequence_logprobs(updated.eval(), samples, processor, torch.device("cpu"))]
    moved = [(sample.record["advantage"], new - old) for sample, old, new in zip(samples, before, after)]
    assert all(change > 0 for advantage, change in moved if advantage > 0), moved
    assert all(change < 0 for advantage, change in moved if advantage < 0), moved
    frozen = [name for name in initial.state_dict() if name.startswith("model.visual.")]
    assert all(torch.equal(initial.state_dict()[name], updated.state_dict()[name]) for name in frozen)


def test_empty_or_inconsistent_rollouts_fail_clearly(tmp_path):
    (tmp_path / "rollouts").mkdir()
    (tmp_path / "rollouts" / "rollouts.jsonl").write_text("")
    config = write_config(tmp_path, tmp_path / "rollouts" / "rollouts.jsonl")
    assert rl_main(["--config", str(config)]) == 1
    assert read_status(config.parent)["state"] == "failed"
    assert read_status(config.parent)["error"] == "the rollouts file has no rows"
    rollouts = make_rollouts(tmp_path / "bad")
    lines = rollouts.read_text().splitlines()
    row = json.loads(random.Random(0).choice(lines))
    row["group_size"] = 0
    rollouts.write_text("\n".join(lines + [json.dumps(row)]) + "\n")
    config = write_config(tmp_path, rollouts)
    assert rl_main(["--config", str(config)]) == 1
    assert "group_size=0" in read_status(config.parent)["error"]


@pytest.mark.skipif(not (BIN / "torchrun").exists(), reason="torchrun is not installed in this environment")
@pytest.mark.parametrize("sharding, tolerance", [("none", 1e-6), ("fsdp", 1e-5)])
def test_the_update_under_torchrun_with_two_ranks_is_the_single_process_update(tmp_path, sharding, tolerance):
    """DDP, or FSDP2 sharding: 7 rows on 2 ranks (sharded, the rank with 3 also scores a stand-in row, so
    every sharded forward is met, and never counts it)."""
    rollouts = make_rollouts(tmp_path / "rollouts")
    config = write_config(tmp_path / "two", rollouts, sharding=sharding)
    result = run_torchrun("training.trainer.rl", config, timeout=150)
    assert result.returncode == 0, result.stderr[-4000:]
    single = write_config(tmp_path / "one", rollouts)
    assert rl_main(["--config", str(single)]) == 0
    assert read_status(config.parent)["state"] == "done" and read_status(config.parent)["world_size"] == 2
    for two_ranks, one in zip(read_metrics(config.parent), read_metrics(single.parent), strict=True):
        for key in ("objective", "kl", "clip_fraction", "mean_advantage"):
            assert two_ranks[key] == pytest.approx(one[key], abs=tolerance), key
    rows = [json.loads(line) for line in (config.parent / "rl_steps.jsonl").read_text().splitlines()]
    assert sorted(row["row"] for row in rows if row["epoch"] == 1) == list(range(7))
    distributed, _ = load_model({"path": read_status(config.parent)["final"]})
    alone, _ = load_model({"path": read_status(single.parent)["final"]})
    # Adam's steps here are ~2e-3 each; summing gradients in another order moves a weight by < 5 % of one
    worst = max(float((a - b).abs().max()) for a, b in zip(distributed.state_dict().values(), alone.state_dict().values()))
    assert worst < 1e-4, worst


def sampler_logprobs(rollouts: Path, temperature: float) -> list[dict]:
    """What a sampler at `temperature` would have stored for each row's response: the tiny model's
    token log-probs under logits / T, from a plain full forward pass (not the trainer's code path)."""
    model, processor = build_tiny({}, seed=0)
    model.eval()
    samples, _ = samples_io.load_samples(rollouts, processor, 10240)
    stored = []
    for sample in samples:
        encoded = samples_io.encode(sample, processor)
        batch = samples_io.collate([encoded], processor.tokenizer.pad_token_id)
        labels = batch.pop("labels")[0, 1:]
        with torch.no_grad():
            logits = model(**batch, use_cache=False).logits[0, :-1].float()
        picked = torch.log_softmax(logits / temperature, dim=-1).gather(-1, labels.clamp(min=0).unsqueeze(-1))[:, 0]
        keep = labels != samples_io.IGNORE_INDEX
        stored.append({"temperature": temperature, "top_p": 1.0, "top_k": 0,
                       "tokens": [processor.tokenizer.decode([token]) for token in labels[keep].tolist()],
                       "logprobs": picked[keep].tolist()})
    return stored


def with_sampled(rollouts: Path, target: Path, sampled: list) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    for row, entry in zip(rows, sampled):
        if entry is not None:
            row["sampled"] = entry
        row["images"] = [str(rollouts.parent / path) for path in row["images"]]
    target.joinpath("rollouts.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return target / "rollouts.jsonl"


def test_pi_old_is_checked_against_the_samplers_logprobs(tmp_path):
    source = make_rollouts(tmp_path / "rollouts")
    source.write_text("".join(source.read_text().splitlines(keepends=True)[:3]))   # group 1: three rows
    exact = sampler_logprobs(source, 0.7)
    other_tokens = {**exact[1], "tokens": ["?"] + exact[1]["tokens"][1:]}   # not the trained tokens: not compared
    # 0.2 nats per token off, away from what the same tokens have at temperature 1 (the check also
    # accepts log-probs reported raw), so the gap is 0.2 whichever way the server reported them
    raw = sampler_logprobs(source, 1.0)
    perturbed = []
    for entry, plain in zip(exact, raw):
        shift = 0.2 if sum(entry["logprobs"]) > sum(plain["logprobs"]) else -0.2
        perturbed.append({**entry, "logprobs": [value + shift for value in entry["logprobs"]]})
    results = {}
    for name, sampled in (("exact", [exact[0], other_tokens, None]), ("perturbed", perturbed)):
        rollouts = with_sampled(source, tmp_path / name, sampled)
        config = write_config(tmp_path / name, rollouts, ppo_epochs=1)
        assert rl_main(["--config", str(config)]) == 0   # a mismatch warns, never fails the run
        assert read_status(config.parent)["state"] == "done"
        (results[name],) = read_metrics(config.parent)
    exact_run, perturbed_run = results["exact"], results["perturbed"]
    assert exact_run["pi_old_compared"] == 1 and exact_run["pi_old_logprobs_at"] == "sampling"
    assert exact_run["pi_old_sampling_gap"] < 1e-3 and exact_run["pi_old_mismatch"] is False
    assert perturbed_run["pi_old_compared"] == 3
    assert perturbed_run["pi_old_sampling_gap"] == pytest.approx(0.2, abs=1e-3) and perturbed_run["pi_old_mismatch"] is True
    assert perturbed_run["pi_old_tolerance"] == 0.05


def test_the_update_with_bf16_weights_moves_each_response_its_advantage_s_way(tmp_path):
    """precision bf16 (the GPU default): π_old, the reference and the policy compute in bf16, the
    update goes through fp32 masters, and it still follows the advantages from KL 0."""
    rollouts = make_rollouts(tmp_path / "rollouts")
    config = write_config(tmp_path, rollouts, precision="bf16", learning_rate=1e-3)
    assert rl_main(["--config", str(config)]) == 0
    status = read_status(config.parent)
    assert status["state"] == "done" and status["weights"] == "bf16"
    first, _ = read_metrics(config.parent)
    assert first["kl"] == 0.0 and first["clip_fraction"] == 0.0
    initial, processor = build_tiny({}, seed=0)
    updated, _ = load_model({"path": status["final"]})
    samples, _ = samples_io.load_samples(rollouts, processor, 10240)
    before = [float(lp.mean()) for lp in sequence_logprobs(initial.eval(), samples, processor, torch.device("cpu"))]
    after = [float(lp.mean()) for lp in sequence_logprobs(updated.eval(), samples, processor, torch.device("cpu"))]
    moved = [(sample.record["advantage"], new - old) for sample, old, new in zip(samples, before, after)]
    assert all(change > 0 for advantage, change in moved if advantage > 0.5), moved
    assert all(change < 0 for advantage, change in moved if advantage < -0.5), moved


def test_batching_by_turn_draws_micro_batches_across_trajectories_and_updates_the_same(tmp_path):
    """Xiaomi-GUI-0 §4.4: the same turn of several trajectories per micro-batch (turn 0 of 11, 12, 21, 22,
    23, then turn 1 of 11 and 22), each row keeping its trajectory id and turn index; the optimizer
    step's gradient is the same sum as with the rows in file order."""
    rollouts = make_rollouts(tmp_path / "rollouts")
    results = {}
    for batching in ("trajectory", "turn"):
        config = write_config(tmp_path / batching, rollouts, batching=batching)
        assert rl_main(["--config", str(config)]) == 0
        assert read_status(config.parent)["state"] == "done"
        rows = [json.loads(line) for line in (config.parent / "rl_steps.jsonl").read_text().splitlines()]
        results[batching] = (read_metrics(config.parent), [row for row in rows if row["epoch"] == 1])
    (by_trajectory, file_rows), (by_turn, turn_rows) = results["trajectory"], results["turn"]
    micro = defaultdict(list)
    for row in turn_rows:
        micro[row["micro_batch"]].append((row["trajectory"], row["turn"]))
    assert [sorted(micro[index]) for index in range(4)] == [[(11, 0), (12, 0)], [(21, 0), (22, 0)],
                                                             [(11, 1), (23, 0)], [(22, 1)]]
    assert [row["row"] for row in file_rows] == list(range(7))
    assert [row["micro_batch"] for row in file_rows] == [0, 0, 1, 1, 2, 2, 3]
    for one, other in zip(by_trajectory, by_turn, strict=True):
        assert (one["batching"], other["batching"]) == ("trajectory", "turn")
        for key in ("objective", "kl", "clip_fraction", "mean_advantage", "grad_norm"):
            assert other[key] == pytest.approx(one[key], abs=1e-5), key
    # micro-batches of 2: trajectories per batch 1,2,1,1 in file order, 2,2,2,1 turn-major
    assert (by_trajectory[0]["trajectories_per_micro_batch"], by_turn[0]["trajectories_per_micro_batch"]) == (1.25, 1.75)
    assert 0 < by_turn[0]["pad_fraction"] < 1 and 0 < by_trajectory[0]["pad_fraction"] < 1


def test_a_turn_that_lost_its_trajectorys_advantage_fails_the_update_before_it_starts(tmp_path):
    rollouts = make_rollouts(tmp_path / "rollouts")
    lines = rollouts.read_text().splitlines()
    broken = json.loads(lines[1])   # trajectory 11, turn 1
    broken["trajectory_advantage"] = 0.5
    rollouts.write_text("\n".join([lines[0], json.dumps(broken), *lines[2:]]) + "\n")
    config = write_config(tmp_path, rollouts, batching="turn")
    assert rl_main(["--config", str(config)]) == 1
    status = read_status(config.parent)
    assert status["state"] == "failed" and "turn 1 of trajectory 11 (row 1) does not inherit" in status["error"]
    assert not (config.parent / "final").exists()
