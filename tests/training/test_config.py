"""A run's configuration: the report's defaults, unknown keys refused by name."""
import json
import re

import pytest

from training.config import DEFAULTS, ConfigError, validate_config
from training.launch import LaunchError, llamafactory_config, printable, trainer_command, write_launch_files


def test_defaults_are_the_reports():
    sft = validate_config("sft", {})
    assert (sft["learning_rate"], sft["min_learning_rate"], sft["warmup_ratio"]) == (1e-5, 1e-6, 0.05)
    assert (sft["batch_size"], sft["max_seq_len"], sft["epochs"]) == (128, 10240, 1)
    assert sft["freeze_vision"] and sft["freeze_projector"]
    rl = validate_config("rl", {})
    assert (rl["learning_rate"], rl["group_size"], rl["queries_per_iteration"], rl["lambda"]) == (1e-6, 8, 8, 1.0)
    assert (rl["max_rollout_steps"], rl["screenshots_k"], rl["max_seq_len"]) == (20, 5, 12288)


def test_an_unknown_key_is_refused_by_name():
    with pytest.raises(ConfigError, match="'lerning_rate'"):
        validate_config("sft", {"lerning_rate": 1e-4})
    with pytest.raises(ConfigError, match="'group_size'"):  # an RL key is unknown to SFT
        validate_config("sft", {"group_size": 4})
    with pytest.raises(ConfigError, match="'tiny_model'"):
        validate_config("sft", {"model": {"tiny_model": {}}})


def test_a_model_key_at_the_top_gets_one_message_whose_example_works():
    with pytest.raises(ConfigError) as refused:
        validate_config("sft", {"tiny": {}})
    message = str(refused.value)
    assert "unknown configuration key" not in message and "'tiny' names the model" in message
    # Every {"model": ...} example the message gives is itself accepted (no advice that fails next).
    examples = re.findall(r'\{"model": \{.*?\}\}(?!\})', message)
    assert '{"model": {"tiny": {}}}' in examples and len(examples) == 2
    for example in examples:
        assert validate_config("sft", json.loads(example.replace("<weights>", "w")))["model"]
    with pytest.raises(ConfigError, match="'path' names the model"):
        validate_config("rl", {"path": "/models/x"})


@pytest.mark.parametrize("raw, words", [
    ({"learning_rate": -1}, "learning_rate"),
    ({"batch_size": "128"}, "batch_size"),
    ({"launcher": "slurm"}, "launcher"),
    ({"min_learning_rate": 1e-3}, "min_learning_rate is above"),
    ({"micro_batch_size": 256}, "micro_batch_size is above"),
])
def test_bad_values_say_which_key(raw, words):
    with pytest.raises(ConfigError, match=words):
        validate_config("cpt", raw)


def test_rl_specific_checks():
    with pytest.raises(ConfigError, match="advantage"):
        validate_config("rl", {"advantage": "ppo"})
    with pytest.raises(ConfigError, match="low end"):
        validate_config("rl", {"useful_range": [0.8, 0.2]})
    assert validate_config("rl", {"advantage": "gigpo"})["advantage"] == "gigpo"
    assert validate_config("rl", {"curriculum": {"progress": 0.5}})["curriculum"] == {"progress": 0.5, "iterations": 10,
                                                                                       "temperature": 0.25}
    with pytest.raises(ConfigError):
        validate_config("dpo", {})
    with pytest.raises(ConfigError):
        validate_config("sft", ["not", "a", "dict"])


def test_the_step_reward_source_and_the_batching_are_rl_keys():
    rl = validate_config("rl", {})
    assert (rl["step_reward_source"], rl["batching"]) == ("majority", "trajectory")   # what RL did before
    chosen = validate_config("rl", {"step_reward_source": "cascade", "batching": "turn"})
    assert (chosen["step_reward_source"], chosen["batching"]) == ("cascade", "turn")
    with pytest.raises(ConfigError, match="step_reward_model: name the trained step reward model"):
        validate_config("rl", {"step_reward_source": "reward_model"})
    with pytest.raises(ConfigError, match="only when step_reward_source is reward_model"):
        validate_config("rl", {"step_reward_model": "prm-1"})
    named = validate_config("rl", {"step_reward_source": "reward_model", "step_reward_model": "prm-1"})
    assert (named["step_reward_source"], named["step_reward_model"]) == ("reward_model", "prm-1")
    with pytest.raises(ConfigError, match="step_reward_source"):
        validate_config("rl", {"step_reward_source": "vote"})
    with pytest.raises(ConfigError, match="batching"):
        validate_config("rl", {"batching": "episode"})
    with pytest.raises(ConfigError, match="'batching'"):   # the update's key: unknown to SFT
        validate_config("sft", {"batching": "turn"})


