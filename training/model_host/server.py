"""The built-in OpenAI-compatible server: one checkpoint, loaded with transformers, where vLLM is not.

    python -m training.model_host.server --model <checkpoint dir> --served-model-name NAME --port 8100

It answers what the console's endpoint policy and health check ask of vLLM: POST /v1/chat/completions
(OpenAI messages, screenshots as image_url data: URLs, `temperature`/`top_p`/`max_tokens`/`seed`,
`logprobs`/`top_logprobs` in OpenAI's format), GET /v1/models and GET /health. No Django: it is a
process of its own that the model host starts, watches and stops. A checkpoint that cannot be loaded
exits with LOAD_FAILED and its reason in --error-file (the host shows it on the model's page).
"""
from __future__ import annotations

import argparse
import base64
import io
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

LOAD_FAILED = 2
MAX_BODY_BYTES = 64 * 1024 * 1024


class RequestError(ValueError):
    """The request cannot be answered; the message says why (HTTP 400)."""


def load(path: str, device: str = "cpu"):
    """(model, processor) of a save_pretrained checkpoint: the model class its config names."""
    import torch
    import transformers
    from transformers import AutoConfig, AutoProcessor

    directory = Path(path)
    if not (directory / "config.json").is_file():
        raise FileNotFoundError(f"no model at {directory}: the folder has no config.json")
    config = AutoConfig.from_pretrained(directory, local_files_only=True)
    names = list(getattr(config, "architectures", None) or [])
    model_class = next((getattr(transformers, name) for name in names if hasattr(transformers, name)), None)
    if model_class is None:
        raise ValueError(f"the checkpoint's config names no model class this server knows ({', '.join(names) or 'none'})")
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    model = model_class.from_pretrained(directory, local_files_only=True, dtype=dtype).to(device).eval()
    if getattr(config, "model_type", "") in ("qwen2_5_vl", "qwen2_vl"):
        # The trainer's own loader: the same (PIL) image processor as training, whatever class the
        # files name, so served pixels are the pixels the model was trained on.
        from training.trainer.tiny import load_processor
        processor = load_processor(directory)
    else:
        processor = AutoProcessor.from_pretrained(directory, local_files_only=True)
    if not getattr(processor, "chat_template", None):
        processor.chat_template = getattr(processor.tokenizer, "chat_template", None)
    return model, processor


def decode_image(url: str):
    from PIL import Image

    if not url.startswith("data:") or "," not in url:
        raise RequestError("images are sent as data: URLs (this server fetches nothing)")
    try:
        return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB")
    except Exception as error:  # any undecodable payload is the client's
        raise RequestError(f"an image_url does not hold an image ({type(error).__name__})") from None


