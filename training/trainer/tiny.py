"""The models the trainer loads: a tiny Qwen2.5-VL built from a config alone (the CPU tests' model; no
download, an offline byte-level tokenizer), or a saved checkpoint directory (a real Qwen2.5-VL, or one
of our own checkpoints), loaded from local files only.

The tiny model's tokenizer: {"tiny": {"vocab": "bytes"}} (the default) has no merges, every byte one
token; {"tiny": {"vocab": "protocol"}} has byte-level BPE merges learnt from the agent protocol's own
text (protocol_corpus.txt: its system prompt, user turns and replies of every action; written from
flywheel.policies.protocol by tests/training/test_tiny_vocab.py, which the trainer may not import), so a
prompt or reply is a quarter to a third as many tokens, short enough for a tiny model to learn to spell.

The processor is Qwen2.5-VL's own with the video processor left out: our samples are screenshots,
and transformers' video processor needs torchvision, which a CPU training host need not have.
Saved artifacts name the stock `Qwen2_5_VLProcessor` so vLLM and LLaMA-Factory load them unchanged.
"""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import torch
import transformers
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2_5_VLProcessor,
    Qwen2TokenizerFast,
)
from transformers.processing_utils import ProcessorMixin

from training.trainer.state import TrainerError

# The PIL/numpy image processor, on every host and in every run: transformers 4 calls it
# Qwen2VLImageProcessor (its "slow" one; a reload picks the torchvision "Fast" one wherever torchvision
# is installed, and pixel values then differ by up to 0.015), transformers 5 Qwen2VLImageProcessorPil
# (its Qwen2VLImageProcessor is the torchvision one). Built, saved and reloaded as this class only.
ImageProcessor = getattr(transformers, "Qwen2VLImageProcessorPil", None) or transformers.Qwen2VLImageProcessor
# Its resize rule, from its own module (transformers 5's torchvision module fails to import without torchvision).
smart_resize = importlib.import_module(ImageProcessor.__module__).smart_resize
# The type name saved artifacts carry: the one both majors load (5.x maps it to its PIL class without torchvision).
SAVED_IMAGE_PROCESSOR_TYPE = "Qwen2VLImageProcessor"

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>")
# Qwen2-VL's chat template (the one shipped with Qwen2-VL/Qwen2.5-VL-Instruct): the text parts in order,
# each image as <|vision_start|><|image_pad|><|vision_end|> (the processor expands the pad per patch).
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
VOCABS = ("bytes", "protocol")
PROTOCOL_CORPUS = Path(__file__).with_name("protocol_corpus.txt")
PROTOCOL_VOCAB_SIZE = 4096   # a ceiling: the corpus runs out of pairs seen twice at about 1,300 (bytes + merges)
TINY_IMAGE_MAX_PIXELS = 112 * 112 * 4   # 224 × 224: about 64 visual tokens per screenshot on CPU
TINY_IMAGE_MIN_PIXELS = 28 * 28 * 4
TINY_TEXT = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "max_position_embeddings": 32768, "tie_word_embeddings": False,
             "rms_norm_eps": 1e-6, "rope_theta": 1000000.0}
TINY_VISION = {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "patch_size": 14,
               "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 112, "fullatt_block_indexes": [1]}


class ModelSpecError(TrainerError, ValueError):
    """The run's "model" (or "reference") cannot be loaded; the message says why."""


class ScreenshotProcessor(Qwen2_5_VLProcessor):
    """Qwen2.5-VL's processor for images and text only (no video processor, hence no torchvision)."""

    attributes = ["image_processor", "tokenizer"]

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        kwargs.pop("video_processor", None)
        self.image_token = getattr(tokenizer, "image_token", None) or "<|image_pad|>"
        self.video_token = getattr(tokenizer, "video_token", None) or "<|video_pad|>"
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
        self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
        self.video_processor = None
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (byte-level BPE's alphabet; transformers 5 no longer
    exports it): printable Latin-1 bytes stand for themselves, the others map to 256 + n in order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    codes, extra = list(printable), 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, codes)))


def byte_level(model: models.BPE) -> Tokenizer:
    backend = Tokenizer(model)
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    return backend


