"""Issue #37 on CPU with the tiny model: what makes the trainer fast changes nothing it computes —
SDPA and eager attention give the same log-probabilities, gradient checkpointing the same loss and
gradients, cached visual tokens the same log-probabilities and gradients as the tower recomputed, the
loader's workers the same batches in the same order, and a run with all of it the same losses."""
import pytest
import torch

from tests.conftest import torch_on_one_thread
from tests.training.test_trainer_sft import make_export, write_config
from training.trainer import data as samples_io
from training.trainer import efficiency
from training.trainer.sft import freeze
from training.trainer.sft import main as sft_main
from training.trainer.state import TrainerError, read_metrics
from training.trainer.tiny import build_tiny


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return make_export(tmp_path_factory.mktemp("snapshot"), count=6, small=True)


@pytest.fixture(scope="module")
def samples(export):
    _, processor = build_tiny({})
    loaded, _ = samples_io.load_samples(export / "data.jsonl", processor, 10240)
    return loaded, processor


def batch_of(samples, positions):
    loaded, processor = samples
    return samples_io.collate([samples_io.encode(loaded[p], processor) for p in positions],
                              processor.tokenizer.pad_token_id)


def test_auto_attention_is_sdpa_without_flash_attn_and_a_wrong_choice_is_refused():
    assert efficiency.attention_implementation("auto", "cpu") == "sdpa"
    assert efficiency.attention_implementation("eager", "cpu") == "eager"
    with pytest.raises(TrainerError, match="flash_attn package and a GPU"):
        efficiency.attention_implementation("flash_attention_2", "cpu")
    with pytest.raises(TrainerError, match="attention is one of"):
        efficiency.attention_implementation("fast", "cpu")


def test_sdpa_and_eager_attention_give_the_same_log_probabilities(samples):
    batch = batch_of(samples, [0, 1])
    results = {}
    for choice in ("eager", "sdpa"):
        model, _ = build_tiny({})
        assert efficiency.configure_model(model, {"attention": choice}, "cpu")["attention"] == choice
        assert model.config._attn_implementation == choice
        with torch.no_grad(), torch_on_one_thread():
            results[choice], mask = samples_io.response_logprobs(model.eval(), batch)
    assert mask.sum() > 20
    assert torch.allclose(results["eager"], results["sdpa"], atol=1e-5)


def test_gradient_checkpointing_gives_the_same_loss_and_gradients(samples):
    batch = batch_of(samples, [2, 3])
    runs = []
    for checkpointing in (False, True):
        model, _ = build_tiny({})
        freeze(model, vision=True, projector=True)
        assert efficiency.configure_model(model, {"gradient_checkpointing": checkpointing}, "cpu")[
            "gradient_checkpointing"] is checkpointing
        model.train()
        with torch_on_one_thread():
            logprobs, _ = samples_io.response_logprobs(model, batch)
            loss = -logprobs.sum()
            loss.backward()
        runs.append((float(loss.detach()), {name: p.grad.clone() for name, p in model.named_parameters() if p.requires_grad}))
    (plain_loss, plain), (checkpointed_loss, checkpointed) = runs
    assert model.model.language_model.gradient_checkpointing
    assert plain_loss == pytest.approx(checkpointed_loss, abs=1e-5)
    assert plain.keys() == checkpointed.keys()
    for name in plain:
        assert torch.allclose(plain[name], checkpointed[name], atol=1e-5), name


def test_the_loader_s_workers_hand_out_the_same_batches_in_the_same_order(samples):
    loaded, processor = samples
    plan = [[0], [1, 2], [3], [4, 5], [0]]
    inline = list(efficiency.micro_batch_loader(loaded, processor, plan, workers=0, prefetch=2))
    ahead = list(efficiency.micro_batch_loader(loaded, processor, plan, workers=2, prefetch=2))
    assert len(inline) == len(ahead) == len(plan)
    for positions, a, b in zip(plan, inline, ahead):
        direct = batch_of(samples, positions)
        assert a.keys() == b.keys() == direct.keys() and "logits_at" in a
        for key in a:
            if torch.is_tensor(a[key]):
                assert torch.equal(a[key], b[key]) and torch.equal(a[key], direct[key]), key
            else:
                assert a[key] == b[key] == direct[key], key


