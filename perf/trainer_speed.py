"""Benchmark: the trainer's speed at a named model size (issue #37), on synthetic phone screenshots.

Builds Qwen2.5-VL from a config alone (no download) at `--size tiny` (the CPU tests' model, the
default) or `--size 3b` (Qwen2.5-VL-3B's shapes: 36 layers of 2,048, a 32-block vision tower of
1,280, a 151,936-token vocabulary; random weights, the same FLOPs), writes an SFT export in the
consumers' format (data.jsonl + images/) whose samples each carry K phone screenshots of 1080×2400,
and trains it with the trainer's own `training.trainer.sft` for a few optimizer steps. Figures, from
the trainer's own step timestamps with the first step (warm-up) left out:

    tokens_per_s   sequence tokens (prompt, visual tokens and response) trained per second
    mfu            model FLOPs per second / the device's dense bf16 peak: 6·N·T for the language
                   model, plus causal attention (6·L·d·S² per sample), plus 2·N·P for the frozen vision
                   tower's forward over its P patches; empty on a CPU or an unknown GPU
    peak_gib       the GPU's peak allocated memory; on a CPU the process's peak resident size
    step_s         seconds per optimizer step

    python perf/trainer_speed.py [--size tiny|3b] [--steps 6] [--batch 4] [--frames K]
                                 [--gradient-checkpointing] [--loader-workers 2] [--no-vision-cache]
                                 [--packing --micro-batch 2] [--precision auto|bf16|fp32]
    (under torchrun, the trainer's sharding and DDP apply as in any run; this script runs one process)

Ends with one line: `trainer: size= device= tokens_per_s= mfu= peak_gib= step_s=`.
"""
import argparse
import json
import resource
import statistics
import sys
import tempfile
from pathlib import Path

from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch

from training.trainer import data as samples_io
from training.trainer.sft import main as sft_main
from training.trainer.state import read_metrics
from training.trainer.tiny import build_processor, load_model