def protocol_bpe() -> Tokenizer:
    """Byte-level BPE with merges learnt from protocol_corpus.txt: the same corpus gives the same merges
    (counts break ties by token id), so a rebuilt tiny model (the RL reference) gets the same ids."""
    backend = byte_level(models.BPE())
    trainer = trainers.BpeTrainer(vocab_size=PROTOCOL_VOCAB_SIZE, min_frequency=2, show_progress=False,
                                  initial_alphabet=list(bytes_to_unicode().values()))
    backend.train_from_iterator([PROTOCOL_CORPUS.read_text(encoding="utf-8")], trainer=trainer)
    return backend


def build_tokenizer(vocab: str = "bytes") -> Qwen2TokenizerFast:
    """A byte-level BPE over the 256 byte symbols (vocab "bytes": no merges, every byte is one token;
    "protocol": merges learnt from the protocol's text) plus Qwen's special tokens, as a
    Qwen2TokenizerFast with the Qwen2-VL chat template."""
    if vocab not in VOCABS:
        raise ModelSpecError(f"the tiny model's vocab is one of {', '.join(VOCABS)}, not {vocab!r}")
    if vocab == "protocol":
        backend = protocol_bpe()
    else:
        backend = byte_level(models.BPE(vocab={symbol: index for index, symbol in
                                               enumerate(bytes_to_unicode().values())}, merges=[]))
    backend.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS])
    tokenizer = Qwen2TokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   unk_token=None, bos_token=None)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def pixel_range(image_processor) -> tuple[int, int]:
    """(min_pixels, max_pixels) of the resize: size's shortest_edge / longest_edge under both majors
    (transformers 5 keeps them there only; 4 also as attributes, which it reads from size)."""
    return int(image_processor.size["shortest_edge"]), int(image_processor.size["longest_edge"])


def set_image_pixels(processor, max_pixels: int | None, min_pixels: int | None = None) -> None:
    image_processor = processor.image_processor
    low, high = pixel_range(image_processor)
    high = int(max_pixels) if max_pixels else high
    low = min(int(min_pixels) if min_pixels else low, high)
    image_processor.size["shortest_edge"], image_processor.size["longest_edge"] = low, high
    for name, value in (("min_pixels", low), ("max_pixels", high)):
        if getattr(image_processor, name, None) is not None:   # transformers 4's copies
            setattr(image_processor, name, value)


def make_processor(image_processor, tokenizer, chat_template: str | None) -> ScreenshotProcessor:
    processor = ScreenshotProcessor(image_processor=image_processor, tokenizer=tokenizer, chat_template=chat_template)
    if not processor.chat_template:
        processor.chat_template = getattr(tokenizer, "chat_template", None) or CHAT_TEMPLATE
    return processor


def build_processor(image_max_pixels: int | None = None, vocab: str = "bytes") -> ScreenshotProcessor:
    image_processor = ImageProcessor(min_pixels=TINY_IMAGE_MIN_PIXELS, max_pixels=TINY_IMAGE_MAX_PIXELS,
                                     patch_size=14, temporal_patch_size=2, merge_size=2)
    processor = make_processor(image_processor, build_tokenizer(vocab), CHAT_TEMPLATE)
    set_image_pixels(processor, image_max_pixels)
    return processor


def load_processor(path: Path) -> ScreenshotProcessor:
    """A saved processor, its image processor as ImageProcessor whatever class the files name (a
    checkpoint of a real Qwen2.5-VL, or one saved where torchvision made it the "Fast" one)."""
    image_processor = ImageProcessor.from_pretrained(path, local_files_only=True)
    tokenizer = Qwen2TokenizerFast.from_pretrained(path, local_files_only=True)
    template, legacy = path / "chat_template.jinja", path / "chat_template.json"   # legacy: older releases' file
    chat_template = template.read_text() if template.is_file() else \
        json.loads(legacy.read_text()).get("chat_template") if legacy.is_file() else None
    return make_processor(image_processor, tokenizer, chat_template)


