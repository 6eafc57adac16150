"""A training run's configuration: one JSON Schema per stage, defaults from the report (§5.1).

CPT and SFT (§5.1): frozen vision encoder and projector, lr 1e-5 with warmup 0.05 and cosine decay to
1e-6, batch 128, max sequence length 10240, one epoch. RL (§5.1): lr 1e-6, 8 queries per iteration
× 8 rollouts (the group), λ = 1, at most 20 steps, the 5 most recent frames, prompts capped at 12288
tokens. What the report does not give (clip ε 0.2, KL weight 0.04) takes common GRPO values (DeepSeekMath's).

Validation uses jsonschema (the same library as the query import format); an unknown key is refused
with its name, so a misspelt "lerning_rate" never silently trains with the default.
"""
import copy

import jsonschema

from training.config_paths import config_path_problems
from training.rules.objective import IMPORTANCE_RATIOS
from training.rules.rewards import MAJORITY, REWARD_MODEL, STEP_REWARD_SOURCES

# How the trainer runs, not what it computes (training/trainer/efficiency.py, issue #37).
SPEED = {"attention": "auto", "gradient_checkpointing": False, "loader_workers": 2, "prefetch": 2, "vision_cache": True,
         "precision": "auto", "sharding": "none", "packing": False}
DEFAULTS = {
    "cpt": {"learning_rate": 1e-5, "min_learning_rate": 1e-6, "warmup_ratio": 0.05, "epochs": 1, "max_steps": 0,
            "batch_size": 128, "micro_batch_size": 1, "max_seq_len": 10240, "freeze_vision": True,
            "freeze_projector": True, "save_every": 50, "seed": 0, "image_max_pixels": 200704, **SPEED},
    "rl": {"learning_rate": 1e-6, "min_learning_rate": 1e-6, "warmup_ratio": 0.0, "epochs": 1, "max_steps": 0,
           "batch_size": 512, "micro_batch_size": 1, "max_seq_len": 12288, "freeze_vision": True,
           "freeze_projector": True, "save_every": 50, "seed": 0, "image_max_pixels": 200704,
           "queries_per_iteration": 8, "group_size": 8, "max_rollout_steps": 20, "screenshots_k": 5,
           "lambda": 1.0, "advantage": "grpo", "clip_epsilon": 0.2, "kl_coef": 0.04, "ppo_epochs": 1,
           "importance_ratio": "sequence", "step_reward_source": MAJORITY, "step_reward_model": "",
           "batching": "trajectory",
           "judge_passes": 5, "useful_range": [0.0, 1.0], "fallback_cap": 2, "pi_old_tolerance": 0.05,
           "curriculum": {"progress": None, "iterations": 10, "temperature": 0.25}, **SPEED},
}
DEFAULTS["sft"] = copy.deepcopy(DEFAULTS["cpt"])
# Where a run's model comes from and how it is launched: not hyperparameters, but the same document.
COMMON = {"model": {}, "launcher": "", "nproc": 0, "deepspeed": ""}

_NUMBER = {"type": "number", "exclusiveMinimum": 0}
_COUNT = {"type": "integer", "minimum": 1}

def _between(low, high):
    return {"type": "integer", "minimum": low, "maximum": high}


# The tiny test model's dimensions are capped: it is built in the worker's memory, so a run config asking
# for {"hidden_size": 10**9} must be refused here, not by the machine running out of memory.
_TINY_TEXT = {"hidden_size": _between(8, 1024), "intermediate_size": _between(8, 4096),
              "num_hidden_layers": _between(1, 8), "num_attention_heads": _between(1, 32),
              "num_key_value_heads": _between(1, 32), "max_position_embeddings": _between(64, 131072),
              "vocab_size": _between(1, 262144)}
_TINY_VISION = {"depth": _between(1, 8), "hidden_size": _between(8, 1024), "intermediate_size": _between(8, 4096),
                "num_heads": _between(1, 32)}
_TINY = {"type": "object", "properties": {
    **_TINY_TEXT, "text_config": {"type": "object", "properties": _TINY_TEXT},
    "vision_config": {"type": "object", "properties": _TINY_VISION},
    "image_max_pixels": _between(784, 16777216), "seed": {"type": "integer", "minimum": 0},
    "vocab": {"enum": ["bytes", "protocol"]}}}
_MODEL = {"type": "object", "additionalProperties": False, "maxProperties": 1,
          "properties": {"tiny": _TINY, "path": {"type": "string", "minLength": 1, "maxLength": 400}}}
