"""Run by test_transformers5.py in a process whose PYTHONPATH puts transformers 5 first:
`python tests/training/transformers5_roundtrip.py <snapshot dir> <work dir>`. Trains the tiny
Qwen2.5-VL 3 SFT steps through the trainer's entry point, saves and reloads a model trained in this
process, serves the trained checkpoint with the built-in model server, and prints one JSON line of what
it found (the test asserts on it)."""
import base64
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import torch
import transformers
from PIL import Image

from training.trainer import data as samples_io
from training.trainer.sft import main as sft_main
from training.trainer.state import read_status
from training.trainer.tiny import build_processor, build_tiny, load_model, save_artifact


def main(snapshot: Path, work: Path) -> dict:
    torch.set_num_threads(1)
    found = {"transformers": transformers.__version__}
    run_dir = work / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {"stage": "sft", "dataset_dir": str(snapshot), "output_dir": str(run_dir), "model": {"tiny": {}},
              "learning_rate": 1e-2, "min_learning_rate": 1e-3, "warmup_ratio": 0.1, "max_steps": 3,
              "batch_size": 2, "save_every": 100, "max_seq_len": 10240}
    (run_dir / "config.json").write_text(json.dumps(config))
    found["exit_code"] = sft_main(["--config", str(run_dir / "config.json")])
    status = read_status(run_dir)
    found.update(state=status.get("state"), step=status.get("step"), error=status.get("error"))
    if found["state"] != "done":
        return found

    # A model trained in this process, saved and reloaded, gives the same logits on a batch.
    model, processor = build_tiny({})
    samples, _ = samples_io.load_samples(snapshot / "data.jsonl", processor, 10240)
    batch = samples_io.collate([samples_io.encode(sample, processor) for sample in samples[:2]],
                               processor.tokenizer.pad_token_id)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    for _ in range(3):
        logprobs, _ = samples_io.response_logprobs(model, batch)
        (-logprobs.sum()).backward()
        optimizer.step()
        optimizer.zero_grad()
    save_artifact(model, processor, work / "saved")
    reloaded, reloaded_processor = load_model({"path": str(work / "saved")})
    inputs = {key: value for key, value in batch.items() if key != "labels"}
    with torch.no_grad():
        in_memory = model.eval()(**inputs).logits
        found["reloaded_logits_equal"] = torch.equal(reloaded.eval()(**inputs).logits, in_memory)
        final, final_processor = load_model({"path": str(run_dir / "final")})
        checkpoint, _ = load_model({"path": str(run_dir / "checkpoint-3")})
        found["checkpoint_logits_equal_final"] = torch.equal(final.eval()(**inputs).logits,
                                                             checkpoint.eval()(**inputs).logits)
        found["trained_differs_from_fresh"] = not torch.equal(final(**inputs).logits,
                                                              build_tiny({})[0].eval()(**inputs).logits)
    # A resumed run (its processor loaded from a checkpoint) sees the same pixels as a fresh one.
    with Image.open(samples[0].images[0]) as image:
        screenshot = image.convert("RGB")
    fresh = build_processor(config.get("image_max_pixels") or 200704).image_processor
    pixels = [proc(images=[screenshot], return_tensors="pt")["pixel_values"]
              for proc in (fresh, final_processor.image_processor, reloaded_processor.image_processor)]
    found["pixel_values_equal"] = all(torch.equal(pixels[0], other) for other in pixels[1:])
    found["image_processor_classes"] = sorted({type(proc).__name__ for proc in
                                               (fresh, final_processor.image_processor,
                                                reloaded_processor.image_processor)})
    found["served"] = serve_and_ask(run_dir / "final", samples[0].images[0])
    return found


def serve_and_ask(checkpoint: Path, screenshot: Path) -> dict:
    """The built-in model server (training/model_host/server.py), run under this transformers, answers a
    chat completion with an image and the sampled tokens' log-probabilities, as it does for the RL line."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "training.model_host.server", "--model", str(checkpoint),
                                "--served-model-name", "tiny", "--port", str(port), "--device", "cpu",
                                "--max-new-tokens", "4"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while not answers(base + "/health"):
            if process.poll() is not None or time.monotonic() > deadline:
                return {"error": process.stderr.read().decode()[-1500:] if process.poll() is not None else "no answer"}
            time.sleep(0.5)
        image = "data:image/png;base64," + base64.b64encode(screenshot.read_bytes()).decode()
        body = {"model": "tiny", "temperature": 0.7, "max_tokens": 4, "logprobs": True,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "Open Settings"},
                                                          {"type": "image_url", "image_url": {"url": image}}]}]}
        request = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as reply:
            answer = json.loads(reply.read())
        choice = answer["choices"][0]
        return {"status": 200, "content_is_text": isinstance(choice["message"]["content"], str),
                "logprobs": len(choice["logprobs"]["content"]), "completion_tokens": answer["usage"]["completion_tokens"]}
    finally:
        process.terminate()
        process.wait(timeout=15)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]))))
