"""Dashboard events: product code says what changed, after commit; every open dashboard refreshes.

Events go through the Redis channel layer to /ws/dashboard/ (DashboardConsumer). They are hints
("the pools changed"), not data: the page re-reads its counts, so a lost event costs nothing but a
later refresh, and a burst of them is folded into one message per kind and second per process.
"""
import asyncio
import logging
import threading
import time

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)
DASHBOARD_GROUP = "dashboard"
KINDS = ("verdict", "routing", "pools", "devices", "runs", "benchmark")

_last_sent: dict[str, float] = {}
_trailing: dict[str, threading.Timer] = {}
_lock = threading.Lock()


def publish(kind: str, throttle_s: float = 0.5, **data) -> None:
    """Send `kind` to open dashboards once the current transaction commits (at once outside one).

    Dashboards need hints, not every change: at most one message of this kind per `throttle_s`
    and process; one that falls inside the window is sent at its end instead, so the last change
    is never lost. (Unthrottled, the Redis round trip tripled the cost of judging a trajectory.)
    """
    if kind not in KINDS:
        raise ValueError(f"unknown dashboard event {kind!r}; known: {', '.join(KINDS)}")
    transaction.on_commit(lambda: _send_throttled({"kind": kind, **data}, throttle_s))


def _send_throttled(event: dict, throttle_s: float) -> None:
    kind = event["kind"]
    if throttle_s:
        with _lock:
            wait = _last_sent.get(kind, float("-inf")) + throttle_s - time.monotonic()
            if wait > 0:
                if kind not in _trailing:
                    timer = threading.Timer(wait, _send_trailing, args=(event,))
                    timer.daemon = True
                    _trailing[kind] = timer
                    timer.start()
                return
            _last_sent[kind] = time.monotonic()
    _send(event)


def _send_trailing(event: dict) -> None:
    with _lock:
        _trailing.pop(event["kind"], None)
        _last_sent[event["kind"]] = time.monotonic()
    _send(event)


def _send(event: dict) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: synchronous code (a worker, a view's thread)
        _group_send(event)
    else:  # called from a thread that runs an event loop: async_to_sync cannot block it
        threading.Thread(target=_group_send, args=(event,), daemon=True).start()


def _group_send(event: dict) -> None:
    try:
        async_to_sync(get_channel_layer().group_send)(
            DASHBOARD_GROUP, {"type": "dashboard.event", "event": event})
    except Exception as error:  # the data path never fails because a dashboard could not be told
        log.warning("dashboard event %s not sent: %s", event.get("kind"), error)


def on_lease_changed(sender, device_id, holder, change, **kwargs):
    publish("devices", device=device_id, change=change)
