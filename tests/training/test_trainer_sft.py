"""The CPT/SFT trainer (training/trainer/sft.py) on CPU: a tiny Qwen2.5-VL built from a config alone
(offline byte-level tokenizer) trains on a real export directory (data.jsonl + PNG screenshots in the
contract's format): the loss falls, only the language model moves, the checkpoint reloads to the same
logits, the labels cover the response alone, and the run cancels, resumes after a kill -9 and runs
under torchrun with two gloo ranks."""
import hashlib
import importlib.util
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw

from flywheel.policies.protocol import format_output, system_prompt
from tests.conftest import BIN, ROOT, torch_on_one_thread
from training.trainer import data as samples_io
from training.trainer.sft import freeze, lr_factor
from training.trainer.sft import main as sft_main
from training.trainer.state import read_metrics, read_status
from training.trainer.tiny import ImageProcessor, build_tiny, load_model, save_artifact

pytestmark = pytest.mark.usefixtures("torch")  # trains with torch: the slow tier

APPS = ["Settings", "Clock", "Contacts", "Calendar", "Files", "Maps", "Notes", "Weather", "Camera", "Music"]
FRAME = (270, 540)          # 190 visual tokens a frame under the trainer's resize
SMALL_FRAME = (112, 224)    # 32 visual tokens
# The trainer reads no word of a prompt, and the tiny model's byte-level tokenizer makes every byte a
# token: with the real system prompt (2.4k bytes) and two 270×540 frames a step's sample is ~3,300
# tokens, with this prompt and two 112×224 frames ~750, and a training step ~8× cheaper (attention
# is most of it). The training tests use such small samples; the label test reads full-size ones.
SHORT_SYSTEM = "You operate an Android phone for the user. Answer with the five tags, then one <tool_call>."


def screenshot(index: int, step: int, size: tuple[int, int] = FRAME) -> bytes:
    """A phone-shaped PNG with a status bar, a title, list rows and a highlighted button."""
    image = Image.new("RGB", FRAME, (245, 245, 245))
    draw = ImageDraw.Draw(image)
    draw.rectangle([0, 0, 270, 24], fill=(30, 30, 30))
    draw.text((8, 6), f"12:0{step}  4G  87%", fill=(255, 255, 255))
    draw.text((12, 40), APPS[index % len(APPS)], fill=(0, 0, 0))
    for row in range(6):
        top = 80 + row * 60
        draw.rectangle([8, top, 262, top + 50], outline=(200, 200, 200), fill=(255, 255, 255))
        draw.text((20, top + 18), f"Item {row + 1} of {APPS[(index + row) % len(APPS)]}", fill=(40, 40, 40))
    draw.rectangle([60, 460 - step * 10, 210, 500 - step * 10], fill=(20 + 20 * index % 200, 120, 220))
    if size != FRAME:
        image = image.resize(size, Image.Resampling.BILINEAR)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def write_image(directory: Path, png: bytes) -> str:
    name = f"images/{hashlib.sha256(png).hexdigest()}.png"
    (directory / "images").mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(png)
    return name


def step_sample(directory: Path, index: int, frames: int = 2,
                small: bool = False) -> tuple[list[dict], list[str], str]:
    """(prompt messages, images, response) of one protocol step with `frames` screenshots; `small`:
    with SHORT_SYSTEM and SMALL_FRAME screenshots (the training tests' samples)."""
    app = APPS[index % len(APPS)]
    size = SMALL_FRAME if small else FRAME
    images = [write_image(directory, screenshot(index, step, size)) for step in range(frames)]
    history = "Step 1: [Observation] The home screen. [Reflection] [Plan] Open the app. " \
              f"[Decision] Open {app}. [Memory] <tool_call>{{\"action\": \"open\", \"app\": \"{app}\"}}</tool_call>"
    user = (f"Goal: In {app}, turn on the option in row {index % 6 + 1}\n\nHistory:\n{history}\n\n"
            f"The last {frames} screenshot(s) follow, oldest first; the last is the current screen."
            + "<image>" * frames)
    cot = {"Observation": f"{app} shows six rows; row {index % 6 + 1} is off.", "Reflection": "",
           "Plan": f"Tap row {index % 6 + 1}, then check that it is on.",
           "Decision": f"Tap row {index % 6 + 1}.", "Memory": f"{app} is open."}
    action = {"action": "click", "point": [500, 180 + 110 * (index % 6)], "coords": "thousandths"}
    prompt = [{"role": "system", "content": SHORT_SYSTEM if small else system_prompt()},
              {"role": "user", "content": user}]
    return prompt, images, format_output(cot, action)