def chat_inputs(messages) -> tuple[list[dict], list]:
    """OpenAI messages → (the processor's chat messages, the images in order)."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list")
    converted, images = [], []
    for message in messages:
        if not isinstance(message, dict) or "role" not in message:
            raise RequestError("every message needs a role")
        content = message.get("content")
        if isinstance(content, str):
            parts = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            parts = []
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "text":
                    parts.append({"type": "text", "text": str(part.get("text", ""))})
                elif kind == "image_url":
                    image_url = part.get("image_url")
                    images.append(decode_image(image_url.get("url", "") if isinstance(image_url, dict) else str(image_url)))
                    parts.append({"type": "image"})
                else:
                    raise RequestError(f"content parts are text or image_url, not {kind!r}")
        else:
            raise RequestError("a message's content is a string or a list of parts")
        converted.append({"role": message["role"], "content": parts})
    return converted, images


class Engine:
    """The loaded model; one generation at a time (a lock: CPU and one GPU gain nothing from more)."""

    def __init__(self, model, processor, name: str, device: str, max_new_tokens: int):
        self.model, self.processor, self.name, self.device = model, processor, name, device
        self.max_new_tokens = max_new_tokens
        self.lock = threading.Lock()

    def complete(self, body: dict) -> dict:
        import torch

        messages, images = chat_inputs(body.get("messages"))
        temperature = float(body.get("temperature") or 0.0)
        max_tokens = min(int(body.get("max_tokens") or body.get("max_completion_tokens") or self.max_new_tokens),
                         self.max_new_tokens)
        want_logprobs = bool(body.get("logprobs"))
        top_n = max(0, min(20, int(body.get("top_logprobs") or 0)))
        text = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        inputs = self.processor(text=[text], images=images or None, return_tensors="pt").to(self.device)
        sampling = {"do_sample": False}
        if temperature > 0:
            sampling = {"do_sample": True, "temperature": temperature, "top_p": float(body.get("top_p") or 1.0)}
            if body.get("top_k"):
                sampling["top_k"] = int(body["top_k"])
        tokenizer = self.processor.tokenizer
        with self.lock, torch.inference_mode():
            if body.get("seed") is not None:
                torch.manual_seed(int(body["seed"]))
            output = self.model.generate(**inputs, max_new_tokens=max(1, max_tokens), return_dict_in_generate=True,
                                         output_scores=want_logprobs, pad_token_id=tokenizer.pad_token_id,
                                         **sampling)
        prompt_len = inputs["input_ids"].shape[1]
        tokens = output.sequences[0, prompt_len:].tolist()
        stops = set(_as_list(self.model.generation_config.eos_token_id)) | {tokenizer.eos_token_id}
        finish = "stop" if tokens and tokens[-1] in stops else "length"
        kept = tokens[:-1] if finish == "stop" else tokens
        choice = {"index": 0, "message": {"role": "assistant",
                                          "content": tokenizer.decode(kept, skip_special_tokens=True)},
                  "finish_reason": finish, "logprobs": None}
        if want_logprobs:
            choice["logprobs"] = {"content": self._logprobs(output.scores, tokens, top_n, temperature)}
        return {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion", "created": int(time.time()),
                "model": self.name, "choices": [choice],
                "usage": {"prompt_tokens": prompt_len, "completion_tokens": len(tokens),
                          "total_tokens": prompt_len + len(tokens)}}

    def _logprobs(self, scores, tokens: list[int], top_n: int, temperature: float) -> list[dict]:
        """Each sampled token's log-probability under the distribution it was drawn from (OpenAI's
        choices[0].logprobs.content: token, logprob, bytes, top_logprobs)."""
        import torch

        tokenizer = self.processor.tokenizer
        entries = []
        for step, token in enumerate(tokens):
            logits = scores[step][0].float()
            # generate() hands back scores after its logits processors (temperature, top-p): what was sampled.
            logprobs = torch.log_softmax(logits, dim=-1)
            entry = self._token_entry(tokenizer, token, float(logprobs[token]))
            if top_n:
                values, indices = torch.topk(logprobs, top_n)
                entry["top_logprobs"] = [self._token_entry(tokenizer, int(i), float(v))
                                         for v, i in zip(values.tolist(), indices.tolist())]
            else:
                entry["top_logprobs"] = []
            entries.append(entry)
        return entries

    @staticmethod
    def _token_entry(tokenizer, token: int, logprob: float) -> dict:
        text = tokenizer.decode([token])
        return {"token": text, "logprob": max(logprob, -9999.0), "bytes": list(text.encode("utf-8"))}


def _as_list(value) -> list:
    return [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]


def make_handler(engine: Engine):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # one line per request on stderr, as uvicorn does
            sys.stderr.write(f"{self.address_string()} {format % args}\n")

        def reply(self, status: int, data: dict):
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def error(self, status: int, message: str, kind: str = "invalid_request_error"):
            self.reply(status, {"error": {"message": message, "type": kind, "code": status}})

        def do_GET(self):
            path = self.path.split("?", 1)[0].rstrip("/")
            if path == "/health":
                self.reply(200, {"status": "ok", "model": engine.name})
            elif path == "/v1/models":
                self.reply(200, {"object": "list", "data": [
                    {"id": engine.name, "object": "model", "created": 0, "owned_by": "flywheel"}]})
            else:
                self.error(404, "not found")

        def do_POST(self):
            if self.path.split("?", 1)[0].rstrip("/") != "/v1/chat/completions":
                return self.error(404, "not found")
            length = int(self.headers.get("Content-Length") or 0)
            if length <= 0 or length > MAX_BODY_BYTES:
                return self.error(413 if length else 400, "the body is missing or too large")
            try:
                body = json.loads(self.rfile.read(length))
                if not isinstance(body, dict):
                    raise RequestError("the body is a JSON object")
                if body.get("model") not in (None, engine.name):
                    return self.error(404, f"this server serves {engine.name!r}", "model_not_found")
                if body.get("stream"):
                    raise RequestError("streaming is not supported by this server")
                self.reply(200, engine.complete(body))
            except (RequestError, ValueError, TypeError) as error:
                self.error(400, str(error))
            except Exception as error:  # a failed generation is this request's 500, not the server's end
                sys.stderr.write(f"generation failed: {type(error).__name__}: {error}\n")
                self.error(500, "generation failed", "server_error")

    return Handler


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a save_pretrained checkpoint directory")
    parser.add_argument("--served-model-name", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100)
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:1 … (auto: cuda when there is one)")
    parser.add_argument("--max-new-tokens", type=int, default=1024)
    parser.add_argument("--error-file", default="", help="where the reason goes when the checkpoint cannot load")
    args = parser.parse_args(argv)
    try:
        import torch

        device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        model, processor = load(args.model, device)
    except Exception as error:  # whatever stops the load is the checkpoint's failure, said once
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        sys.stderr.write(f"cannot load {args.model}: {type(error).__name__}: {error}\n")
        if args.error_file:
            Path(args.error_file).write_text(reason[:2000])
        return LOAD_FAILED
    engine = Engine(model, processor, args.served_model_name, device, args.max_new_tokens)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(engine))
    server.daemon_threads = True
    sys.stderr.write(f"serving {args.served_model_name} on http://{args.host}:{args.port}/v1 ({device})\n")
    sys.stderr.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
