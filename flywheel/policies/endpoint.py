"""A policy served by any OpenAI-compatible endpoint (vLLM's `vllm serve` is the target).

Screenshots travel as base64 data URLs; sampling is pinned (so a rerun asks the same question);
timeouts and retries are bounded; the request and the parsed reply come back as `model_io` so they
are stored with the step (image payloads are replaced by their content hash: the screenshots
themselves are stored once, content-addressed, with the steps). Every call goes through
safe_http: the URL is checked again, redirects are refused and replies are size-capped.
"""
from __future__ import annotations

import base64
import hashlib
import math
import time

from flywheel.endpoints.safe_http import EndpointCallFailed, request_json
from flywheel.policies.base import PolicyError, PolicyState, Proposal
from flywheel.policies.protocol import DEFAULT_COORDS, DEFAULT_K, ProtocolError, build_messages, parse_output

# The pinned defaults; a ModelVersion's `sampling` may override these keys only.
PINNED_SAMPLING = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 1024, "seed": 0}
SAMPLING_KEYS = {"temperature", "top_p", "top_k", "max_tokens", "seed", "stop", "repetition_penalty",
                 "presence_penalty", "frequency_penalty", "logprobs", "min_p"}
# Protocol settings that may also live in `sampling` (they shape the prompt, not the sampler).
PROTOCOL_KEYS = {"k_screenshots", "coords", "timeout_s", "retries"}
RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}
RL_TEMPERATURE = 0.7  # the RL line's sampling temperature unless a version's sampling["rl_temperature"] says


def _redact_images(messages: list[dict]) -> list[dict]:
    """The request as sent, with each data URL replaced by the image's sha256."""
    redacted = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            content = [
                {"type": "image_url", "image_url": {"url": "sha256:" + hashlib.sha256(
                    _data_url_bytes(part["image_url"]["url"])).hexdigest()}}
                if part.get("type") == "image_url" else part for part in content]
        redacted.append({**message, "content": content})
    return redacted


def _data_url_bytes(url: str) -> bytes:
    return base64.b64decode(url.split(",", 1)[1]) if url.startswith("data:") else url.encode()


def state_messages(state: PolicyState, k: int, coords: str = DEFAULT_COORDS) -> list[dict]:
    """The protocol's chat messages for a policy state, the foreground app as context: what every
    line's endpoint policy sends, and what the environment service gives its clients."""
    context = {"package": state.foreground.get("package"), "activity": state.foreground.get("activity")}
    return build_messages(state.goal, state.history, state.screenshots, k=k, coords=coords,
                          known_path=state.known_path, context=context)


