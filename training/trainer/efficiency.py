"""What makes the trainer fast without changing what it computes (issue #37): the attention kernels,
gradient checkpointing, and the micro batches encoded ahead of the loop by loader workers.

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
"""
from __future__ import annotations

import importlib.util

import torch
from torch.utils.data import DataLoader, Dataset

from training.trainer import data as samples_io
from training.trainer.state import TrainerError

ATTENTION = ("auto", "sdpa", "flash_attention_2", "eager")
DEFAULTS = {"attention": "auto", "gradient_checkpointing": False, "loader_workers": 2, "prefetch": 2}


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


def configure_model(model, config: dict, device) -> dict:
    """Set the run's attention kernels and gradient checkpointing on a loaded model; what was set."""
    implementation = attention_implementation(config.get("attention", "auto"), device)
    model.set_attn_implementation(implementation)
    checkpointing = bool(config.get("gradient_checkpointing"))
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return {"attention": implementation, "gradient_checkpointing": checkpointing}


class MicroBatches(Dataset):
    """A run's micro batches in training order, `plan[i]` the sample positions of the i-th. Map-style,
    so a DataLoader with workers returns them in this order, each collated like the loop did inline;
    each worker keeps its own screenshot cache."""

    def __init__(self, samples, processor, plan: list[list[int]]):
        self.samples, self.processor, self.plan = samples, processor, plan
        self.pad_id = processor.tokenizer.pad_token_id
        self.screenshots = samples_io.ScreenshotCache()

    def __len__(self) -> int:
        return len(self.plan)

    def __getitem__(self, index: int) -> dict:
        encoded = [samples_io.encode(self.samples[p], self.processor, self.screenshots) for p in self.plan[index]]
        return samples_io.collate(encoded, self.pad_id)


def micro_batch_loader(samples, processor, plan: list[list[int]], workers: int, prefetch: int):
    """The collated micro batches of `plan` in order: by `workers` processes `prefetch` batches ahead
    each, or in this process when workers is 0."""
    dataset = MicroBatches(samples, processor, plan)
    if workers <= 0:
        return (dataset[index] for index in range(len(dataset)))
    return iter(DataLoader(dataset, batch_size=None, shuffle=False, num_workers=workers,
                           prefetch_factor=max(1, prefetch), persistent_workers=False,
                           pin_memory=torch.cuda.is_available()))
