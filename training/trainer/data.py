"""Samples for the trainer: an export's data.jsonl (or an RL run's rollouts.jsonl) as Qwen2.5-VL inputs
with the loss on the response tokens only (report eq. 1), in a deterministic order from the seed.

One sample = one step: the prompt (system prompt, goal, history, the last K screenshots as "<image>"
placeholders, oldest first) and the assistant's response (the five tags and the action). The prompt
and the response are tokenized apart and concatenated, as LLaMA-Factory does, so the label mask is
exact: -100 on every prompt token (image tokens included), the response tokens and the closing
<|im_end|> labelled. A sample longer than max_seq_len is skipped and counted, never cut: cutting
would drop image tokens or the action the loss is about.
"""
from __future__ import annotations

import json
import math
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
from PIL import Image, UnidentifiedImageError

from training.trainer.state import TrainerError
from training.trainer.tiny import pixel_range, smart_resize

IMAGE_PLACEHOLDER = "<image>"
IGNORE_INDEX = -100


class DatasetError(TrainerError, ValueError):
    """The dataset cannot be trained on; the message says what is wrong."""


@dataclass
class Sample:
    position: int            # line number in the file, from 0
    prompt: list             # Qwen messages before the response
    response: str
    images: list             # absolute paths, oldest first
    length: int              # tokens, image tokens included
    label_tokens: int        # tokens the loss is taken on (response + <|im_end|>)
    record: dict             # the line as read (RL rows carry advantage, group, ...)


def read_jsonl(path: Path, empty: str = "the snapshot has no samples") -> list[dict]:
    path = Path(path)
    if not path.parent.is_dir():
        raise DatasetError(f"the dataset directory {path.parent} does not exist")
    if not path.is_file():
        raise DatasetError(f"no {path.name} in {path.parent}")
    records = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as error:
                raise DatasetError(f"{path.name} line {number} is not JSON: {error}") from None
            if not isinstance(record, dict):
                raise DatasetError(f"{path.name} line {number} is not a JSON object")
            records.append(record)
    if not records:
        raise DatasetError(empty)
    return records


def _content(text: str, role: str) -> list[dict]:
    """A message's text as Qwen content parts: "<image>" placeholders become image parts, in order."""
    if role != "user":
        return [{"type": "text", "text": text}]
    parts = []
    for index, piece in enumerate(text.split(IMAGE_PLACEHOLDER)):
        if index:
            parts.append({"type": "image"})
        if piece:
            parts.append({"type": "text", "text": piece})
    return parts


def split_record(record: dict, number: int) -> tuple[list[dict], str, list[str]]:
    """(prompt messages in Qwen form, response text, image paths as written) of one line: an export
    sample ends with the assistant turn; an RL rollout row has the prompt and a separate "response"."""
    messages = record.get("messages")
    if not isinstance(messages, list) or not messages:
        raise DatasetError(f"sample {number} has no messages")
    if "response" in record:
        prompt, response = messages, record["response"]
    elif messages[-1].get("role") == "assistant":
        prompt, response = messages[:-1], messages[-1].get("content")
    else:
        raise DatasetError(f"sample {number} does not end with an assistant message")
    if not isinstance(response, str) or not response:
        raise DatasetError(f"sample {number} has an empty response")
    images = record.get("images") or []
    placeholders = sum(str(message.get("content", "")).count(IMAGE_PLACEHOLDER) for message in prompt)
    if placeholders != len(images):
        raise DatasetError(f"sample {number} has {placeholders} <image> placeholders for {len(images)} images")
    qwen = [{"role": message["role"], "content": _content(str(message.get("content", "")), message["role"])}
            for message in prompt]
    return qwen, response, images


