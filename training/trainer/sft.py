"""CPT and SFT of Qwen2.5-VL (report §5.1, eq. 1): `python -m training.trainer.sft --config config.json`,
also under `torchrun --nproc_per_node N` or `accelerate launch` (with a DeepSpeed config when given).

The language model learns; the vision encoder and the projector stay frozen (§5.1; two flags). The
loss is the negative log-likelihood of the response tokens only, averaged over the response tokens
of the whole global batch (batch_size samples, reached by gradient accumulation over
micro_batch_size × world size). Learning rate: linear warmup over warmup_ratio of the steps, then
cosine decay from learning_rate to min_learning_rate. Checkpoints every save_every steps and at the
end; a restarted run resumes from the latest one at the exact sample it stopped at.
"""
from __future__ import annotations

import importlib.util
import json
import math
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.optim.lr_scheduler import LambdaLR

from training.trainer import data as samples_io
from training.trainer import efficiency
from training.trainer.state import (
    CancelWatch,
    Distributed,
    TrainerError,
    append_metrics,
    latest_checkpoint,
    load_trainer_state,
    rng_state,
    run_main,
    save_checkpoint,
    seed_everything,
    set_rng_state,
    trim_metrics,
    write_status,
)
from training.trainer.tiny import load_model, save_artifact, unwrap

DEFAULTS = {"learning_rate": 1e-5, "min_learning_rate": 1e-6, "warmup_ratio": 0.05, "epochs": 1, "max_steps": 0,
            "batch_size": 128, "micro_batch_size": 1, "max_seq_len": 10240, "freeze_vision": True,
            "freeze_projector": True, "save_every": 50, "seed": 0, "deepspeed": "", "image_max_pixels": 200704,
            **efficiency.DEFAULTS}
MAX_GRAD_NORM = 1.0   # LLaMA-Factory's and HF Trainer's default; the report gives none


class Cancelled(Exception):
    """The run was asked to stop (CANCEL file or SIGTERM) at a micro step."""


def settings(config: dict) -> dict:
    merged = {**DEFAULTS, **{key: value for key, value in config.items() if value is not None}}
    for key in ("output_dir", "model"):
        if not merged.get(key):
            raise TrainerError(f"the config has no {key!r}")
    return merged


def lr_factor(step: int, total: int, warmup: int, min_ratio: float) -> float:
    """The multiplier of learning_rate at optimizer step `step` (from 0): linear warmup over `warmup`
    steps, then cosine from 1 down to min_ratio = min_learning_rate / learning_rate at the last step."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup - 1))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def freeze(model, vision: bool, projector: bool) -> dict:
    """requires_grad False on the vision encoder (patch embedding and blocks) and/or the projector
    (Qwen2.5-VL's visual.merger); the counts of trainable and frozen parameters."""
    visual = unwrap(model).model.visual
    for name, parameter in visual.named_parameters():
        in_projector = name.startswith("merger.")
        if (projector and in_projector) or (vision and not in_projector):
            parameter.requires_grad_(False)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"trainable_parameters": trainable,
            "frozen_parameters": sum(p.numel() for p in model.parameters()) - trainable}


class TorchEngine:
    """AdamW over the trainable parameters, the warmup + cosine schedule, DDP across ranks."""

    def __init__(self, model, dist: Distributed, lr_lambda, learning_rate: float):
        self.dist = dist
        self.parameters = [p for p in model.parameters() if p.requires_grad]
        # bf16 weights: the optimizer and its state work on fp32 masters (efficiency.MasterWeights)
        bf16 = any(p.dtype == torch.bfloat16 for p in self.parameters)
        self.masters = efficiency.MasterWeights(self.parameters) if bf16 else None
        if dist.enabled:
            device_ids = [dist.device.index] if dist.device.type == "cuda" else None
            model = DistributedDataParallel(model, device_ids=device_ids)
        self.model = model
        updated = self.masters.masters if self.masters else self.parameters
        self.optimizer = torch.optim.AdamW(updated, lr=learning_rate, weight_decay=0.0)
        self.scheduler = LambdaLR(self.optimizer, lr_lambda)

    def micro_step(self, last: bool):
        """Gradients are all-reduced on the last micro step of an optimizer step only."""
        return self.model.no_sync() if self.dist.enabled and not last else nullcontext()

    def backward(self, loss) -> None:
        loss.backward()

    def step(self) -> float:
        if self.masters:
            self.masters.gradients_up()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.masters.masters if self.masters else self.parameters,
                                                   MAX_GRAD_NORM)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.masters:
            self.masters.weights_down()
        return float(grad_norm)

    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def full_state_dict(self):
        return None   # save_pretrained reads the (unwrapped) model itself

    def state_dict(self) -> dict:
        state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}
        if self.masters:
            state["masters"] = self.masters.state_dict()   # the bf16 weights saved beside them are rounded
        return state

    def load_state_dict(self, state: dict, checkpoint: Path) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.masters:
            if "masters" not in state:
                raise TrainerError(f"{checkpoint.name} was written with fp32 weights; this run trains bf16 weights "
                                   "(precision): resume with the precision it was started with")
            self.masters.load_state_dict(state["masters"])


