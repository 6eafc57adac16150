"""Health of every runtime component, for /healthz and the admin page."""
import asyncio
import socket
import time
import uuid

import redis
from asgiref.sync import async_to_sync
from celery import current_app
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

from devices.phone import adb_endpoint


def _timed(check):
    started = time.monotonic()
    try:
        detail = check()
        result = {"ok": True, **(detail or {})}
    except Exception as error:  # a health check reports failures, it never raises
        result = {"ok": False, "error": f"{type(error).__name__}: {error}"}
    result["ms"] = round((time.monotonic() - started) * 1000, 1)
    return result


def check_database():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return {"vendor": connection.vendor}


def check_redis():
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    try:
        client.ping()
    finally:
        client.close()
    return {}


def check_celery():
    replies = current_app.control.ping(timeout=1.0) or []
    workers = sorted(name for reply in replies for name in reply)
    if not workers:
        raise RuntimeError("no Celery worker answered ping")
    return {"workers": workers}


def check_channel_layer():
    layer = get_channel_layer()

    async def round_trip():
        channel = await layer.new_channel("healthz.")
        token = uuid.uuid4().hex
        await layer.send(channel, {"type": "healthz.ping", "token": token})
        message = await asyncio.wait_for(layer.receive(channel), timeout=2)
        if message.get("token") != token:
            raise RuntimeError("channel layer returned a different message")

    async_to_sync(round_trip)()
    return {}


def adb_server_version(address, timeout=1.0):
    """Ask an ADB server for its version over the smart-socket protocol."""
    with socket.create_connection(adb_endpoint(address), timeout=timeout) as sock:
        request = b"host:version"
        sock.sendall(b"%04x" % len(request) + request)
        status = sock.recv(4)
        if status != b"OKAY":
            raise RuntimeError(f"ADB server answered {status!r}")
        length = int(sock.recv(4), 16)
        return int(sock.recv(length), 16)


def check_adb_servers():
    servers = {}
    for address in settings.ADB_SERVERS:
        servers[address] = _timed(lambda a=address: {"version": adb_server_version(a)})
    return servers


def system_health():
    """Return (status code, body): 503 when the database or Redis is down."""
    components = {
        "database": _timed(check_database),
        "redis": _timed(check_redis),
    }
    components["celery"] = _timed(check_celery) if components["redis"]["ok"] else {
        "ok": False, "error": "Redis is down"}
    components["channel_layer"] = _timed(check_channel_layer) if components["redis"]["ok"] else {
        "ok": False, "error": "Redis is down"}
    adb = check_adb_servers()
    components["adb_servers"] = adb
    everything_ok = all(c["ok"] for k, c in components.items() if k != "adb_servers") and all(
        s["ok"] for s in adb.values())
    critical_ok = components["database"]["ok"] and components["redis"]["ok"]
    body = {"status": "ok" if everything_ok else ("degraded" if critical_ok else "down"),
            "components": components}
    return (200 if critical_ok else 503), body


def public_summary(body: dict) -> dict:
    """What anyone may see: "ok"/"down" per component, nothing about how or where it runs."""
    def word(component):
        return "ok" if component.get("ok") else "down"

    components = dict(body["components"])
    adb = components.pop("adb_servers", {})
    words = {name: word(component) for name, component in components.items()}
    words["adb_servers"] = "ok" if all(server.get("ok") for server in adb.values()) else "down"
    return {"status": body["status"], "components": words}