def tiny_config(tokenizer, overrides: dict | None = None) -> Qwen2_5_VLConfig:
    """The tiny model's config. `overrides` holds text-model keys at the top level (hidden_size,
    num_hidden_layers, ...) and vision keys under "vision_config"."""
    overrides = dict(overrides or {})
    vision = {**TINY_VISION, **(overrides.pop("vision_config", None) or {})}
    text = {**TINY_TEXT, **(overrides.pop("text_config", None) or {}), **overrides}
    vision["out_hidden_size"] = text["hidden_size"]   # the projector feeds the language model
    vision["fullatt_block_indexes"] = [i for i in vision["fullatt_block_indexes"] if i < vision["depth"]] \
        or [vision["depth"] - 1]
    head_dim = text["hidden_size"] // text["num_attention_heads"]
    if head_dim % 2 or head_dim < 8:
        raise ModelSpecError(f"hidden_size / num_attention_heads = {head_dim}: it must be even and at least 8")
    half = head_dim // 2
    temporal = max(1, half // 4)   # Qwen2.5-VL's [16, 24, 24] of 64, scaled to this head size
    height = (half - temporal) // 2
    text["rope_scaling"] = {"type": "mrope", "mrope_section": [temporal, height, half - temporal - height]}
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    text["vocab_size"] = max(text.get("vocab_size", 0), -(-len(tokenizer) // 64) * 64)
    # In the text config too: transformers 5 reads them there, and its defaults are Qwen's real ids.
    text.update(eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"], bos_token_id=None)
    return Qwen2_5_VLConfig(
        text_config=text, vision_config=vision,
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"], bos_token_id=None,
        tie_word_embeddings=False)


def build_tiny(overrides: dict | None = None, image_max_pixels: int | None = None, seed: int = 0,
               vocab: str = "bytes"):
    """(model, processor): a freshly initialised tiny Qwen2.5-VL. The same overrides, vocab and seed give
    the same weights (the RL reference model is rebuilt this way), without touching the global RNG."""
    processor = build_processor(image_max_pixels or TINY_IMAGE_MAX_PIXELS, vocab)
    config = tiny_config(processor.tokenizer, overrides)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2_5_VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    return model, processor


def load_model(spec: dict, image_max_pixels: int | None = None, seed: int = 0, dtype=torch.float32):
    """(model, processor) for a run's "model" or "reference": {"tiny": {...overrides}} or {"path": dir}.
    The tiny spec's own keys (image_max_pixels, seed, vocab) go before the rest, text-model config keys."""
    if not isinstance(spec, dict) or len(spec) != 1 or not ({"tiny", "path"} & set(spec)):
        raise ModelSpecError(f'the model is {{"tiny": {{...}}}} or {{"path": "<checkpoint dir>"}}, not {spec!r}')
    if "tiny" in spec:
        tiny = dict(spec["tiny"] or {})
        pixels = tiny.pop("image_max_pixels", None) or image_max_pixels
        vocab = tiny.pop("vocab", "bytes")
        return build_tiny(tiny, pixels, seed=tiny.pop("seed", seed), vocab=vocab)
    path = Path(spec["path"])
    if not (path / "config.json").is_file():
        raise ModelSpecError(f"no model at {path}: expected a save_pretrained directory with config.json")
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(path, local_files_only=True, dtype=dtype)
    processor = load_processor(path)
    set_image_pixels(processor, image_max_pixels)
    return model, processor


def unwrap(model):
    """The model under DDP / accelerate wrappers."""
    while hasattr(model, "module"):
        model = model.module
    return model


def save_artifact(model, processor, directory: Path, state_dict: dict | None = None) -> Path:
    """save_pretrained of model and processor in a form vLLM / transformers load as stock Qwen2.5-VL."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    unwrap(model).save_pretrained(directory, state_dict=state_dict, safe_serialization=True)
    processor.save_pretrained(directory)
    processor.tokenizer.save_pretrained(directory)   # tokenizer_config.json carries the chat template too
    nested = json.loads((directory / "processor_config.json").read_text()).get("image_processor") \
        if (directory / "processor_config.json").exists() else None
    if nested and not (directory / "preprocessor_config.json").exists():
        # transformers 5 nests the image processor in processor_config.json; 4 (and vLLM on it) reads this file
        (directory / "preprocessor_config.json").write_text(json.dumps(nested))
    for name in ("preprocessor_config.json", "processor_config.json"):
        path = directory / name
        if path.exists():
            data = json.loads(path.read_text())
            data["processor_class"] = Qwen2_5_VLProcessor.__name__
            if "image_processor_type" in data:
                data["image_processor_type"] = SAVED_IMAGE_PROCESSOR_TYPE
            path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return directory