class DeepSpeedEngine(TorchEngine):
    """The same loop through accelerate's DeepSpeed integration (ZeRO stages from the given config).
    Only built when deepspeed imports; not exercised by the CPU tests (DeepSpeed needs CUDA)."""

    def __init__(self, model, dist: Distributed, lr_lambda, learning_rate: float, config_path: str,
                 micro_batch_size: int, accumulation: int):
        from accelerate import Accelerator
        from accelerate.utils import DeepSpeedPlugin

        try:
            ds_config = json.loads(Path(config_path).read_text())
        except (OSError, ValueError) as error:
            raise TrainerError(f"the DeepSpeed config {config_path} cannot be read: {error}")
        if {"optimizer", "scheduler"} & set(ds_config):
            raise TrainerError(f"the DeepSpeed config {config_path} defines an optimizer or a scheduler: remove them, "
                               "the trainer's AdamW and warmup + cosine schedule (§5.1) are used")
        plugin = DeepSpeedPlugin(hf_ds_config=config_path, gradient_accumulation_steps=accumulation,
                                 gradient_clipping=MAX_GRAD_NORM)
        plugin.deepspeed_config["train_micro_batch_size_per_gpu"] = micro_batch_size
        plugin.deepspeed_config["train_batch_size"] = micro_batch_size * accumulation * dist.world_size
        self.accelerator = Accelerator(deepspeed_plugin=plugin, gradient_accumulation_steps=accumulation)
        self.dist, self.accumulation = dist, accumulation
        self.parameters = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(self.parameters, lr=learning_rate, weight_decay=0.0)
        scheduler = LambdaLR(optimizer, lr_lambda)
        self.model, self.optimizer, self.scheduler = self.accelerator.prepare(model, optimizer, scheduler)

    def micro_step(self, last: bool):
        return self.accelerator.accumulate(self.model)

    def backward(self, loss) -> None:
        # DeepSpeed divides by the accumulation steps itself; our loss is already normalised per batch.
        self.accelerator.backward(loss * self.accumulation)

    def step(self) -> float:
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad()
        norm = self.model.get_global_grad_norm() if hasattr(self.model, "get_global_grad_norm") else None
        return float(norm or 0.0)

    def full_state_dict(self):
        return self.accelerator.get_state_dict(self.model)   # gathers ZeRO-3 shards

    def state_dict(self) -> dict:
        return {}

    def save_extra(self, directory: Path) -> None:
        self.accelerator.save_state(str(Path(directory) / "accelerate"))

    def load_state_dict(self, state: dict, checkpoint: Path) -> None:
        self.accelerator.load_state(str(Path(checkpoint) / "accelerate"))


def make_engine(model, dist: Distributed, config: dict, total: int, accumulation: int) -> TorchEngine:
    warmup = math.ceil(config["warmup_ratio"] * total)
    min_ratio = config["min_learning_rate"] / config["learning_rate"]
    lr_lambda = lambda step: lr_factor(step, total, warmup, min_ratio)  # noqa: E731
    if config.get("sharding", "none") == "fsdp":
        if config.get("deepspeed"):
            raise TrainerError("the run names both a DeepSpeed config and sharding \"fsdp\": choose one")
        from training.trainer.sharding import FsdpEngine

        return FsdpEngine(model, dist, lr_lambda, config["learning_rate"])
    if config.get("deepspeed"):
        if importlib.util.find_spec("deepspeed") is None:
            raise TrainerError(f"the run names a DeepSpeed config ({config['deepspeed']}) but deepspeed is not "
                               "installed on this host: pip install deepspeed (it needs CUDA), or leave "
                               "\"deepspeed\" empty to train with torch DDP")
        return DeepSpeedEngine(model, dist, lr_lambda, config["learning_rate"], config["deepspeed"],
                               config["micro_batch_size"], accumulation)
    return TorchEngine(model, dist, lr_lambda, config["learning_rate"])


def autocast(device):
    """bf16 autocast on GPU (with fp32 weights; with bf16 weights it changes nothing); plain on CPU."""
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()


