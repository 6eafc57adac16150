"""What makes the trainer fast without changing what it computes (issue #37): run settings for the
kernels, the weights' precision, memory, sharding, packing and the data pipeline.

    "attention": "auto" | "sdpa" | "flash_attention_2" | "eager"
        auto: FlashAttention-2 where flash_attn is installed and the run is on a GPU — Qwen2.5-VL's
        vision tower then runs its windowed attention as one variable-length kernel per block instead
        of one small kernel per window — else PyTorch's scaled-dot-product attention.
    "gradient_checkpointing": false | true
        recompute each decoder layer's activations in the backward pass (non-reentrant): memory for
        long screenshot-heavy samples, at about a third more compute.
    "loader_workers": 2, "prefetch": 2
        processes that decode, preprocess, tokenise and collate the coming micro batches while the
        model trains on the current one (0: in the training loop itself, as before).
    "precision": "auto" | "bf16" | "fp32"
        bf16: the model's weights in bf16 (no per-step casts of every weight under autocast), the
        optimizer updating fp32 master copies that are copied back after each step (Megatron's and
        apex O2's recipe); checkpoints carry the masters, so a resumed run is exact. fp32: fp32
        weights with bf16 autocast on a GPU (fp32 throughout on a CPU). auto: bf16 on a GPU, fp32 else.
    "sharding": "none" | "fsdp"
        fsdp: FSDP2 over the ranks of a torchrun launch (training/trainer/sharding.py); weights stay
        fp32 and are computed in bf16 on a GPU, and the vision cache is off (each rank's tower runs
        inside the sharded forward).
    "packing": false
        SFT and CPT: the samples of a micro batch packed into one row (data.pack) instead of padded
        rows; raise micro_batch_size to fill a token budget. The RL update scores rows one by one.
    "vision_cache": true
        while the vision tower and the projector are both frozen, each screenshot's visual tokens are
        computed once and reused (the same features whatever sample or epoch shows the screen again):
        the tower's forward was ~40% of a step's forward for ~4% of its FLOPs.
"""
from __future__ import annotations

import importlib.util
from collections import OrderedDict

import torch
from torch.utils.data import DataLoader, Dataset

from training.trainer import data as samples_io
from training.trainer.state import TrainerError
from training.trainer.tiny import unwrap

ATTENTION = ("auto", "sdpa", "flash_attention_2", "eager")
DEFAULTS = {"attention": "auto", "gradient_checkpointing": False, "loader_workers": 2, "prefetch": 2,
            "vision_cache": True, "precision": "auto", "sharding": "none", "packing": False}
PRECISIONS = ("auto", "bf16", "fp32")


def attention_implementation(choice: str, device) -> str:
    """The attention kernels a run uses (see the module's docstring)."""
    if choice not in ATTENTION:
        raise TrainerError(f"attention is one of {', '.join(ATTENTION)}, not {choice!r}")
    flash = importlib.util.find_spec("flash_attn") is not None and torch.device(device).type == "cuda"
    if choice == "flash_attention_2" and not flash:
        raise TrainerError("attention flash_attention_2 needs the flash_attn package and a GPU; "
                           "use \"auto\" to fall back to sdpa where it is not installed")
    if choice == "auto":
        return "flash_attention_2" if flash else "sdpa"
    return choice


def weights_dtype(choice: str, device) -> torch.dtype:
    if choice not in PRECISIONS:
        raise TrainerError(f"precision is one of {', '.join(PRECISIONS)}, not {choice!r}")
    if choice == "auto":
        choice = "bf16" if torch.device(device).type == "cuda" else "fp32"
    return torch.bfloat16 if choice == "bf16" else torch.float32


def configure_model(model, config: dict, device) -> dict:
    """Set the run's weight precision, attention kernels and gradient checkpointing on a loaded model;
    what was set."""
    precision = config.get("precision", "auto")
    if config.get("sharding", "none") == "fsdp" and precision == "auto":
        precision = "fp32"   # FSDP2 gathers the fp32 weights in bf16 for compute itself
    dtype = weights_dtype(precision, device)
    model.to(dtype)
    implementation = attention_implementation(config.get("attention", "auto"), device)
    model.set_attn_implementation(implementation)
    checkpointing = bool(config.get("gradient_checkpointing"))
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return {"attention": implementation, "gradient_checkpointing": checkpointing,
            "weights": "bf16" if dtype == torch.bfloat16 else "fp32"}


class MasterWeights:
    """fp32 copies of bf16 weights for the optimizer: gradients are copied up before the step, the
    updated masters copied down after it. With fp32 weights it is not used."""

    def __init__(self, parameters: list):
        self.parameters = parameters
        self.masters = [p.detach().float().clone().requires_grad_(True) for p in parameters]

    def gradients_up(self) -> None:
        for master, parameter in zip(self.masters, self.parameters):
            master.grad = None if parameter.grad is None else parameter.grad.float()

    @torch.no_grad()
    def weights_down(self) -> None:
        for master, parameter in zip(self.masters, self.parameters):
            parameter.copy_(master)
            parameter.grad = None

    def state_dict(self) -> list:
        return [master.detach().cpu() for master in self.masters]

    @torch.no_grad()
    def load_state_dict(self, state: list) -> None:
        if len(state) != len(self.masters):
            raise TrainerError(f"the checkpoint holds {len(state)} master weights, this model trains {len(self.masters)}")
        for master, saved in zip(self.masters, state):
            master.copy_(saved)
        self.weights_down()


