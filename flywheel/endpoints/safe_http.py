"""The one way the console calls a model endpoint: JSON over http(s), checked, bounded, no redirects.

Every call re-checks the URL (url_safety: DNS may have changed since registration) and connects to
the very address it checked, so a name cannot be re-pointed between the check and the connection.
Redirects are never followed; a reply larger than MODEL_ENDPOINT_MAX_REPLY_BYTES is cut off and
refused; the whole call has one deadline. Failures say what failed, never what the reply said.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

import urllib3
from django.conf import settings
from urllib3.exceptions import HTTPError as TransportError

from flywheel.endpoints.url_safety import UnsafeEndpointURL, resolve_endpoint
from flywheel.rules.numbers import whole_number


class EndpointCallFailed(Exception):
    """The call did not produce a usable reply. `retryable`: might a later attempt succeed?"""

    retryable = True


class EndpointRefused(EndpointCallFailed):
    """The call is refused by rule (unsafe URL, redirect, oversized reply): retrying cannot help."""

    retryable = False


@dataclass(frozen=True)
class JsonReply:
    status: int
    data: object   # the parsed JSON body, or None when the body is not JSON
    size: int      # bytes received


def max_reply_bytes() -> int:
    return settings.MODEL_ENDPOINT_MAX_REPLY_BYTES


def request_json(method: str, url: str, body: dict | None = None, timeout: float = 60.0,
                 max_bytes: int | None = None) -> JsonReply:
    """Send `body` as JSON (if any) and read a JSON reply of at most `max_bytes` within `timeout` s."""
    try:
        target = resolve_endpoint(url)
    except UnsafeEndpointURL as error:
        raise EndpointRefused(str(error)) from None
    limit = max_reply_bytes() if max_bytes is None else max_bytes
    deadline = time.monotonic() + timeout
    pool_class, options = urllib3.HTTPConnectionPool, {}
    if target.scheme == "https":
        pool_class = urllib3.HTTPSConnectionPool
        options = {"server_hostname": target.host, "assert_hostname": target.host}
    pool = pool_class(target.addresses[0], target.port, timeout=urllib3.Timeout(connect=timeout, read=timeout),
                      retries=False, maxsize=1, **options)
    headers = {"Host": target.host_header, "Accept": "application/json", "User-Agent": "flywheel-console"}
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        response = pool.urlopen(method, target.path, body=payload, headers=headers, redirect=False,
                                retries=False, preload_content=False, assert_same_host=False)
        try:
            return _read_reply(response, limit, deadline)
        finally:
            response.release_conn()
    except (TransportError, OSError) as error:
        raise EndpointCallFailed(f"{type(error).__name__}: {_reason(error)}") from None
    finally:
        pool.close()


def _read_reply(response, limit: int, deadline: float) -> JsonReply:
    if 300 <= response.status < 400:
        raise EndpointRefused(f"the endpoint answered HTTP {response.status}, a redirect; redirects are not followed")
    declared = whole_number(response.headers.get("Content-Length", ""), maximum=10**30)
    if declared is not None and declared > limit:
        raise EndpointRefused(f"the reply ({declared} bytes) is over the {limit}-byte limit")
    chunks, size = [], 0
    for chunk in response.stream(64 * 1024, decode_content=True):
        size += len(chunk)
        if size > limit:
            raise EndpointRefused(f"the reply is over the {limit}-byte limit")
        if time.monotonic() > deadline:
            raise EndpointCallFailed("TimeoutError: the reply took longer than the call's timeout")
        chunks.append(chunk)
    try:
        data = json.loads(b"".join(chunks).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        data = None
    return JsonReply(response.status, data, size)


def _reason(error: Exception) -> str:
    """urllib3 wraps the cause (refused, timed out...); its own words, without any reply text."""
    reason = getattr(error, "reason", None) or error
    return str(reason)[:200]