def test_cached_visual_tokens_give_what_the_recomputed_tower_gives(samples):
    batch = batch_of(samples, [0, 1])
    assert len(batch["image_keys"]) == len(batch["image_grid_thw"]) == 4
    model, _ = build_tiny({})
    freeze(model, vision=True, projector=True)
    model.train()
    cache = efficiency.VisionCache()
    runs = []
    with torch_on_one_thread():
        for inputs in (batch, cache.inputs(model, batch), cache.inputs(model, batch)):
            model.zero_grad(set_to_none=True)
            logprobs, mask = samples_io.response_logprobs(model, inputs)
            (-logprobs.sum()).backward()
            runs.append((logprobs.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}))
    assert "pixel_values" not in cache.inputs(model, batch) and (cache.misses, cache.hits) == (4, 8)
    (plain, plain_grads), *cached_runs = runs
    for logprobs, grads in cached_runs:
        assert torch.allclose(plain, logprobs, atol=1e-5)
        for name in plain_grads:
            assert torch.allclose(plain_grads[name], grads[name], atol=1e-5), name
    assert efficiency.vision_cache({"freeze_vision": True, "freeze_projector": False}) is None   # a learning projector
    assert efficiency.vision_cache({"freeze_vision": True, "freeze_projector": True, "vision_cache": False}) is None


def test_a_run_with_every_speed_setting_computes_what_a_run_without_them_does(tmp_path, export):
    losses = {}
    for workers in (0, 2):
        config = write_config(tmp_path, export, name=f"workers{workers}", max_steps=4, save_every=10,
                              loader_workers=workers, gradient_checkpointing=workers > 0,
                              vision_cache=workers > 0)
        with torch_on_one_thread():
            assert sft_main(["--config", str(config)]) == 0
        losses[workers] = [point["loss"] for point in read_metrics(config.parent)]
    assert len(losses[0]) == 4
    assert losses[0] == pytest.approx(losses[2], abs=1e-5)


def test_bf16_weights_train_on_fp32_masters_and_resume_exactly(tmp_path, export):
    """precision bf16: the model computes in bf16, AdamW updates fp32 masters; the checkpoint carries the
    masters, so a run resumed from step 2 ends with the weights of the run that never stopped."""
    import shutil

    from training.trainer.state import read_status
    from training.trainer.tiny import load_model

    straight = write_config(tmp_path, export, name="straight", max_steps=4, save_every=2, precision="bf16",
                            learning_rate=1e-3, min_learning_rate=1e-4)
    with torch_on_one_thread():
        assert sft_main(["--config", str(straight)]) == 0
    run = straight.parent
    assert read_status(run)["weights"] == "bf16"
    state = torch.load(run / "checkpoint-2" / "trainer_state.pt", weights_only=False)
    assert state["masters"] and all(master.dtype == torch.float32 for master in state["masters"])
    from safetensors import safe_open
    with safe_open(str(next((run / "final").glob("*.safetensors"))), "pt") as saved:   # saved as it trained
        assert {saved.get_tensor(key).dtype for key in saved.keys()} == {torch.bfloat16}
    final, _ = load_model({"path": str(run / "final")})

    resumed = tmp_path / "resumed"
    shutil.copytree(run, resumed, ignore=shutil.ignore_patterns("final", "checkpoint-4"))
    config = (resumed / "config.json")
    config.write_text(config.read_text().replace(str(run), str(resumed)))
    with torch_on_one_thread():
        assert sft_main(["--config", str(config)]) == 0
    assert read_status(resumed)["resumed_from"].endswith("checkpoint-2")
    again, _ = load_model({"path": str(resumed / "final")})
    for (name, a), (_, b) in zip(final.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), name
    fresh, _ = build_tiny({})
    moved = [name for name, p in final.named_parameters()
             if not torch.equal(p.float(), fresh.state_dict()[name].to(torch.bfloat16).float())]
    assert any("language_model" in name for name in moved) and not any("visual" in name for name in moved)
    with pytest.raises(TrainerError, match="precision is one of"):
        efficiency.weights_dtype("fp8", "cpu")