def train(config: dict) -> int:
    config = settings(config)
    if config.get("stage", "sft") not in ("sft", "cpt"):
        raise TrainerError(f"training.trainer.sft trains the cpt and sft stages, not {config.get('stage')!r}")
    dist = Distributed()
    output_dir, seed = Path(config["output_dir"]), int(config["seed"])
    watch = CancelWatch(output_dir)
    seed_everything(seed)
    if dist.main:
        write_status(output_dir, "running", error="", stage=config.get("stage", "sft"), world_size=dist.world_size)
    if not config.get("dataset_dir"):
        raise TrainerError("the config has no dataset_dir (the snapshot to train on)")
    dataset = Path(config["dataset_dir"])
    checkpoint = latest_checkpoint(output_dir)
    spec = {"path": str(checkpoint)} if checkpoint else config["model"]
    model, processor = load_model(spec, config["image_max_pixels"], seed=seed)
    samples, skipped = samples_io.load_samples(dataset / "data.jsonl", processor, int(config["max_seq_len"]))
    batch_size, micro = int(config["batch_size"]), int(config["micro_batch_size"])
    total = samples_io.total_steps(len(samples), batch_size, float(config["epochs"]), int(config["max_steps"]))
    per_rank = -(-batch_size // dist.world_size)
    accumulation = max(1, -(-per_rank // micro))   # the same count on every rank (DDP and DeepSpeed need it)
    counts = freeze(model, bool(config["freeze_vision"]), bool(config["freeze_projector"]))
    counts.update(efficiency.configure_model(model, config, dist.device))
    model.to(dist.device).train()
    engine = make_engine(model, dist, config, total, accumulation)
    identity = {"samples": len(samples), "seed": seed, "batch_size": batch_size, "total_steps": total}
    step = 0
    if checkpoint:
        state = load_trainer_state(checkpoint)
        if state.get("identity") != identity:
            raise TrainerError(f"{checkpoint.name} was written for {state.get('identity')}, this run is {identity}: "
                               "the dataset or the batch settings changed; use a new output directory")
        engine.load_state_dict(state, checkpoint)
        set_rng_state(state["rng"])
        step = int(state["step"])
        if dist.main:
            trim_metrics(output_dir, step)
    if dist.main:
        write_status(output_dir, "running", step=step, total_steps=total, samples=len(samples), skipped=skipped,
                     resumed_from=str(checkpoint or ""), **counts)

    def save(at_step: int) -> Path | None:
        weights = engine.full_state_dict()   # every rank takes part in a ZeRO-3 gather
        saved = None
        if dist.main:
            state = {"step": at_step, "rng": rng_state(), "identity": identity, **engine.state_dict()}
            saved = save_checkpoint(output_dir, at_step,
                                    lambda where: save_artifact(engine.model, processor, where, weights), state)
        if hasattr(engine, "save_extra"):
            engine.save_extra(output_dir / f"checkpoint-{at_step}")
        dist.barrier()
        if dist.main:
            write_status(output_dir, "running", step=at_step, checkpoint=str(saved))
        return saved

    plan = samples_io.RankPlan(len(samples), seed, batch_size, micro, dist.rank, dist.world_size, accumulation)
    # Every micro batch from here to the end, encoded and collated ahead by the loader's workers.
    ahead = plan.from_step(step, total)
    batches = efficiency.micro_batch_loader(samples, processor, ahead, int(config["loader_workers"]),
                                            int(config["prefetch"]), packing=bool(config["packing"]))
    vision = efficiency.vision_cache(config)
    started = time.time()
    try:
        while step < total:
            step_started = time.time()
            positions, mine = plan.step(step)
            tokens = sum(samples[p].label_tokens for p in positions)
            nll_total = torch.zeros((), device=dist.device)   # summed on the device: no host sync per micro step
            for index, chunk in enumerate(mine):
                # Ranks agree on a cancel once per optimizer step (an all-reduce is a host sync).
                if (index == 0 or not dist.enabled) and dist.any(watch.requested()):
                    raise Cancelled
                loaded = next(batches)
                with engine.micro_step(last=index == len(mine) - 1), autocast(dist.device):
                    batch = efficiency.model_batch(engine.model, loaded, dist.device, vision)
                    logprobs, _ = samples_io.response_logprobs(engine.model, batch)
                    nll = -logprobs.sum() * (1.0 if chunk else 0.0)
                    # DDP averages gradients over ranks: × world size makes it the batch's token mean.
                    engine.backward(nll * dist.world_size / tokens)
                nll_total += nll.detach()
            lr = engine.lr()
            grad_norm = engine.step()
            step += 1
            loss = dist.sum(float(nll_total)) / tokens   # the step's one host sync
            if dist.main:
                append_metrics(output_dir, {"step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm,
                                            "epoch": step * batch_size / len(samples), "tokens": tokens,
                                            "total_steps": total, "time_s": round(time.time() - started, 3),
                                            "step_s": round(time.time() - step_started, 3)})
                write_status(output_dir, "running", step=step, total_steps=total)
            if step % int(config["save_every"]) == 0 and step < total:
                save(step)
    except Cancelled:
        saved = save(step)
        if dist.main:
            write_status(output_dir, "cancelled", step=step, checkpoint=str(saved))
            watch.consume()
        dist.close()
        return 0
    saved = save(step)
    final_weights = engine.full_state_dict()
    if dist.main:
        save_artifact(engine.model, processor, output_dir / "final", final_weights)
        (output_dir / "final" / "training_run.json").write_text(json.dumps(
            {"stage": config.get("stage", "sft"), "steps": step, "samples": len(samples), "skipped": skipped,
             "config": {key: config[key] for key in DEFAULTS}}, indent=2, sort_keys=True, default=str))
        write_status(output_dir, "done", step=step, checkpoint=str(saved), final=str(output_dir / "final"))
    dist.barrier()
    dist.close()
    return 0


def main(argv=None) -> int:
    return run_main(lambda config: config["output_dir"], train, argv)


if __name__ == "__main__":
    sys.exit(main())