def image_tokens(path: Path, image_processor) -> int:
    """Visual tokens of one screenshot after the processor's resize (without decoding its pixels)."""
    with Image.open(path) as image:
        width, height = image.size
        image.verify()
    patch, merge = image_processor.patch_size, image_processor.merge_size
    low, high = pixel_range(image_processor)
    resized_h, resized_w = smart_resize(height, width, factor=patch * merge, min_pixels=low, max_pixels=high)
    return (resized_h // patch) * (resized_w // patch) // (merge * merge)


def index_samples(records: list[dict], base_dir: Path, processor, max_seq_len: int) -> tuple[list[Sample], dict]:
    """The trainable samples with their exact lengths, and what was skipped and why (counts)."""
    tokenizer = processor.tokenizer
    samples, skipped = [], {"too_long": 0, "bad_image": 0}
    for number, record in enumerate(records):
        prompt, response, images = split_record(record, number)
        paths = [Path(base_dir) / image for image in images]
        try:
            visual = sum(image_tokens(path, processor.image_processor) for path in paths)
        except (OSError, UnidentifiedImageError, ValueError, SyntaxError):
            skipped["bad_image"] += 1   # a corrupt or missing screenshot: the sample cannot be shown
            continue
        text = processor.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        # Each image is one <|image_pad|> in the text; the processor expands it to `visual` tokens.
        prompt_len = len(tokenizer(text, add_special_tokens=False).input_ids) - len(paths) + visual
        label_tokens = len(tokenizer(response, add_special_tokens=False).input_ids) + 1
        if prompt_len + label_tokens > max_seq_len:
            skipped["too_long"] += 1
            continue
        samples.append(Sample(number, prompt, response, paths, prompt_len + label_tokens, label_tokens, record))
    return samples, skipped


def load_samples(path: Path, processor, max_seq_len: int,
                 empty: str = "the snapshot has no samples") -> tuple[list[Sample], dict]:
    """Read and index a jsonl file whose image paths are relative to its directory."""
    records = read_jsonl(path, empty)
    samples, skipped = index_samples(records, Path(path).parent, processor, max_seq_len)
    if not samples:
        raise DatasetError(f"none of the {len(records)} samples can be trained on: {skipped['too_long']} exceed "
                           f"max_seq_len={max_seq_len}, {skipped['bad_image']} have a missing or corrupt image")
    return samples, skipped


class ScreenshotCache:
    """Each screenshot decoded and preprocessed once per trainer process, however many samples show it
    (with K screenshots a step's screen is in up to K samples) and however many epochs see it: decoding
    a phone-sized PNG and resizing it was over half of a CPU trainer's step. Keyed by path (an export's
    images are named by their content's hash); the least recently used are dropped past max_bytes."""

    def __init__(self, max_bytes: int = 2 << 30):
        self.max_bytes, self.bytes = max_bytes, 0
        self._entries: OrderedDict[str, tuple[torch.Tensor, torch.Tensor]] = OrderedDict()
        self.hits = self.misses = 0

    def processed(self, path: Path, image_processor) -> tuple[torch.Tensor, torch.Tensor]:
        """(pixel_values, image_grid_thw) of one screenshot, as the processor makes them."""
        key = str(path)
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            self.hits += 1
            return entry
        self.misses += 1
        with Image.open(path) as image:
            out = image_processor(images=[image.convert("RGB")], return_tensors="pt")
        entry = (out["pixel_values"], out["image_grid_thw"])
        self._entries[key] = entry
        self.bytes += entry[0].element_size() * entry[0].nelement()
        while self.bytes > self.max_bytes and len(self._entries) > 1:   # the newest is kept: it is in use
            _, (pixels, _) = self._entries.popitem(last=False)
            self.bytes -= pixels.element_size() * pixels.nelement()
        return entry


def _prompt_from_cache(text: str, sample: Sample, processor, screenshots: ScreenshotCache) -> dict:
    """What processor(text, images) returns, from cached screenshots: each image's one pad token in
    the text expanded to its visual tokens (grid t·h·w / merge²), as the processor expands it."""
    processed = [screenshots.processed(path, processor.image_processor) for path in sample.images]
    image_token = getattr(processor, "image_token", "<|image_pad|>")
    pad_id = processor.tokenizer.convert_tokens_to_ids(image_token)
    merge = processor.image_processor.merge_size ** 2
    counts = iter(int(grid.prod()) // merge for _, grid in processed)
    ids = []
    for token in processor.tokenizer(text).input_ids:
        ids.extend([pad_id] * next(counts) if token == pad_id else [token])
    prompt = {"input_ids": torch.tensor([ids], dtype=torch.long)}
    if processed:
        prompt["pixel_values"] = torch.cat([pixels for pixels, _ in processed])
        prompt["image_grid_thw"] = torch.cat([grid for _, grid in processed])
    return prompt


def encode(sample: Sample, processor, screenshots: ScreenshotCache | None = None) -> dict:
    """input_ids / labels (1-D) and the images' pixel_values / image_grid_thw for one sample; with
    `screenshots`, each screenshot is preprocessed once per process (the same tensors)."""
    tokenizer = processor.tokenizer
    text = processor.apply_chat_template(sample.prompt, tokenize=False, add_generation_prompt=True)
    if screenshots is not None:
        prompt = _prompt_from_cache(text, sample, processor, screenshots)
    else:
        images = []
        for path in sample.images:
            with Image.open(path) as image:
                images.append(image.convert("RGB"))
        prompt = processor(text=[text], images=images or None, return_tensors="pt")
    response = tokenizer(sample.response, add_special_tokens=False).input_ids
    response.append(tokenizer.convert_tokens_to_ids("<|im_end|>"))
    prompt_ids = prompt["input_ids"][0]
    input_ids = torch.cat([prompt_ids, torch.tensor(response, dtype=prompt_ids.dtype)])
    labels = torch.cat([torch.full_like(prompt_ids, IGNORE_INDEX), torch.tensor(response, dtype=prompt_ids.dtype)])
    if len(input_ids) != sample.length:   # the index's arithmetic must be the processor's
        raise DatasetError(f"sample {sample.position}: {len(input_ids)} tokens, indexed as {sample.length}")
    encoded = {"input_ids": input_ids, "labels": labels}
    if sample.images:
        encoded["pixel_values"] = prompt["pixel_values"]
        encoded["image_grid_thw"] = prompt["image_grid_thw"]
        encoded["image_keys"] = [str(path) for path in sample.images]   # what the screenshots are (a cache key)
    return encoded


def with_images(batch: dict, encoded: list[dict]) -> dict:
    """The samples' screenshots added to a batch, concatenated in sample order (as Qwen2.5-VL expects)."""
    shown = [item for item in encoded if "pixel_values" in item]
    if shown:
        batch["pixel_values"] = torch.cat([item["pixel_values"] for item in shown])
        batch["image_grid_thw"] = torch.cat([item["image_grid_thw"] for item in shown])
        batch["image_keys"] = [key for item in shown for key in item.get("image_keys", [])]
    return batch


def collate(encoded: list[dict], pad_token_id: int) -> dict:
    """A right-padded batch; images concatenated in sample order (as Qwen2.5-VL expects)."""
    length = max(len(item["input_ids"]) for item in encoded)
    input_ids = torch.full((len(encoded), length), pad_token_id, dtype=torch.long)
    labels = torch.full((len(encoded), length), IGNORE_INDEX, dtype=torch.long)
    attention_mask = torch.zeros((len(encoded), length), dtype=torch.long)
    for row, item in enumerate(encoded):
        size = len(item["input_ids"])
        input_ids[row, :size], labels[row, :size], attention_mask[row, :size] = item["input_ids"], item["labels"], 1
    # The positions whose logits are needed (position p predicts p + 1), found here on the CPU: on the
    # device, nonzero() would wait for the GPU at every forward.
    batch = {"input_ids": input_ids, "labels": labels, "attention_mask": attention_mask,
             "logits_at": logits_positions(labels)}
    return with_images(batch, encoded)


def pack(encoded: list[dict]) -> dict:
    """Several samples in one row (sequence packing): their tokens end to end, no padding and no
    attention mask. Their positions are set by efficiency.packed_positions, restarting at 0 for each
    sample, and from those the model keeps each sample's attention to itself (FlashAttention-2's
    variable-length kernel on a GPU, a block-causal mask otherwise). A sample's last token never
    predicts the next sample's first: that one is a prompt token, never labelled."""
    batch = {"input_ids": torch.cat([item["input_ids"] for item in encoded])[None],
             "labels": torch.cat([item["labels"] for item in encoded])[None],
             "sample_lengths": torch.tensor([len(item["input_ids"]) for item in encoded]),
             "sample_images": torch.tensor([len(item.get("image_grid_thw", [])) for item in encoded])}
    batch["logits_at"] = logits_positions(batch["labels"])
    return with_images(batch, encoded)


@lru_cache(maxsize=4)   # a step reads one or two epochs; kept, not recomputed per micro batch (not to be mutated)
def epoch_order(count: int, seed: int, epoch: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(count, generator=generator).tolist()


def global_batch(count: int, seed: int, step: int, batch_size: int) -> list[int]:
    """The sample positions of optimizer step `step` (from 0): the stream of per-epoch permutations cut
    into batches of `batch_size`, so step s is the same whatever happened before it (exact resume)."""
    start, positions = step * batch_size, []
    while len(positions) < batch_size:
        epoch, offset = divmod(start + len(positions), count)
        order = epoch_order(count, seed, epoch)
        positions.extend(order[offset:offset + batch_size - len(positions)])
    return positions


def shard(positions: list[int], rank: int, world_size: int) -> list[int]:
    """This rank's share of a global batch (DistributedSampler's interleaving)."""
    return positions[rank::world_size]


def micro_batches(positions: list[int], micro_batch_size: int) -> list[list[int]]:
    return [positions[i:i + micro_batch_size] for i in range(0, len(positions), micro_batch_size)]


@dataclass(frozen=True)
class RankPlan:
    """One rank's micro batches, step by step, computed on demand (a run of thousands of steps never
    holds them all; a loader worker gets this small object, not a list)."""
    count: int
    seed: int
    batch_size: int
    micro: int
    rank: int
    world_size: int
    accumulation: int   # micro steps per optimizer step, the same on every rank

    def step(self, step: int) -> tuple[list[int], list[list[int] | None]]:
        """(the global batch's positions, this rank's micro batches: None where a rank short of
        samples still runs a micro step, with weight 0, so that all ranks agree)."""
        positions = global_batch(self.count, self.seed, step, self.batch_size)
        mine = micro_batches(shard(positions, self.rank, self.world_size), self.micro)
        return positions, mine + [None] * (self.accumulation - len(mine))

    def micro_batch(self, start: int, index: int) -> list[int]:
        """The positions the `index`-th micro batch from step `start` on encodes (a weight-0 one: the
        global batch's first sample)."""
        positions, chunks = self.step(start + index // self.accumulation)
        return chunks[index % self.accumulation] or positions[:1]

    def from_step(self, start: int, total: int) -> PlannedMicroBatches:
        return PlannedMicroBatches(self, start, total)


@dataclass(frozen=True)
class PlannedMicroBatches:
    """Every micro batch of this rank from optimizer step `start` to `total`, as a sequence of positions."""
    plan: RankPlan
    start: int
    total: int

    def __len__(self) -> int:
        return max(0, self.total - self.start) * self.plan.accumulation

    def __getitem__(self, index: int) -> list[int]:
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.plan.micro_batch(self.start, index)


def total_steps(count: int, batch_size: int, epochs: float, max_steps: int = 0) -> int:
    return int(max_steps) if max_steps else max(1, math.ceil(epochs * count / batch_size))


NOT_MODEL_INPUTS = ("labels", "logits_at", "image_keys", "sample_lengths", "sample_images")


def logits_positions(labels: torch.Tensor) -> torch.Tensor:
    """The positions that predict a labelled token in any row of a [batch, positions] label tensor."""
    return (labels[:, 1:] != IGNORE_INDEX).any(dim=0).nonzero().flatten()


def to_device(batch: dict, device) -> dict:
    """Copies that do not block the host where the batch is in pinned memory (the loader pins it);
    what is no tensor (the screenshots' keys) stays as it is."""
    return {key: value.to(device, non_blocking=True) if torch.is_tensor(value) else value
            for key, value in batch.items()}


def response_logprobs(model, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(log π(token) of each labelled token, its mask), both [batch, positions]. Logits are computed
    at the positions that predict a labelled token only (`logits_to_keep`): with a 10k-token prompt
    and Qwen's 152k vocabulary the full logits would be gigabytes for a few hundred response tokens."""
    (picked,), mask = response_logprobs_at(model, batch, (1.0,))
    return picked, mask


def response_logprobs_at(model, batch: dict, temperatures: tuple = (1.0,)) -> tuple[list[torch.Tensor], torch.Tensor]:
    """response_logprobs under each of `temperatures` (logits / T) from one forward pass: T = 1 is the
    policy; a sampler's T is the distribution its tokens were drawn from (the π_old check)."""
    labels = batch["labels"]
    targets_at = batch["logits_at"] if "logits_at" in batch else logits_positions(labels)
    inputs = {key: value for key, value in batch.items() if key not in NOT_MODEL_INPUTS}
    output = model(**inputs, logits_to_keep=targets_at, use_cache=False)
    targets = labels[:, targets_at + 1]
    mask = targets != IGNORE_INDEX
    picked, logits = [], output.logits.float()
    for temperature in temperatures:
        logprobs = torch.log_softmax(logits if temperature == 1.0 else logits / temperature, dim=-1)
        picked.append(logprobs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1) * mask)
    return picked, mask