def make_export(directory: Path, count: int = 8, frames: int = 2, small: bool = False) -> Path:
    """A snapshot directory in the contract's format (data.jsonl, images/, dataset_info.json)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "data.jsonl", "w") as handle:
        for index in range(count):
            prompt, images, response = step_sample(directory, index, frames, small)
            record = {"messages": prompt + [{"role": "assistant", "content": response}], "images": images,
                      "meta": {"trajectory": index // 3, "step": index % 3, "source": "htsc_true",
                               "pool_row": index, "query": index // 3}}
            handle.write(json.dumps(record) + "\n")
    (directory / "dataset_info.json").write_text(json.dumps({"flywheel_sft_1": {
        "file_name": "data.jsonl", "formatting": "sharegpt", "columns": {"messages": "messages", "images": "images"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
                 "system_tag": "system"}}}))
    return directory


def write_config(tmp_path: Path, dataset: Path, name: str = "run", **overrides) -> Path:
    run_dir = tmp_path / name
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {"stage": "sft", "dataset_dir": str(dataset), "output_dir": str(run_dir), "model": {"tiny": {}},
              "learning_rate": 1e-2, "min_learning_rate": 1e-3, "warmup_ratio": 0.1, "epochs": 1, "max_steps": 8,
              "batch_size": 2, "micro_batch_size": 1, "max_seq_len": 10240, "freeze_vision": True,
              "freeze_projector": True, "save_every": 4, "seed": 0, "deepspeed": "", "image_max_pixels": 200704,
              "launcher": "torchrun", "nproc": 1, **overrides}
    (run_dir / "config.json").write_text(json.dumps(config))
    return run_dir / "config.json"


def trainer_env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (torchrun's elastic agent starts each rank in a session of its own,
    so killing torchrun's process group leaves the ranks, and their open pipes, behind)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def run_torchrun(module: str, config, timeout=90, tries=3) -> subprocess.CompletedProcess:
    """Two gloo ranks on this machine: on loopback (other suites add and remove network interfaces),
    one thread each on 2 cores. A hang takes torchrun and every rank down; gloo on a loaded 2-core
    machine has been seen to hang while the ranks meet (nothing printed; a run takes ~10 s otherwise), and
    once to abort a rank there (C++ "terminate called without an active exception", SIGABRT, in a whole
    run under four test workers), so a hang or a rank killed by SIGABRT is tried again, up to `tries`
    times, and the last one fails with what the ranks printed. A trainer's own error exits with status 1
    and its traceback: never tried again."""
    env = dict(trainer_env(), OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    argv = [str(BIN / "torchrun"), "--standalone", "--nproc_per_node", "2", "-m", module, "--config", str(config)]
    for attempt in range(1, tries + 1):
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
            aborted = process.returncode != 0 and "Signal 6 (SIGABRT)" in stderr
            if not aborted or attempt == tries:
                return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)
            start_afresh(config)
        except subprocess.TimeoutExpired:
            for pid in [process.pid, *descendants(process.pid)]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            stdout, stderr = process.communicate()
            if attempt == tries:
                output = stdout[-3000:], stderr[-3000:]
                raise AssertionError(f"torchrun {module} did not finish in {timeout} s, {tries} times: {output}")
            start_afresh(config)


def start_afresh(config) -> None:
    """The next try starts from a clean output folder, not from a failed try's checkpoint."""
    output_dir = Path(json.loads(Path(config).read_text())["output_dir"])
    for entry in output_dir.iterdir():
        if entry.name != "config.json":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """The training tests' snapshot: 8 small samples (SHORT_SYSTEM, SMALL_FRAME screenshots)."""
    return make_export(tmp_path_factory.mktemp("snapshot"), count=8, small=True)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, export):
    """One finished 8-step run (batch 2), shared by the tests that read its results."""
    config = write_config(tmp_path_factory.mktemp("trained"), export)
    started = time.time()
    with torch_on_one_thread():
        assert sft_main(["--config", str(config)]) == 0
    elapsed = time.time() - started
    print(f"\ntiny SFT: 8 steps in {elapsed:.1f} s ({8 * 60 / elapsed:.1f} steps/min, model build included)")
    return config.parent