def test_fsdp_is_refused_where_it_cannot_shard(tmp_path, export):
    """One process has no ranks to shard over; the RL update does not shard with FSDP yet: both say so."""
    from training.trainer.state import read_status

    config = write_config(tmp_path, export, name="alone", max_steps=2, sharding="fsdp")
    with torch_on_one_thread():
        assert sft_main(["--config", str(config)]) != 0
    assert "shards over the ranks of a torchrun launch" in read_status(config.parent)["error"]
    assert efficiency.vision_cache({"freeze_vision": True, "freeze_projector": True, "sharding": "fsdp"}) is None
    model, _ = build_tiny({})
    assert efficiency.configure_model(model, {"sharding": "fsdp"}, "cpu")["weights"] == "fp32"


def test_a_packed_row_scores_each_sample_as_its_own_padded_row_does(samples):
    """Sequence packing: three samples end to end in one row, each sample's positions from 0 and its
    attention kept to itself, give every response token the log-probability it has alone — with the
    tower recomputed or its tokens cached — and the loss is the same sum."""
    loaded, processor = samples
    positions = [0, 3, 5]
    encoded = [samples_io.encode(loaded[p], processor) for p in positions]
    padded = samples_io.collate(encoded, processor.tokenizer.pad_token_id)
    model, _ = build_tiny({})
    packed = efficiency.packed_positions(model, samples_io.pack(encoded))
    assert packed["input_ids"].shape == (1, sum(len(item["input_ids"]) for item in encoded))
    assert packed["position_ids"].shape == (4, 1, packed["input_ids"].shape[1]) and "attention_mask" not in packed
    assert packed["position_ids"][0, 0, len(encoded[0]["input_ids"])] == 0        # the second sample starts at 0
    with torch.no_grad(), torch_on_one_thread():
        alone, mask = samples_io.response_logprobs(model.eval(), padded)
        together, together_mask = samples_io.response_logprobs(model, packed)
        cached, _ = samples_io.response_logprobs(model, efficiency.VisionCache().inputs(model, packed))
    expected = torch.cat([alone[row][mask[row]] for row in range(len(positions))])
    assert torch.allclose(together[together_mask], expected, atol=1e-4)
    assert torch.allclose(cached[together_mask], expected, atol=1e-4)
    # Without the packed positions the samples would see each other: the check above can fail.
    leaky = {key: value for key, value in packed.items() if key != "position_ids"}
    with torch.no_grad(), torch_on_one_thread():
        seen, _ = samples_io.response_logprobs(model, leaky)
    assert not torch.allclose(seen[together_mask], expected, atol=1e-4)


def test_a_packed_run_trains_what_a_padded_run_trains(tmp_path, export):
    losses = {}
    for packing in (False, True):
        config = write_config(tmp_path, export, name=f"packing{packing}", max_steps=3, batch_size=4,
                              micro_batch_size=2, save_every=10, packing=packing, loader_workers=0)
        with torch_on_one_thread():
            assert sft_main(["--config", str(config)]) == 0
        losses[packing] = [point["loss"] for point in read_metrics(config.parent)]
    assert len(losses[True]) == 3 and losses[True] == pytest.approx(losses[False], rel=1e-4)


def test_the_plan_is_computed_on_demand_and_is_the_steps_micro_batches():
    """A run of thousands of steps holds no list of its micro batches: the plan computes each one."""
    plan = samples_io.RankPlan(count=10, seed=3, batch_size=4, micro=1, rank=1, world_size=2, accumulation=2)
    ahead = plan.from_step(5, 5000)
    assert len(ahead) == 4995 * 2
    for step in (5, 6, 4999):
        positions = samples_io.global_batch(10, 3, step, 4)
        mine = samples_io.micro_batches(samples_io.shard(positions, 1, 2), 1)
        assert [ahead[(step - 5) * 2 + i] for i in range(2)] == mine
    with pytest.raises(IndexError):
        ahead[len(ahead)]
    short = samples_io.RankPlan(count=3, seed=0, batch_size=3, micro=1, rank=1, world_size=2, accumulation=2)
    positions, chunks = short.step(0)
    assert chunks[-1] is None and short.micro_batch(0, 1) == positions[:1]   # a weight-0 stand-in
