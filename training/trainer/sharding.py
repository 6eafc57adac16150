"""Sharded training with PyTorch's FSDP2 (`"sharding": "fsdp"` under torchrun; issue #37): every decoder
layer and vision block its own unit, the rest at the root, so each rank holds 1/world of the weights,
gradients and AdamW state. On a GPU the weights stay fp32 and are gathered in bf16 for compute, with
gradients reduced in fp32 (FSDP2's MixedPrecisionPolicy: its standard recipe for fp32 masters). A
checkpoint holds the full weights (saved like any run's, for serving) and the full optimizer state, so a
resume on any number of ranks is exact.
"""
from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import torch
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.optim.lr_scheduler import LambdaLR

from training.trainer.state import TrainerError
from training.trainer.tiny import unwrap

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


def shard_model(model, device) -> None:
    """fully_shard each decoder layer and vision block, then the root."""
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if torch.device(device).type == "cuda" else MixedPrecisionPolicy()
    inner = unwrap(model).model
    for block in list(inner.visual.blocks) + list(inner.language_model.layers):
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)


class FsdpEngine:
    """The TorchEngine's interface (training/trainer/sft.py) over an FSDP2-sharded model."""

    def __init__(self, model, dist, lr_lambda, learning_rate: float):
        if not dist.enabled:
            raise TrainerError("sharding \"fsdp\" shards over the ranks of a torchrun launch: start the run with "
                               "nproc 2 or more, or leave sharding \"none\"")
        if any(p.dtype != torch.float32 for p in model.parameters()):
            raise TrainerError("sharding \"fsdp\" keeps fp32 weights and computes in bf16 on a GPU itself: "
                               "set precision \"fp32\" or \"auto\"")
        self.dist = dist
        shard_model(model, dist.device)
        self.model = model
        self.parameters = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.parameters, lr=learning_rate, weight_decay=0.0)
        self.scheduler = LambdaLR(self.optimizer, lr_lambda)
        self._optimizer_state = None

    def micro_step(self, last: bool):
        self.model.set_requires_gradient_sync(last)   # reduce-scatter on the last micro step only
        return nullcontext()

    def backward(self, loss) -> None:
        loss.backward()

    def step(self) -> float:
        from training.trainer.sft import MAX_GRAD_NORM

        norm = torch.nn.utils.clip_grad_norm_(self.parameters, MAX_GRAD_NORM)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)

    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def full_state_dict(self):
        """Collective (every rank calls it): the full weights on the main rank; the optimizer's full
        state is gathered at the same time for the checkpoint's trainer state."""
        weights = get_model_state_dict(self.model, options=FULL)
        self._optimizer_state = get_optimizer_state_dict(self.model, self.optimizer, options=FULL)
        return weights

    def state_dict(self) -> dict:
        return {"optimizer": self._optimizer_state, "scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict, checkpoint: Path) -> None:
        set_optimizer_state_dict(self.model, self.optimizer, optim_state_dict=state["optimizer"],
                                 options=StateDictOptions(full_state_dict=True))
        self.scheduler.load_state_dict(state["scheduler"])