class MicroBatches(Dataset):
    """A run's micro batches in training order, `plan[i]` the sample positions of the i-th (a list, or
    data.PlannedMicroBatches computing them on demand). Map-style,
    so a DataLoader with workers returns them in this order, each collated (or packed) like the loop
    did inline; each worker keeps its own screenshot cache."""

    def __init__(self, samples, processor, plan, packing: bool = False):
        self.samples, self.processor, self.plan, self.packing = samples, processor, plan, packing
        self.pad_id = processor.tokenizer.pad_token_id
        self.screenshots = samples_io.ScreenshotCache()

    def __len__(self) -> int:
        return len(self.plan)

    def __getitem__(self, index: int) -> dict:
        encoded = [samples_io.encode(self.samples[p], self.processor, self.screenshots) for p in self.plan[index]]
        return samples_io.pack(encoded) if self.packing else samples_io.collate(encoded, self.pad_id)


def micro_batch_loader(samples, processor, plan, workers: int, prefetch: int,
                       packing: bool = False):
    """The collated (or packed) micro batches of `plan` in order: by `workers` processes `prefetch`
    batches ahead each, or in this process when workers is 0."""
    dataset = MicroBatches(samples, processor, plan, packing)
    if workers <= 0:
        return (dataset[index] for index in range(len(dataset)))
    return iter(DataLoader(dataset, batch_size=None, shuffle=False, num_workers=workers,
                           prefetch_factor=max(1, prefetch), persistent_workers=False,
                           pin_memory=torch.cuda.is_available()))


def packed_positions(model, batch: dict) -> dict:
    """A packed row's position ids, [4, 1, tokens]: each sample's own text positions (from 0) on top
    of its M-RoPE positions (Qwen2.5-VL's get_rope_index, sample by sample), as transformers expects
    for packed Qwen2.5-VL input; computed where the batch is (on the CPU before it moves)."""
    if "sample_lengths" not in batch:
        return batch
    inner = unwrap(model).model
    grids = batch.get("image_grid_thw")
    text, rope, start, image = [], [], 0, 0
    for length, count in zip(batch["sample_lengths"].tolist(), batch["sample_images"].tolist()):
        ids = batch["input_ids"][:, start:start + length]
        positions, _ = inner.get_rope_index(ids, grids[image:image + count] if count else None, None,
                                            attention_mask=torch.ones_like(ids))
        rope.append(positions)
        text.append(torch.arange(length, dtype=positions.dtype)[None, None])
        start, image = start + length, image + count
    position_ids = torch.cat([torch.cat(text, dim=-1), torch.cat(rope, dim=-1)], dim=0)
    return {**{key: value for key, value in batch.items() if key not in ("sample_lengths", "sample_images")},
            "position_ids": position_ids}


class VisionCache:
    """Each screenshot's visual tokens (the frozen tower and projector's output), computed once per
    process and kept on the device up to max_bytes (least recently used dropped). `inputs(model, batch)`
    gives the model the language embeddings with those tokens in place, so its own forward skips the
    tower; positions (M-RoPE) still come from input_ids and image_grid_thw, as without the cache."""

    def __init__(self, max_bytes: int = 4 << 30):
        self.max_bytes, self.bytes = max_bytes, 0
        self._features: OrderedDict[str, torch.Tensor] = OrderedDict()
        self.hits = self.misses = 0

    def _image_features(self, model, batch: dict) -> torch.Tensor:
        inner = unwrap(model).model
        grids, keys = batch["image_grid_thw"], batch["image_keys"]
        patches = grids.prod(-1).tolist()   # rows of pixel_values per image
        features, start = [], 0
        for key, count, grid in zip(keys, patches, grids):
            cached = self._features.get(key)
            if cached is None:
                self.misses += 1
                with torch.no_grad():
                    output = inner.get_image_features(batch["pixel_values"][start:start + count], grid[None])
                # transformers 4: a tuple of per-image tensors; 5: an output whose pooler_output is that tuple
                (cached,) = getattr(output, "pooler_output", output)
                self._features[key] = cached
                self.bytes += cached.element_size() * cached.nelement()
                while self.bytes > self.max_bytes and len(self._features) > 1:
                    _, dropped = self._features.popitem(last=False)
                    self.bytes -= dropped.element_size() * dropped.nelement()
            else:
                self.hits += 1
                self._features.move_to_end(key)
            features.append(cached)
            start += count
        return torch.cat(features)

    def inputs(self, model, batch: dict) -> dict:
        """The batch with inputs_embeds in place of pixel_values (unchanged without images)."""
        if "pixel_values" not in batch or len(batch.get("image_keys") or []) != len(batch["image_grid_thw"]):
            return batch
        features = self._image_features(model, batch)
        embed = unwrap(model).get_input_embeddings()
        embeds = embed(batch["input_ids"])
        image_token = unwrap(model).config.image_token_id
        mask = (batch["input_ids"] == image_token).unsqueeze(-1).expand_as(embeds)
        embeds = embeds.masked_scatter(mask, features.to(embeds.dtype))
        return {**{key: value for key, value in batch.items() if key != "pixel_values"}, "inputs_embeds": embeds}


def model_batch(model, batch: dict, device, vision: VisionCache | None = None) -> dict:
    """A loaded batch as the forward takes it: packed positions where it is packed (on the CPU), on the
    device, and the cached visual tokens in place of the pixels where there is a cache. Call it inside
    the forward's autocast: the embeddings and any tower pass it makes run there."""
    batch = samples_io.to_device(packed_positions(model, batch), device)
    return vision.inputs(model, batch) if vision is not None else batch


def vision_cache(config: dict) -> VisionCache | None:
    """A cache where the run asks for one and the tower and projector are frozen (their output fixed)."""
    frozen = bool(config.get("freeze_vision")) and bool(config.get("freeze_projector"))
    sharded = config.get("sharding", "none") == "fsdp"   # a sharded tower runs only inside the model's forward
    return VisionCache() if config.get("vision_cache", True) and frozen and not sharded else None
