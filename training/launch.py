"""How a run reaches its engine: torchrun or accelerate (DeepSpeed) over training/trainer, or a
generated LLaMA-Factory config handed to `llamafactory-cli` (report §5.1's runs at scale).

Commands are argument lists run without a shell: nothing of a config or a snapshot becomes shell text.
"""
import json
import shlex
import shutil
import sys
from pathlib import Path

import yaml

TRAINER_MODULES = {"cpt": "training.trainer.sft", "sft": "training.trainer.sft", "rl": "training.trainer.rl"}
LAUNCHERS = ("torchrun", "accelerate", "llamafactory")


class LaunchError(RuntimeError):
    """The run cannot be handed to its engine on this worker; the message says how to fix it."""


def _tool(name: str) -> str:
    """The launcher beside this interpreter (the venv's), else on PATH."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise LaunchError(f"{name} is not installed on this worker: install the training extras "
                          f"(make install-training, or pip install -r requirements-training.txt)")
    return found


def trainer_command(stage: str, config_path: Path, launcher: str = "torchrun", nproc: int = 1,
                    deepspeed: str = "") -> list[str]:
    module = TRAINER_MODULES[stage]
    nproc = max(1, int(nproc or 1))
    if launcher == "torchrun":
        return [_tool("torchrun"), "--standalone", f"--nproc_per_node={nproc}", "-m", module,
                "--config", str(config_path)]
    if launcher == "accelerate":
        command = [_tool("accelerate"), "launch", "--num_processes", str(nproc)]
        if deepspeed:
            command += ["--use_deepspeed", "--deepspeed_config_file", deepspeed]
        return command + ["-m", module, "--config", str(config_path)]
    if launcher == "llamafactory":
        if stage == "rl":
            raise LaunchError("LLaMA-Factory does not run agentic RL: use torchrun, or hand the RL export "
                              "(train.parquet, rollouts) to verl")
        return [_tool("llamafactory-cli"), "train", str(Path(config_path).with_name("llamafactory.yaml"))]
    raise LaunchError(f"unknown launcher {launcher!r}: one of {', '.join(LAUNCHERS)}")


def printable(command: list[str]) -> str:
    return shlex.join(command)


LLAMAFACTORY_ATTENTION = {"auto": "auto", "sdpa": "sdpa", "flash_attention_2": "fa2", "eager": "disabled"}


def llamafactory_config(config: dict, dataset_name: str) -> dict:
    """LLaMA-Factory's train YAML for the same run: full fine-tuning of the language model with the
    vision tower and projector frozen, the snapshot's dataset_info.json entry, the §5.1 schedule.
    CPT uses stage "sft" too: its samples are screenshot–action chat pairs, not raw text."""
    world = max(1, int(config.get("nproc") or 1))
    accumulation = max(1, config["batch_size"] // (config["micro_batch_size"] * world))
    model = config["model"]
    result = {
        "model_name_or_path": model.get("path", ""),
        "trust_remote_code": False,
        "stage": "sft", "do_train": True, "finetuning_type": "full",
        "freeze_vision_tower": bool(config["freeze_vision"]),
        "freeze_multi_modal_projector": bool(config["freeze_projector"]),
        "dataset_dir": config["dataset_dir"], "dataset": dataset_name, "template": "qwen2_vl",
        "cutoff_len": config["max_seq_len"], "image_max_pixels": config["image_max_pixels"],
        "per_device_train_batch_size": config["micro_batch_size"],
        "gradient_accumulation_steps": accumulation,
        "learning_rate": config["learning_rate"], "num_train_epochs": float(config["epochs"]),
        "lr_scheduler_type": "cosine_with_min_lr", "lr_scheduler_kwargs": {"min_lr": config["min_learning_rate"]},
        "warmup_ratio": config["warmup_ratio"], "bf16": config.get("precision", "auto") != "fp32",
        "seed": config["seed"],
        "output_dir": config["output_dir"], "save_steps": config["save_every"], "logging_steps": 1,
        "plot_loss": True, "overwrite_output_dir": False, "report_to": "none",
    }
    # The trainer's speed settings in LLaMA-Factory's words (its own default checkpoints gradients).
    result["flash_attn"] = LLAMAFACTORY_ATTENTION[config.get("attention", "auto")]
    result["disable_gradient_checkpointing"] = not config.get("gradient_checkpointing", False)
    if config.get("packing"):   # neat packing: no attention across the packed samples, as our trainer
        result.update(packing=True, neat_packing=True)
    result["dataloader_num_workers"] = int(config.get("loader_workers", 0))
    if result["dataloader_num_workers"]:
        result["dataloader_prefetch_factor"] = int(config.get("prefetch", 2))
    if config.get("max_steps"):
        result["max_steps"] = config["max_steps"]
    if config.get("deepspeed"):
        result["deepspeed"] = config["deepspeed"]
    return result


def write_launch_files(config: dict, run_dir: Path, dataset_name: str = "") -> Path:
    """config.json for our trainer (and llamafactory.yaml when that is the launcher); the config path."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "config.json"
    path.write_text(json.dumps(config, indent=2, sort_keys=True))
    if config.get("launcher") == "llamafactory":
        if not config["model"].get("path"):
            raise LaunchError("LLaMA-Factory needs a model path (\"model\": {\"path\": ...}); a tiny model "
                              "built from a config is our trainer's test model")
        (run_dir / "llamafactory.yaml").write_text(yaml.safe_dump(llamafactory_config(config, dataset_name),
                                                                  sort_keys=False))
    return path