def test_defaults_are_not_shared_between_runs():
    first = validate_config("rl", {})
    first["curriculum"]["progress"] = 0.9
    assert DEFAULTS["rl"]["curriculum"]["progress"] is None


def test_launch_commands_are_argument_lists(tmp_path):
    config_path = tmp_path / "config.json"
    torchrun = trainer_command("sft", config_path, "torchrun", nproc=8)
    assert torchrun[0].endswith("torchrun") and "--nproc_per_node=8" in torchrun
    assert torchrun[-4:] == ["-m", "training.trainer.sft", "--config", str(config_path)]
    accelerate = trainer_command("cpt", config_path, "accelerate", nproc=4, deepspeed="/etc/ds/zero2.json")
    assert accelerate[1:4] == ["launch", "--num_processes", "4"]
    assert ["--use_deepspeed", "--deepspeed_config_file", "/etc/ds/zero2.json"] == accelerate[4:7]
    assert trainer_command("rl", config_path)[-3] == "training.trainer.rl"
    with pytest.raises(LaunchError, match="verl"):
        trainer_command("rl", config_path, "llamafactory")
    # a path with a space stays one argument; printed, it is quoted
    assert "'/data/my runs/config.json'" in printable(trainer_command("sft", "/data/my runs/config.json"))


def test_llamafactory_config_follows_the_run(tmp_path):
    config = validate_config("sft", {"model": {"path": "/models/qwen2.5-vl-7b"}, "nproc": 4, "batch_size": 128,
                                     "micro_batch_size": 2, "launcher": "llamafactory", "max_steps": 10})
    config.update(dataset_dir=str(tmp_path / "snap"), output_dir=str(tmp_path / "run"), stage="sft")
    generated = llamafactory_config(config, "flywheel_sft_3")
    assert generated["dataset"] == "flywheel_sft_3" and generated["template"] == "qwen2_vl"
    assert generated["freeze_vision_tower"] and generated["freeze_multi_modal_projector"]
    assert generated["gradient_accumulation_steps"] == 16  # 128 / (2 per device × 4 devices)
    assert generated["lr_scheduler_kwargs"] == {"min_lr": 1e-6} and generated["max_steps"] == 10
    # the trainer's speed settings (issue #37) in LLaMA-Factory's words
    assert (generated["flash_attn"], generated["disable_gradient_checkpointing"]) == ("auto", True)
    assert (generated["dataloader_num_workers"], generated["dataloader_prefetch_factor"]) == (2, 2)
    eager = llamafactory_config({**config, "attention": "eager", "gradient_checkpointing": True, "loader_workers": 0},
                                "flywheel_sft_3")
    assert (eager["flash_attn"], eager["disable_gradient_checkpointing"]) == ("disabled", False)
    assert eager["dataloader_num_workers"] == 0 and "dataloader_prefetch_factor" not in eager
    with pytest.raises(ConfigError, match="attention"):
        validate_config("sft", {"attention": "fast"})
    assert "packing" not in generated and llamafactory_config({**config, "packing": True}, "x")["neat_packing"]
    assert generated["bf16"] and not llamafactory_config({**config, "precision": "fp32"}, "flywheel_sft_3")["bf16"]
    path = write_launch_files(config, tmp_path / "run", "flywheel_sft_3")
    assert (tmp_path / "run" / "llamafactory.yaml").read_text().startswith("model_name_or_path: /models/qwen2.5-vl-7b")
    assert path.name == "config.json"
    config["model"] = {"tiny": {}}
    with pytest.raises(LaunchError, match="model path"):
        write_launch_files(config, tmp_path / "run2", "x")