def test_labels_cover_the_assistant_text_and_its_end_token_only(tmp_path):
    export = make_export(tmp_path / "snapshot", count=8)   # the real system prompt, full-size screenshots
    _, processor = build_tiny({})
    samples, skipped = samples_io.load_samples(export / "data.jsonl", processor, 10240)
    assert len(samples) == 8 and skipped == {"too_long": 0, "bad_image": 0}
    record = json.loads((export / "data.jsonl").read_text().splitlines()[3])
    encoded = samples_io.encode(samples[3], processor)
    labels, input_ids = encoded["labels"], encoded["input_ids"]
    labelled = (labels != -100).nonzero().flatten()
    # One contiguous span at the very end: everything before it (system, goal, history, images) is -100.
    assert labelled.tolist() == list(range(len(labels) - len(labelled), len(labels)))
    assert torch.equal(labels[labelled], input_ids[labelled])
    decoded = processor.tokenizer.decode(labels[labelled])
    assert decoded == record["messages"][2]["content"] + "<|im_end|>"
    assert "[Observation]" in decoded and "<tool_call>" in decoded
    prompt_text = processor.tokenizer.decode(input_ids[: labelled[0]])
    assert prompt_text.count("<|vision_start|>") == 2 and f"Goal: In {APPS[3]}," in prompt_text
    assert prompt_text.endswith("<|im_start|>assistant\n")
    image_pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    merge = processor.image_processor.merge_size ** 2
    assert int((input_ids == image_pad).sum()) == int(encoded["image_grid_thw"].prod(-1).sum()) // merge