SIZES = {
    "tiny": {"model": {}, "image_max_pixels": 112 * 112 * 4, "frames": 2, "response_words": 40},
    # Qwen2.5-VL-3B-Instruct's config.json, shapes only.
    "3b": {"model": {"hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
                     "num_attention_heads": 16, "num_key_value_heads": 2, "vocab_size": 151936,
                     "max_position_embeddings": 128000,
                     "vision_config": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                                       "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31]}},
           # ~900 visual tokens a screenshot: five make a ~4.7k-token sample, as the issue measured
           "image_max_pixels": 28 * 28 * 4 * 900, "frames": 5, "response_words": 60},
}
SCREEN = (1080, 2400)
PEAK_BF16 = {"H200": 989.4e12, "H100": 989.4e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12}


def screenshot(index: int, frame: int) -> Image.Image:
    """A phone-like screen: a status bar, a title bar, list rows with text, a bottom bar."""
    image = Image.new("RGB", SCREEN, (248, 248, 250))
    draw = ImageDraw.Draw(image)
    hue = (index * 37 + frame * 11) % 200
    draw.rectangle([0, 0, SCREEN[0], 90], fill=(30, 30, 30))
    draw.rectangle([0, 90, SCREEN[0], 260], fill=(hue, 90, 200 - hue // 2))
    draw.text((40, 150), f"Screen {index}.{frame}", fill=(255, 255, 255))
    for row in range(12):
        top = 300 + row * 160
        draw.rectangle([30, top, SCREEN[0] - 30, top + 140], outline=(200, 200, 210), width=3)
        draw.text((60, top + 50), f"Item {row} of list {index} — option {(row * frame) % 7}", fill=(20, 20, 20))
    draw.rectangle([0, SCREEN[1] - 180, SCREEN[0], SCREEN[1]], fill=(235, 235, 240))
    return image


def make_export(directory: Path, count: int, frames: int, response_words: int) -> Path:
    (directory / "images").mkdir(parents=True, exist_ok=True)
    with open(directory / "data.jsonl", "w") as handle:
        for index in range(count):
            names = []
            for frame in range(frames):
                name = f"images/{index:04d}_{frame}.png"
                screenshot(index, frame).save(directory / name)
                names.append(name)
            content = ("Goal: open the settings and switch on dark theme.\n\nHistory:\n(none)\n\n"
                       f"The last {frames} screenshot(s) follow, oldest first." + "<image>" * frames)
            reply = " ".join(f"word{n % 97}" for n in range(response_words))
            record = {"messages": [{"role": "system", "content": "You operate an Android phone."},
                                   {"role": "user", "content": content},
                                   {"role": "assistant", "content": reply}], "images": names}
            handle.write(json.dumps(record) + "\n")
    return directory


def device_name() -> tuple[str, float | None]:
    if not torch.cuda.is_available():
        return "cpu", None
    name = torch.cuda.get_device_name(0)
    peak = next((flops for key, flops in PEAK_BF16.items() if key in name), None)
    return name.replace("NVIDIA ", "").replace(" ", "_"), peak


def flops_per_sample(model, length: int, visual_tokens: int) -> float:
    """6·N·T for the language model, causal attention, and the frozen vision tower's forward."""
    language = model.model.language_model
    config = language.config
    n_lm = sum(p.numel() for p in language.parameters()) - language.embed_tokens.weight.numel() \
        + model.lm_head.weight.numel()
    n_vision = sum(p.numel() for p in model.model.visual.parameters())
    patches = visual_tokens * 4   # 2×2 patches merged into one visual token
    return (6 * n_lm * length + 6 * config.num_hidden_layers * config.hidden_size * length ** 2
            + 2 * n_vision * patches)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--frames", type=int)
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--loader-workers", type=int, default=2)
    parser.add_argument("--no-vision-cache", action="store_true", help="recompute the frozen tower every micro step")
    parser.add_argument("--packing", action="store_true", help="pack each micro batch's samples into one row")
    parser.add_argument("--micro-batch", type=int, default=1)
    parser.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto")
    args = parser.parse_args()
    size = SIZES[args.size]
    frames = args.frames or size["frames"]
    work = Path(tempfile.mkdtemp(prefix="trainer-speed-"))
    export = make_export(work / "export", count=args.batch * 2, frames=frames,
                         response_words=size["response_words"])
    config = {"stage": "sft", "dataset_dir": str(export), "output_dir": str(work / "run"),
              "model": {"tiny": size["model"]}, "image_max_pixels": size["image_max_pixels"],
              "learning_rate": 1e-5, "min_learning_rate": 1e-6, "warmup_ratio": 0.0, "epochs": 100,
              "max_steps": args.steps, "batch_size": args.batch, "micro_batch_size": args.micro_batch,
              "max_seq_len": 32768, "packing": args.packing, "precision": args.precision,
              "save_every": 10 ** 6, "seed": 0, "gradient_checkpointing": args.gradient_checkpointing,
              "loader_workers": args.loader_workers, "vision_cache": not args.no_vision_cache}
    (work / "config.json").write_text(json.dumps(config))
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    assert sft_main(["--config", str(work / "config.json")]) == 0
    peak_gib = (torch.cuda.max_memory_allocated() if torch.cuda.is_available()
                else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) / 2 ** 30

    processor = build_processor(size["image_max_pixels"])
    samples, _ = samples_io.load_samples(export / "data.jsonl", processor, 32768)
    device, peak = device_name()
    # Parameter counts for the FLOPs, from the same config (only where there is a peak to compare with).
    model = load_model({"tiny": size["model"]}, size["image_max_pixels"])[0] if peak else None
    metrics = read_metrics(work / "run")[1:] or read_metrics(work / "run")
    image_token = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    tokens, flops, visual = 0, 0.0, {}
    for point in metrics:
        for position in samples_io.global_batch(len(samples), 0, point["step"] - 1, args.batch):
            sample = samples[position]
            if position not in visual:
                visual[position] = int((samples_io.encode(sample, processor)["input_ids"] == image_token).sum())
            tokens += sample.length
            flops += flops_per_sample(model, sample.length, visual[position]) if model is not None else 0.0
    seconds = sum(point["step_s"] for point in metrics)
    mfu = f"{flops / seconds / peak:.3f}" if peak and flops else ""
    print(f"{len(metrics)} steps of {args.batch} samples ({frames} screenshots each, "
          f"{tokens / max(1, len(metrics) * args.batch):.0f} tokens a sample) on {device}")
    print(f"trainer: size={args.size} device={device} tokens_per_s={tokens / seconds:.1f} mfu={mfu} "
          f"peak_gib={peak_gib:.2f} step_s={statistics.mean(p['step_s'] for p in metrics):.3f}")


if __name__ == "__main__":
    main()
