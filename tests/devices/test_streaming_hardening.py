"""The screen socket after connect: permission follows the lease (an annotator whose lease ends
stops seeing the phone within a second, close 4403); `view` messages are validated and throttled;
the JPEG renditions kept per picture are bounded. On the virtual farm over ADB."""
import asyncio
import time

import pytest
from channels.db import database_sync_to_async  # closes the DB connections it opens

from devices import leases
from devices.models import Lease
from devices.streaming import consumer as screen_consumer
from devices.streaming.frames import MAX_RENDITIONS, Picture
from tests.devices.screen_client import open_screen, receive, receive_frame, receive_json
from tests.devices.streaming_fixtures import connection

pytestmark = pytest.mark.django_db(transaction=True)


async def next_json(communicator, kind, seconds=10):
    """receive_json with an overall deadline (frames keep coming meanwhile)."""
    return await asyncio.wait_for(receive_json(communicator, kind), seconds)


async def watch(device, user, width=270, height=600):
    communicator, connected, code = await open_screen(device.pk, user)
    assert connected, code
    await receive_json(communicator, "hello")
    await communicator.send_json_to({"type": "view", "width": width, "height": height, "max_fps": 10})
    await receive_frame(communicator, with_pixels=False)
    return communicator


async def closed_within(communicator, seconds):
    """(error message, close code, seconds it took), skipping frames still on their way."""
    started, error = time.monotonic(), None
    while time.monotonic() - started < seconds:
        message = await receive(communicator, timeout=seconds)
        if message[0] == "json" and message[1]["type"] == "error":
            error = message[1]
        if message[0] == "closed":
            return error, message[1], time.monotonic() - started
        if message[0] == "frame":
            await communicator.send_json_to({"type": "ack", "seq": message[1]["seq"]})
    raise AssertionError(f"still open after {seconds} s")


@pytest.mark.parametrize("end", ["released", "taken by an admin"])
async def test_an_annotator_whose_lease_ends_stops_seeing_the_phone(screen_phones, role_users, end):
    device = screen_phones[0]
    lease = await database_sync_to_async(leases.acquire)(device, holder="semi-auto:trajectory:1",
                                                        user=role_users["annotator"])
    communicator = await watch(device, role_users["annotator"])
    if end == "released":
        await database_sync_to_async(leases.release)(lease)
    else:
        await database_sync_to_async(leases.acquire)(device, holder="console:admin-user", user=role_users["admin"],
                                                     force=True)
    error, code, took = await closed_within(communicator, 5)
    assert code == 4403 and error["code"] == "not_your_phone"
    assert took < 1.0, f"closed after {took:.2f} s"
    await database_sync_to_async(Lease.objects.filter(released_at__isnull=True).update)(released_at=lease.acquired_at)


async def test_a_lease_that_lapses_unannounced_also_ends_watching(screen_phones, role_users, monkeypatch):
    monkeypatch.setattr(screen_consumer, "PERMISSION_RECHECK_SECONDS", 0.3, raising=False)
    device = screen_phones[1]
    lease = await database_sync_to_async(leases.acquire)(device, holder="semi-auto:trajectory:2",
                                                        user=role_users["annotator"])
    communicator = await watch(device, role_users["annotator"])
    # Past its expiry, with no sweep to announce it.
    await database_sync_to_async(Lease.objects.filter(pk=lease.pk).update)(expires_at=lease.acquired_at)
    error, code, _ = await closed_within(communicator, 5)
    assert code == 4403 and error["code"] == "not_your_phone"


async def test_a_manager_keeps_watching_through_lease_changes(screen_phones, role_users):
    device = screen_phones[2]
    communicator = await watch(device, role_users["manager"])
    lease = await database_sync_to_async(leases.acquire)(device, holder="someone", user=role_users["annotator"])
    assert (await next_json(communicator, "lease"))["holder"] == "someone"
    await database_sync_to_async(leases.release)(lease)
    assert (await next_json(communicator, "lease"))["holder"] == ""
    header, _ = await receive_frame(communicator, with_pixels=False)
    assert header["seq"] > 0
    await communicator.disconnect()


BAD_VIEWS = [
    '{"type": "view", "width": Infinity, "height": 600}',
    '{"type": "view", "width": 270, "height": -Infinity}',
    '{"type": "view", "width": NaN, "height": 600}',
    '{"type": "view", "width": 1e999, "height": 600}',
    '{"type": "view", "width": 1' + "0" * 400 + ', "height": 600}',
    '{"type": "view", "width": -270, "height": 600}',
    '{"type": "view", "width": 0, "height": 600}',
    '{"type": "view", "width": 270, "height": 600, "max_fps": Infinity}',
    '{"type": "view", "width": 270, "height": 600, "max_fps": "fast"}',
    '{"type": "view", "width": 100000, "height": 600}',
    '{"type": "view", "width": [270], "height": 600}',
    '{"type": "view", "width": true, "height": 600}',
    '{"type": "view", "width": 270',
    '{"type": "view", "width": ' + "[" * 100000 + "]" * 100000 + '}',
]


async def test_bad_view_messages_get_an_error_and_the_socket_keeps_streaming(screen_phones, role_users):
    communicator = await watch(screen_phones[0], role_users["manager"])
    for payload in BAD_VIEWS:
        await communicator.send_to(text_data=payload)
        error = await next_json(communicator, "error")
        assert error["code"] == "bad_message", (payload[:80], error)
        await asyncio.sleep(0.25)  # below the view rate limit
    await communicator.send_json_to({"type": "view", "width": 135, "height": 300, "max_fps": 10})
    while True:
        header, _ = await receive_frame(communicator)
        if header["width"] == 135:
            break
    await communicator.disconnect()


async def test_view_messages_are_throttled(screen_phones, role_users):
    communicator = await watch(screen_phones[1], role_users["manager"])
    for width in range(100, 130):
        await communicator.send_json_to({"type": "view", "width": width, "height": 600, "max_fps": 10})
    error = await next_json(communicator, "error")
    assert error["code"] == "too_many_views"
    await asyncio.sleep(1.1)
    await communicator.send_json_to({"type": "view", "width": 135, "height": 300, "max_fps": 10})
    while True:
        message = await receive(communicator)
        if message[0] == "frame":
            await communicator.send_json_to({"type": "ack", "seq": message[1]["seq"]})
            if message[1]["width"] == 135:
                break
    await communicator.disconnect()


def test_renditions_kept_per_picture_are_bounded(screen_phones):
    png = connection(screen_phones[0]).screencap_png()
    picture = Picture(1, (1080, 2400), png=png)
    for width in range(100, 130):
        jpeg, size = picture.jpeg((width, 2400))
        assert jpeg.startswith(b"\xff\xd8") and size[0] == width
    assert len(picture._jpegs) <= MAX_RENDITIONS
    again, _ = picture.jpeg((129, 2400))
    assert again == jpeg  # the most recent is kept