class EndpointPolicy:
    def __init__(self, url: str, model: str, sampling: dict | None = None, k: int = DEFAULT_K,
                 coords: str = DEFAULT_COORDS, timeout: float = 60.0, retries: int = 2, name: str = ""):
        self.base_url = url.rstrip("/")
        self.model = model
        sampling = dict(sampling or {})
        self.k = int(sampling.pop("k_screenshots", k))
        self.coords = sampling.pop("coords", coords)
        self.timeout = float(sampling.pop("timeout_s", timeout))
        self.retries = int(sampling.pop("retries", retries))
        self.sampling = {**PINNED_SAMPLING, **{key: value for key, value in sampling.items()
                                               if key in SAMPLING_KEYS}}
        self.name = name or f"{model}@{self.base_url}"

    @classmethod
    def from_model_version(cls, version, line: str = ""):
        sampling = dict(version.sampling or {})
        rl_temperature = float(sampling.pop("rl_temperature", RL_TEMPERATURE))
        policy = cls(version.endpoint_url, version.served_model_name or version.name, sampling=sampling,
                     name=version.name)
        if line == "rl":
            # A GRPO group's G rollouts must be able to disagree: sampled, with no fixed seed (one seed
            # would give every rollout of a prompt the same tokens), and the token log-probabilities kept.
            policy.sampling.pop("seed", None)
            policy.sampling.update(temperature=rl_temperature, logprobs=True)
        return policy

    def request_body(self, state: PolicyState) -> dict:
        messages = state_messages(state, k=self.k, coords=self.coords)
        return {"model": self.model, "messages": messages, **self.sampling}

    def propose(self, state: PolicyState) -> Proposal:
        body = self.request_body(state)
        model_io = {"url": self.base_url + "/chat/completions",
                    "request": {**body, "messages": _redact_images(body["messages"])}, "attempts": []}
        response = self._call(body, model_io)
        try:
            text = response["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):  # not an OpenAI answer: the server's fault, not the model's
            raise PolicyError("the endpoint's answer has no choices[0].message.content", model_io,
                              endpoint_failed=True) from None
        if isinstance(text, list):  # some servers answer content parts
            text = "".join(part.get("text", "") for part in text if isinstance(part, dict))
        try:
            parsed = parse_output(text, screen=state.screen_size, default_coords=self.coords)
        except ProtocolError as error:
            model_io["parse_error"] = str(error)
            raise PolicyError(f"the model's output does not follow the protocol: {error}", model_io) from None
        model_io["parse_notes"] = parsed.notes
        return Proposal(cot=parsed.cot, action=parsed.action, confidence=_confidence(response),
                        model_io=model_io, policy=self.name, sampled=sampled_logprobs(response, body))

    def _call(self, body: dict, model_io: dict) -> dict:
        url = self.base_url + "/chat/completions"
        for attempt in range(self.retries + 1):
            started = time.monotonic()
            record = {"attempt": attempt + 1}
            reply = failure = None
            try:
                reply = request_json("POST", url, body, timeout=self.timeout)
            except EndpointCallFailed as error:
                failure = error
                record["error"] = str(error)
            record["latency_ms"] = round((time.monotonic() - started) * 1000)
            model_io["attempts"].append(record)
            if failure is not None:
                if not failure.retryable:
                    raise PolicyError(f"the endpoint call was refused: {failure}", model_io, endpoint_failed=True)
            else:
                record.update(status=reply.status, bytes=reply.size)
                # Only a parsed JSON reply is kept (its size is capped); a non-JSON body is not.
                model_io["response"] = reply.data if reply.data is not None else {"not_json": True}
                if reply.status == 200 and isinstance(reply.data, dict):
                    return reply.data
                if reply.status not in RETRYABLE_STATUS:
                    raise PolicyError(f"the endpoint answered HTTP {reply.status}"
                                      + ("" if reply.status != 200 else " without a JSON object"), model_io,
                                      # a 5xx, or a 200 that is not JSON: the server broke
                                      endpoint_failed=reply.status == 200 or 500 <= reply.status < 600)
            if attempt < self.retries:
                time.sleep(min(4.0, 0.25 * 2 ** attempt))
        last = model_io["attempts"][-1]
        raise PolicyError(f"the endpoint failed {len(model_io['attempts'])} time(s); last: "
                          f"{last.get('error') or 'HTTP ' + str(last.get('status'))}", model_io, endpoint_failed=True)


def _confidence(response: dict) -> float | None:
    """exp(mean token log-probability) when the server returned logprobs; else unknown."""
    try:
        tokens = response["choices"][0]["logprobs"]["content"]
        values = [token["logprob"] for token in tokens]
    except (KeyError, IndexError, TypeError):
        return None
    return round(math.exp(sum(values) / len(values)), 4) if values else None


def sampled_logprobs(response: dict, body: dict) -> dict | None:
    """The sampled completion's tokens and log-probabilities (choices[0].logprobs.content) with the
    sampler's settings, when the server returned them; else None."""
    try:
        content = response["choices"][0]["logprobs"]["content"]
        tokens = [str(entry["token"]) for entry in content]
        logprobs = [float(entry["logprob"]) for entry in content]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    if not tokens or not all(math.isfinite(value) for value in logprobs):
        return None
    return {"temperature": float(body.get("temperature") or 0.0), "top_p": float(body.get("top_p") or 1.0),
            "top_k": int(body.get("top_k") or 0), "tokens": tokens, "logprobs": logprobs}


def check_endpoint_health(url: str, timeout: float = 5.0, model: str = "") -> dict:
    """GET {url}/models: is the server up, and does it serve `model`?"""
    started = time.monotonic()
    try:
        reply = request_json("GET", url.rstrip("/") + "/models", timeout=timeout)
    except EndpointCallFailed as error:
        return {"ok": False, "error": str(error), "latency_ms": _ms(started)}
    if reply.status != 200:
        return {"ok": False, "error": f"HTTP {reply.status}", "latency_ms": _ms(started)}
    entries = reply.data.get("data") if isinstance(reply.data, dict) else None
    if not isinstance(entries, list):
        return {"ok": False, "error": "the reply is not an OpenAI model list", "latency_ms": _ms(started)}
    models = [str(entry.get("id")) for entry in entries if isinstance(entry, dict)]
    result = {"ok": True, "models": models, "latency_ms": _ms(started)}
    if model and model not in models:
        result.update(ok=False, error=f"the server does not serve {model!r} (it serves {', '.join(models) or 'nothing'})")
    return result


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
