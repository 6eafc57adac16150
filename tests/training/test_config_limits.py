"""A run config cannot point the trainer outside the model and artifact roots, nor ask for absurd sizes
(issue #35): model, reference and DeepSpeed paths lie under settings.TRAINING_MODEL_ROOTS or
TRAINING_ROOT; nproc is at most 64; the tiny model's dimensions are bounded."""
import pytest

from training.config import ConfigError, validate_config
from training.config_paths import path_problem

ROOTS = ["/models", "/srv/training"]


@pytest.fixture(autouse=True)
def roots(settings, tmp_path):
    settings.TRAINING_MODEL_ROOTS = ["/models"]
    settings.TRAINING_ROOT = tmp_path / "training"
    return settings


@pytest.mark.parametrize("raw", [
    {"model": {"path": "/models/Qwen2.5-VL-7B-Instruct"}},
    {"model": {"path": "/models//qwen/./final"}},
    {"model": {"tiny": {}}, "reference": {"tiny": {}}, "nproc": 64},
    {"model": {"tiny": {"hidden_size": 16, "num_attention_heads": 1, "num_key_value_heads": 1,
                        "intermediate_size": 32, "num_hidden_layers": 1}}},
    {"model": {"tiny": {"vocab": "protocol", "hidden_size": 128, "intermediate_size": 256, "rope_theta": 10000}}},
    {"nproc": 0},   # 0: the TRAINING_NPROC setting
])
def test_valid_configs_still_pass(raw):
    assert validate_config("rl" if "reference" in raw else "sft", raw)


def test_a_checkpoint_under_the_training_root_is_allowed(roots):
    checkpoint = str(roots.TRAINING_ROOT / "runs" / "3" / "final")
    config = validate_config("rl", {"model": {"path": checkpoint}, "reference": {"path": checkpoint},
                                    "deepspeed": str(roots.TRAINING_ROOT / "ds" / "zero2.json")})
    assert config["model"] == {"path": checkpoint}


@pytest.mark.parametrize("stage, raw, words", [
    ("sft", {"model": {"path": "/etc"}}, "model.path: /etc is outside the model and artifact roots"),
    ("sft", {"model": {"path": "/models/../etc/shadow"}}, "model.path: /models/../etc/shadow may not contain '..'"),
    ("sft", {"model": {"path": "models/qwen"}}, "model.path: models/qwen must be an absolute path"),
    ("sft", {"model": {"path": "/models-evil/qwen"}}, "outside the model and artifact roots"),
    ("rl", {"reference": {"path": "/home/someone/weights"}}, "reference.path: /home/someone/weights is outside"),
    ("sft", {"deepspeed": "/tmp/ds.json"}, "deepspeed: /tmp/ds.json is outside"),
    ("sft", {"deepspeed": "../../ds.json"}, "deepspeed: ../../ds.json may not contain '..'"),
])
def test_a_path_outside_the_roots_is_refused_by_key(stage, raw, words):
    with pytest.raises(ConfigError) as refused:
        validate_config(stage, raw)
    assert words in str(refused.value)


@pytest.mark.parametrize("raw, words", [
    ({"nproc": 65}, "nproc"),
    ({"nproc": -1}, "nproc"),
    ({"model": {"tiny": {"hidden_size": 1 << 20}}}, "model.tiny.hidden_size"),
    ({"model": {"tiny": {"num_hidden_layers": 1000}}}, "model.tiny.num_hidden_layers"),
    ({"model": {"tiny": {"intermediate_size": 0}}}, "model.tiny.intermediate_size"),
    ({"model": {"tiny": {"vision_config": {"depth": 500}}}}, "model.tiny.vision_config.depth"),
    ({"model": {"tiny": {"text_config": {"num_attention_heads": 4096}}}}, "model.tiny.text_config"),
    ({"model": {"tiny": {"image_max_pixels": 10**9}}}, "model.tiny.image_max_pixels"),
    ({"model": {"tiny": {"vocab": "words"}}}, "model.tiny.vocab"),
])
def test_sizes_have_caps(raw, words):
    with pytest.raises(ConfigError, match=words.replace(".", r"\.")):
        validate_config("sft", raw)


def test_the_path_rule_alone():
    assert path_problem("/models/a", ROOTS) == "" and path_problem("/srv/training/runs/1", ROOTS) == ""
    assert path_problem("/models", ROOTS) == ""
    assert "outside" in path_problem("/srv/trainingX/a", ROOTS)


def test_a_link_inside_a_root_that_points_outside_every_root_is_refused(tmp_path):
    root, outside = tmp_path / "models", tmp_path / "home"
    root.mkdir(), outside.mkdir()
    (root / "weights").mkdir()
    (root / "escape").symlink_to(outside)
    assert path_problem(str(root / "weights"), [str(root)]) == ""
    assert "links to" in path_problem(str(root / "escape"), [str(root)])
    assert path_problem(str(root / "not-on-this-machine"), [str(root)]) == ""  # a trainer's own disk: by name
