"""Asking an OpenAI-compatible chat endpoint for one JSON answer (the LLM judge's and the gates' way).

`version` is any object with `name`, `served_model_name` and `endpoint_url` (a ModelVersion of kind
endpoint, looked up by the caller). Every failure (the call, the status, the answer's shape) is a
JudgeUnavailable that says what failed, so callers fall back to their rules.
"""
import json
import re

from flywheel.endpoints.frames import user_content
from flywheel.endpoints.safe_http import EndpointCallFailed, request_json


class JudgeUnavailable(Exception):
    pass


def ask_json(version, system: str, user: str, timeout: float = 60, frames=(), **options) -> dict:
    """One JSON answer to `user`; `frames` (PNG bytes, flywheel/endpoints/frames.py) follow the text
    as image parts, as the policy sends its screenshots. `options` override the body's sampling
    (temperature, seed, max_tokens)."""
    content = user_content(user, frames) if frames else user
    return chat_json(version, [{"role": "system", "content": system}, {"role": "user", "content": content}],
                     timeout, **options)


def chat_json(version, messages: list[dict], timeout: float = 60, **options) -> dict:
    body = {"model": version.served_model_name or version.name, "temperature": 0, "max_tokens": 800,
            **options, "messages": messages}
    try:
        reply = request_json("POST", version.endpoint_url.rstrip("/") + "/chat/completions", body, timeout)
    except EndpointCallFailed as error:
        raise JudgeUnavailable(f"judge endpoint call failed: {error}") from error
    response = reply.data
    if reply.status != 200 or not isinstance(response, dict):
        raise JudgeUnavailable(f"judge endpoint answered HTTP {reply.status}")
    try:
        content = response["choices"][0]["message"]["content"]
        match = re.search(r"\{.*\}", content, re.DOTALL)
        return json.loads(match.group(0))
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as error:
        raise JudgeUnavailable(f"judge output is not JSON: {error}") from error