def test_cached_screenshots_encode_exactly_as_the_processor_does(tmp_path):
    """Each screenshot preprocessed once per process (#37): the same ids, labels, pixels and grids as the
    processor's own call, every epoch."""
    export = make_export(tmp_path / "snapshot", count=6)   # full-size screenshots
    _, processor = build_tiny({})
    samples, _ = samples_io.load_samples(export / "data.jsonl", processor, 10240)
    cache = samples_io.ScreenshotCache()
    for _ in range(2):
        for sample in samples:
            fresh, cached = samples_io.encode(sample, processor), samples_io.encode(sample, processor, cache)
            assert fresh.keys() == cached.keys() == {"input_ids", "labels", "pixel_values", "image_grid_thw",
                                                     "image_keys"}
            assert all(torch.equal(fresh[key], cached[key]) for key in fresh if key != "image_keys")
            assert fresh["image_keys"] == cached["image_keys"] == [str(path) for path in sample.images]
    distinct = {path for sample in samples for path in sample.images}
    assert cache.misses == len(distinct)   # decoded once each, however often shown
    assert cache.hits == 2 * sum(len(sample.images) for sample in samples) - len(distinct)
    small = samples_io.ScreenshotCache(max_bytes=cache.bytes // 2)   # past its budget the oldest go
    for sample in samples:
        samples_io.encode(sample, processor, small)
    assert 0 < small.bytes <= cache.bytes // 2


def test_too_long_and_corrupt_samples_are_skipped_and_counted(tmp_path):
    export = make_export(tmp_path / "snapshot", count=3)
    first = json.loads((export / "data.jsonl").read_text().splitlines()[0])
    (export / first["images"][0]).write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    _, processor = build_tiny({})
    samples, skipped = samples_io.load_samples(export / "data.jsonl", processor, 10240)
    assert [sample.position for sample in samples] == [1, 2] and skipped == {"too_long": 0, "bad_image": 1}
    lengths = [sample.length for sample in samples]
    samples, skipped = samples_io.load_samples(export / "data.jsonl", processor, min(lengths))
    assert len(samples) == 1 and skipped == {"too_long": 1, "bad_image": 1}


def test_data_order_is_deterministic_and_sharded():
    assert samples_io.global_batch(10, 0, 0, 4) == samples_io.global_batch(10, 0, 0, 4)
    assert samples_io.global_batch(10, 0, 0, 4) != samples_io.global_batch(10, 1, 0, 4)
    stream = [p for step in range(5) for p in samples_io.global_batch(10, 3, step, 4)]
    assert sorted(stream[:10]) == list(range(10)) and sorted(stream[10:20]) == list(range(10))  # epochs
    batch = samples_io.global_batch(10, 3, 1, 4)
    assert samples_io.shard(batch, 0, 2) + samples_io.shard(batch, 1, 2) == batch[0::2] + batch[1::2]
    assert samples_io.total_steps(10, 4, 1.0) == 3 and samples_io.total_steps(10, 4, 1.0, max_steps=7) == 7


def test_the_schedule_warms_up_then_decays_to_the_minimum():
    factors = [lr_factor(step, 20, 2, 0.1) for step in range(20)]
    assert factors[0] == pytest.approx(0.5) and factors[1] == pytest.approx(1.0) and factors[2] == pytest.approx(1.0)
    assert factors[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(factors[1:], factors[2:]))


def test_sft_loss_falls_and_only_the_language_model_moves(trained, export):
    metrics = read_metrics(trained)
    assert [point["step"] for point in metrics] == list(range(1, 9))
    first, last = sum(p["loss"] for p in metrics[:2]) / 2, sum(p["loss"] for p in metrics[-2:]) / 2
    assert last < first * 0.8, [p["loss"] for p in metrics]
    assert metrics[0]["lr"] == pytest.approx(1e-2) and metrics[-1]["lr"] == pytest.approx(1e-3)
    status = read_status(trained)
    assert status["state"] == "done" and status["step"] == status["total_steps"] == 8
    assert status["checkpoint"].endswith("checkpoint-8") and status["trainable_parameters"] > 0
    assert sorted(p.name for p in trained.glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-8"]
    initial, _ = build_tiny({}, seed=0)
    final, processor = load_model({"path": str(trained / "final")})
    before, after = initial.state_dict(), final.state_dict()
    vision = [name for name in before if name.startswith("model.visual.")]
    assert vision and any(".merger." in name for name in vision)
    assert all(torch.equal(before[name], after[name]) for name in vision)  # encoder and projector frozen
    language = [name for name in before if name.startswith(("model.language_model.", "lm_head."))]
    assert sum(not torch.equal(before[name], after[name]) for name in language) > len(language) // 2


def test_the_final_checkpoint_reloads_to_the_same_logits(trained, export, tmp_path):
    model, processor = load_model({"path": str(trained / "final")})
    samples, _ = samples_io.load_samples(export / "data.jsonl", processor, 10240)
    batch = samples_io.collate([samples_io.encode(samples[0], processor)], processor.tokenizer.pad_token_id)
    # Train the loaded model one more step in memory, save it, reload it: the same logits.
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    logprobs, _ = samples_io.response_logprobs(model, batch)
    (-logprobs.sum()).backward()
    optimizer.step()
    save_artifact(model, processor, tmp_path / "saved")
    reloaded, processor_again = load_model({"path": str(tmp_path / "saved")})
    assert processor_again.chat_template == processor.chat_template
    inputs = {key: value for key, value in batch.items() if key != "labels"}
    model.eval(), reloaded.eval()
    with torch.no_grad():
        in_memory = model(**inputs).logits
        assert torch.equal(reloaded(**inputs).logits, in_memory)
        # and the run's last checkpoint holds the weights of its final artifact
        checkpoint, _ = load_model({"path": str(trained / "checkpoint-8")})
        final, _ = load_model({"path": str(trained / "final")})
        assert torch.equal(checkpoint.eval()(**inputs).logits, final.eval()(**inputs).logits)
        assert not torch.equal(final(**inputs).logits, in_memory)
    saved = json.loads((trained / "final" / "preprocessor_config.json").read_text())
    assert saved["processor_class"] == "Qwen2_5_VLProcessor"
    assert (trained / "final" / "model.safetensors").exists() and (trained / "final" / "chat_template.jinja").exists()


def test_a_cancel_file_stops_the_run_with_a_checkpoint(tmp_path, export):
    config = write_config(tmp_path, export, max_steps=50, save_every=100)
    run_dir = config.parent

    def cancel_after_the_first_step():   # as the web side does: CANCEL in the run's directory
        deadline = time.time() + 120
        while time.time() < deadline and not (run_dir / "metrics.jsonl").exists():
            time.sleep(0.02)
        (run_dir / "CANCEL").touch()

    # The trainer in this process (it reads the file, not its process); SIGTERM below needs a process.
    canceller = threading.Thread(target=cancel_after_the_first_step, daemon=True)
    canceller.start()
    assert sft_main(["--config", str(config)]) == 0
    canceller.join(timeout=10)
    status = read_status(run_dir)
    assert status["state"] == "cancelled" and 1 <= status["step"] < 50
    assert Path(status["checkpoint"]).name == f"checkpoint-{status['step']}"
    assert (Path(status["checkpoint"]) / "trainer_state.pt").exists() and not (run_dir / "final").exists()
    assert not (run_dir / "CANCEL").exists()   # honoured: a later resume does not stop at once
    # Resumed, it goes on from there; SIGTERM (what a launcher or the worker sends) cancels it the same way.
    cancelled_at = status["step"]
    process = subprocess.Popen([sys.executable, "-m", "training.trainer.sft", "--config", str(config)], cwd=ROOT,
                               env=trainer_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline and process.poll() is None and \
            max([p["step"] for p in read_metrics(run_dir)], default=0) <= cancelled_at:
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 0, output.decode()[-3000:]
    status = read_status(run_dir)
    assert status["state"] == "cancelled" and cancelled_at < status["step"] < 50
    assert status["resumed_from"].endswith(f"checkpoint-{cancelled_at}")
    assert [p["step"] for p in read_metrics(run_dir)] == list(range(1, status["step"] + 1))


def test_a_run_killed_mid_epoch_resumes_from_its_checkpoint(tmp_path, export):
    config = write_config(tmp_path, export, max_steps=12, save_every=3)
    run_dir = config.parent
    command = [sys.executable, "-m", "training.trainer.sft", "--config", str(config)]
    process = subprocess.Popen(command, cwd=ROOT, env=trainer_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (run_dir / "checkpoint-3").exists() and time.time() < deadline and process.poll() is None:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert read_status(run_dir)["state"] == "running"
    left = sorted(path.name for path in run_dir.glob("checkpoint-*"))   # a kill while saving leaves no half one
    assert left and set(left) <= {"checkpoint-3", "checkpoint-6", "checkpoint-9"}, left
    assert all((run_dir / name / "trainer_state.pt").exists() for name in left)
    killed_at = [point["step"] for point in read_metrics(run_dir)]
    assert 3 <= max(killed_at) < 12
    # Resumed in this process: what it reads is the run directory the killed process left.
    assert sft_main(["--config", str(config)]) == 0
    status = read_status(run_dir)
    assert status["state"] == "done" and status["step"] == 12
    assert Path(status["resumed_from"]).name in ("checkpoint-3", "checkpoint-6", "checkpoint-9")
    steps = [point["step"] for point in read_metrics(run_dir)]
    assert steps == list(range(1, 13))   # the redone steps replace the lines written after the checkpoint
    # The same run without the kill ends with the same weights: the resume is exact.
    straight = write_config(tmp_path, export, name="straight", max_steps=12, save_every=3)
    assert sft_main(["--config", str(straight)]) == 0
    resumed, _ = load_model({"path": str(run_dir / "final")})
    uninterrupted, _ = load_model({"path": str(straight.parent / "final")})
    for (name, a), (_, b) in zip(resumed.state_dict().items(), uninterrupted.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-6), name


@pytest.mark.skipif(not (BIN / "torchrun").exists(), reason="torchrun is not installed in this environment")
def test_torchrun_trains_with_two_gloo_ranks(tmp_path, export):
    config = write_config(tmp_path, export, max_steps=2, batch_size=4, save_every=100)
    result = run_torchrun("training.trainer.sft", config)
    assert result.returncode == 0, result.stderr[-4000:]
    status = read_status(config.parent)
    assert status["state"] == "done" and status["step"] == 2 and status["world_size"] == 2
    metrics = read_metrics(config.parent)
    assert [point["step"] for point in metrics] == [1, 2] and all(point["tokens"] > 0 for point in metrics)
    assert (config.parent / "final" / "model.safetensors").exists()
    # One process with the same global batch (4 micro steps instead of 2 per rank) takes the same steps.
    single = write_config(tmp_path, export, name="single", max_steps=2, batch_size=4, save_every=100)
    assert sft_main(["--config", str(single)]) == 0
    for two_ranks, one in zip(metrics, read_metrics(single.parent)):
        assert two_ranks["tokens"] == one["tokens"] and two_ranks["loss"] == pytest.approx(one["loss"], rel=1e-4)
    distributed, _ = load_model({"path": str(config.parent / "final")})
    alone, _ = load_model({"path": str(single.parent / "final")})
    for (name, a), (_, b) in zip(distributed.state_dict().items(), alone.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-5), name


def test_the_freeze_flags_are_separate():
    model, _ = build_tiny({})
    counts = freeze(model, vision=True, projector=False)
    visual = model.model.visual
    assert all(not p.requires_grad for p in visual.blocks.parameters())
    assert all(not p.requires_grad for p in visual.patch_embed.parameters())
    assert all(p.requires_grad for p in visual.merger.parameters())
    assert all(p.requires_grad for p in model.model.language_model.parameters())
    assert counts["trainable_parameters"] + counts["frozen_parameters"] == sum(p.numel() for p in model.parameters())
    model, _ = build_tiny({})
    freeze(model, vision=False, projector=True)
    assert all(p.requires_grad for p in model.model.visual.blocks.parameters())
    assert all(not p.requires_grad for p in model.model.visual.merger.parameters())


def test_a_missing_or_empty_dataset_fails_with_a_clear_error(tmp_path):
    config = write_config(tmp_path, tmp_path / "no-such-snapshot", name="missing")
    assert sft_main(["--config", str(config)]) == 1
    status = read_status(config.parent)
    assert status["state"] == "failed" and "does not exist" in status["error"] and "no-such-snapshot" in status["error"]
    empty = tmp_path / "empty-snapshot"
    empty.mkdir()
    (empty / "data.jsonl").write_text("")
    config = write_config(tmp_path, empty, name="empty")
    assert sft_main(["--config", str(config)]) == 1
    assert read_status(config.parent)["state"] == "failed"
    assert read_status(config.parent)["error"] == "the snapshot has no samples"


def test_a_deepspeed_config_without_deepspeed_installed_is_refused(tmp_path, export):
    pytest.importorskip("accelerate")
    if importlib.util.find_spec("deepspeed") is not None:
        pytest.skip("deepspeed is installed here")
    config = write_config(tmp_path, export, deepspeed=str(tmp_path / "ds_zero2.json"))
    assert sft_main(["--config", str(config)]) == 1
    error = read_status(config.parent)["error"]
    assert "deepspeed is not installed" in error and "pip install deepspeed" in error


def test_a_resumed_run_sees_the_same_pixels_as_a_fresh_one(trained, export, tmp_path):
    """The image processor is pinned (the PIL one) on build, save and load: a reload never picks the
    torchvision "Fast" one, whose pixels differ by up to 0.015, even from files that name it."""
    _, fresh = load_model({"tiny": {}}, 200704)
    _, resumed = load_model({"path": str(trained / "checkpoint-8")}, 200704)
    fast_named = tmp_path / "fast-named"
    shutil.copytree(trained / "checkpoint-8", fast_named)
    config = json.loads((fast_named / "preprocessor_config.json").read_text())
    (fast_named / "preprocessor_config.json").write_text(json.dumps({**config,
                                                                     "image_processor_type": "Qwen2VLImageProcessorFast"}))
    _, from_fast_files = load_model({"path": str(fast_named)}, 200704)
    assert {type(p.image_processor) for p in (fresh, resumed, from_fast_files)} == {ImageProcessor}
    samples, _ = samples_io.load_samples(export / "data.jsonl", fresh, 10240)
    pixels = [samples_io.encode(samples[0], processor)["pixel_values"] for processor in (fresh, resumed, from_fast_files)]
    assert pixels[0].shape[0] == 2 * 32 * 4   # two frames of 32 visual tokens, 4 patches a token
    assert torch.equal(pixels[0], pixels[1]) and torch.equal(pixels[0], pixels[2])
    saved = json.loads((trained / "final" / "preprocessor_config.json").read_text())
    assert saved["image_processor_type"] == "Qwen2VLImageProcessor"   # the name stock loaders of 4 and 5 know


def test_an_unloadable_model_fails_with_a_one_line_status(tmp_path, export):
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    config = write_config(tmp_path, export, model={"path": str(broken)})
    assert sft_main(["--config", str(config)]) == 1
    status = read_status(config.parent)
    assert status["state"] == "failed" and str(broken / "config.json") in status["error"]
    assert "\n" not in status["error"] and status["error"].startswith("OSError: ")


def test_a_bad_config_fails_with_a_status_beside_it(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text('{"stage": "sft", "model": ')   # cut short
    assert sft_main(["--config", str(run_dir / "config.json")]) == 1
    status = read_status(run_dir)
    assert status["state"] == "failed" and status["error"].startswith("JSONDecodeError: ")
    (run_dir / "config.json").write_text(json.dumps({"stage": "sft", "model": {"tiny": {}}}))   # no output_dir
    assert sft_main(["--config", str(run_dir / "config.json")]) == 1
    status = read_status(run_dir)
    assert status["state"] == "failed" and status["error"] == "the config has no 'output_dir'"


def test_a_trainer_whose_imports_fail_still_writes_its_status(tmp_path):
    """Started as torchrun starts it (`python -m`), a trainer that cannot import transformers says so
    in status.json (run_main's handler does not exist yet when the import fails)."""
    broken = tmp_path / "site" / "transformers"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise ImportError("transformers is broken on this host")\n')
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"output_dir": str(run_dir / "out"), "model": {"tiny": {}}}))
    env = dict(trainer_env(), PYTHONPATH=f"{tmp_path / 'site'}:{ROOT}")
    result = subprocess.run([sys.executable, "-m", "training.trainer.sft", "--config", str(run_dir / "config.json")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "transformers is broken on this host" in result.stderr
    assert read_status(run_dir / "out") | {"updated_at": 0} == {
        "state": "failed", "error": "ImportError: transformers is broken on this host", "step": 0, "total_steps": 0,
        "checkpoint": "", "updated_at": 0}


@pytest.mark.skipif(not (BIN / "torchrun").exists(), reason="torchrun is not installed in this environment")
def test_fsdp2_sharding_over_two_gloo_ranks_trains_what_one_process_trains(tmp_path, export):
    """sharding "fsdp" (issue #37): each rank holds half the weights, gradients and AdamW state; the
    steps, the saved weights and a resume from the sharded checkpoint are those of one process."""
    config = write_config(tmp_path, export, name="fsdp", max_steps=4, batch_size=4, save_every=2, sharding="fsdp")
    result = run_torchrun("training.trainer.sft", config, timeout=150)
    assert result.returncode == 0, result.stderr[-4000:]
    metrics = read_metrics(config.parent)
    single = write_config(tmp_path, export, name="single", max_steps=4, batch_size=4, save_every=2)
    assert sft_main(["--config", str(single)]) == 0
    for two_ranks, one in zip(metrics, read_metrics(single.parent), strict=True):
        assert two_ranks["tokens"] == one["tokens"] and two_ranks["loss"] == pytest.approx(one["loss"], rel=1e-4)
    sharded, _ = load_model({"path": str(config.parent / "final")})
    alone, _ = load_model({"path": str(single.parent / "final")})
    for (name, a), (_, b) in zip(sharded.state_dict().items(), alone.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-5), name
    # A sharded checkpoint resumes: drop what came after step 2 and run again on two ranks.
    shutil.rmtree(config.parent / "final")
    shutil.rmtree(config.parent / "checkpoint-4")
    result = run_torchrun("training.trainer.sft", config, timeout=150)
    assert result.returncode == 0, result.stderr[-4000:]
    assert read_status(config.parent)["resumed_from"].endswith("checkpoint-2")
    resumed, _ = load_model({"path": str(config.parent / "final")})
    for (name, a), (_, b) in zip(resumed.state_dict().items(), sharded.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-6), name
