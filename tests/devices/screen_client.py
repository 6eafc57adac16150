"""Helpers for tests that open a phone's screen socket in-process (Channels' communicator)."""
import asyncio
import json

from channels.db import database_sync_to_async  # closes the DB connections it opens
from channels.testing import WebsocketCommunicator
from django.conf import settings

from config.asgi import application
from devices.streaming.frames import unpack


def session_cookie_for(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


async def open_screen(device_id, user=None):
    """(communicator, connected, close code); a hello message waits when connected."""
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if user is not None:
        headers.append((b"cookie", (await database_sync_to_async(session_cookie_for)(user)).encode()))
    communicator = WebsocketCommunicator(application, f"/ws/devices/{device_id}/screen/", headers=headers)
    connected, code = await communicator.connect(timeout=10)
    return communicator, connected, code


async def receive(communicator, timeout=10):
    """The next message: ("json", dict) or ("frame", header dict, jpeg bytes)."""
    output = await communicator.receive_output(timeout)
    if output["type"] == "websocket.close":
        return ("closed", output.get("code"))
    if output.get("bytes") is not None:
        header, jpeg = unpack(output["bytes"])
        return ("frame", header, jpeg)
    return ("json", json.loads(output["text"]))


async def receive_json(communicator, kind, timeout=10, within=60):
    """Skip frames until a JSON message of type `kind` arrives (acking frames so more come); fail,
    rather than wait forever, when it has not come `within` seconds while other messages flow."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no {kind!r} message within {within} s")
        message = await receive(communicator, timeout)
        if message[0] == "json" and message[1]["type"] == kind:
            return message[1]
        if message[0] == "frame":
            await communicator.send_json_to({"type": "ack", "seq": message[1]["seq"]})


async def receive_frame(communicator, timeout=10, with_pixels=True, ack=True, within=60):
    """The next frame (skipping JSON); acks it unless told not to."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no frame{' with pixels' if with_pixels else ''} within {within} s")
        message = await receive(communicator, timeout)
        if message[0] == "frame":
            if ack:
                await communicator.send_json_to({"type": "ack", "seq": message[1]["seq"]})
            if message[2] or not with_pixels:
                return message[1], message[2]
        elif message[0] == "closed":
            raise AssertionError(f"socket closed: {message[1]}")


def element_center(phone, label):
    """The centre of the first clickable element whose text or content-desc is `label`."""
    import re
    import xml.etree.ElementTree as ElementTree

    root = ElementTree.fromstring(phone.dump_hierarchy().encode())
    for node in root.iter("node"):
        if label in (node.get("text"), node.get("content-desc")) and node.get("clickable") == "true":
            left, top, right, bottom = map(int, re.findall(r"\d+", node.get("bounds")))
            return (left + right) // 2, (top + bottom) // 2
    raise AssertionError(f"no clickable {label!r} on the screen")