_PROPERTIES = {
    "learning_rate": _NUMBER, "min_learning_rate": {"type": "number", "minimum": 0},
    "warmup_ratio": {"type": "number", "minimum": 0, "maximum": 1}, "epochs": _NUMBER,
    "max_steps": {"type": "integer", "minimum": 0}, "batch_size": _COUNT, "micro_batch_size": _COUNT,
    "max_seq_len": {"type": "integer", "minimum": 64}, "freeze_vision": {"type": "boolean"},
    "freeze_projector": {"type": "boolean"}, "save_every": _COUNT, "seed": {"type": "integer", "minimum": 0},
    "image_max_pixels": {"type": "integer", "minimum": 784},
    "model": _MODEL, "launcher": {"enum": ["", "torchrun", "accelerate", "llamafactory"]},
    "nproc": {"type": "integer", "minimum": 0, "maximum": 64},   # 0: settings.TRAINING_NPROC
    "deepspeed": {"type": "string", "maxLength": 400},
    "attention": {"enum": ["auto", "sdpa", "flash_attention_2", "eager"]},
    "gradient_checkpointing": {"type": "boolean"},
    "loader_workers": {"type": "integer", "minimum": 0, "maximum": 32},
    "prefetch": {"type": "integer", "minimum": 1, "maximum": 64},
    "vision_cache": {"type": "boolean"},
    "precision": {"enum": ["auto", "bf16", "fp32"]},
    "sharding": {"enum": ["none", "fsdp"]},
    "packing": {"type": "boolean"},
}
_RL_PROPERTIES = {
    "queries_per_iteration": _COUNT, "group_size": {"type": "integer", "minimum": 2},
    "max_rollout_steps": _COUNT, "screenshots_k": _COUNT, "lambda": {"type": "number", "minimum": 0},
    "advantage": {"enum": ["grpo", "gigpo"]}, "clip_epsilon": {"type": "number", "exclusiveMinimum": 0,
                                                              "exclusiveMaximum": 1},
    "kl_coef": {"type": "number", "minimum": 0}, "ppo_epochs": _COUNT, "judge_passes": _COUNT,
    # Eq. 6's ratio per response (GSPO) or per token (GRPO): training/rules/objective.step_term.
    "importance_ratio": {"enum": list(IMPORTANCE_RATIOS)},
    # Where the step rewards come from: eq. 4's majority or Xiaomi-GUI-0 §4.3's cascade (training/step_judge.py).
    "step_reward_source": {"enum": list(STEP_REWARD_SOURCES)},
    # The step reward model version (its name) when the source is reward_model (ClawGUI §3.2).
    "step_reward_model": {"type": "string", "maxLength": 200},
    # The update's micro-batches: a trajectory's turns in order, or turns across trajectories (Xiaomi-GUI-0 §4.4).
    "batching": {"enum": ["trajectory", "turn"]},   # the trainer's own copy: training/trainer/turns.BATCHINGS
    "useful_range": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1},
                     "minItems": 2, "maxItems": 2},
    "fallback_cap": {"type": "integer", "minimum": 0},
    "pi_old_tolerance": _NUMBER,   # nats per token the sampler's log-probs may differ from π_old's
    "curriculum": {"type": "object", "additionalProperties": False, "properties": {
        "progress": {"type": ["number", "null"], "minimum": 0, "maximum": 1}, "iterations": _COUNT,
        "temperature": _NUMBER}},
    "rl_run": {"type": "integer", "minimum": 1},
    "reference": _MODEL,
}


# The one way every message writes where a run's weights come from.
MODEL_EXAMPLE = ('{"model": {"path": "/models/<weights>"}} for weights on disk, '
                 'or {"model": {"tiny": {}}} for the small test model built from the configuration')


class ConfigError(ValueError):
    """A configuration the run cannot start with; the message names the key."""


def schema(stage: str) -> dict:
    properties = dict(_PROPERTIES)
    if stage == "rl":
        properties.update(_RL_PROPERTIES)
    return {"type": "object", "additionalProperties": False, "properties": properties}


def validate_config(stage: str, raw) -> dict:
    """The run's full configuration (defaults filled in), or ConfigError naming what is wrong."""
    if stage not in DEFAULTS:
        raise ConfigError(f"unknown stage {stage!r}: one of {', '.join(DEFAULTS)}")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("the configuration is a JSON object of settings")
    unknown = sorted(set(raw) - set(schema(stage)["properties"]))
    misplaced = [key for key in unknown if key in _MODEL["properties"]]
    if misplaced:  # {"tiny": {}} at the top: it names the model, so it goes under "model"
        raise ConfigError(f"{misplaced[0]!r} names the model and goes under \"model\": {MODEL_EXAMPLE}")
    if unknown:
        known = ", ".join(sorted(schema(stage)["properties"]))
        raise ConfigError(f"unknown configuration key {unknown[0]!r} for a {stage} run (known keys: {known})")
    try:
        jsonschema.validate(raw, schema(stage))
    except jsonschema.ValidationError as error:
        where = ".".join(str(part) for part in error.absolute_path) or "configuration"
        raise ConfigError(f"{where}: {error.message}") from None
    outside = config_path_problems(raw)
    if outside:
        raise ConfigError("{}: {}".format(*outside[0]))
    config = {**copy.deepcopy(COMMON), **copy.deepcopy(DEFAULTS[stage]), **copy.deepcopy(raw)}
    if stage == "rl":
        config["curriculum"] = {**DEFAULTS["rl"]["curriculum"], **(raw.get("curriculum") or {})}
        if (config["step_reward_source"] == REWARD_MODEL) != bool(config["step_reward_model"]):
            raise ConfigError("step_reward_model: name the trained step reward model version that rates the steps "
                              "when step_reward_source is reward_model" if config["step_reward_source"] == REWARD_MODEL
                              else "step_reward_model: a reward model rates the steps only when step_reward_source "
                                   "is reward_model")
        low, high = config["useful_range"]
        if low > high:
            raise ConfigError(f"useful_range: the low end {low} is above the high end {high}")
    if config["min_learning_rate"] > config["learning_rate"]:
        raise ConfigError("min_learning_rate is above learning_rate")
    if config["micro_batch_size"] > config["batch_size"]:
        raise ConfigError("micro_batch_size is above batch_size")
    return config
