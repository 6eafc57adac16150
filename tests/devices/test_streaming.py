"""The screen socket: roles, frames of the requested size, newest-frame flow control, input."""
import asyncio
import io

import pytest
from channels.db import database_sync_to_async  # closes the DB connections it opens
from PIL import Image

from devices.streaming import control, senders
from tests.devices.screen_client import element_center, open_screen, receive, receive_frame, receive_json
from tests.devices.streaming_fixtures import connection, farm_control

pytestmark = pytest.mark.django_db(transaction=True)


async def watch(device, user, width=270, height=600, max_fps=30):
    communicator, connected, code = await open_screen(device.pk, user)
    assert connected, code
    hello = await receive_json(communicator, "hello")
    await communicator.send_json_to({"type": "view", "width": width, "height": height, "max_fps": max_fps})
    return communicator, hello


async def test_roles_decide_who_may_watch(screen_phones, role_users):
    device = screen_phones[0]
    _, connected, code = await open_screen(device.pk)
    assert not connected and code == 4401
    # An annotator watches only the phone their session leases.
    communicator, connected, _ = await open_screen(device.pk, role_users["annotator"])
    kind, message = await receive(communicator)
    assert message["code"] == "not_your_phone" and await receive(communicator) == ("closed", 4403)
    communicator, hello = await watch(device, role_users["manager"])
    assert hello["device"]["serial"] == device.serial and hello["can_control"] is False
    await communicator.disconnect()
    from devices import leases

    lease = await database_sync_to_async(leases.acquire)(device, holder="semi-auto:trajectory:1",
                                                user=role_users["annotator"])
    communicator, hello = await watch(device, role_users["annotator"])
    assert hello["can_control"] is False
    frame = await receive_frame(communicator)
    assert frame is not None
    await communicator.disconnect()
    await database_sync_to_async(leases.release)(lease)


async def test_an_unknown_phone_gets_a_clear_error_and_close(screen_phones, role_users):
    communicator, connected, _ = await open_screen(987654, role_users["admin"])
    assert connected  # accepted only to explain why it closes
    kind, message = await receive(communicator)
    assert message == {"type": "error", "code": "unknown_device", "message": "No phone with id 987654."}
    assert await receive(communicator) == ("closed", 4404)


async def test_frames_are_jpegs_of_the_requested_size(screen_phones, role_users):
    communicator, _ = await watch(screen_phones[0], role_users["manager"], 270, 600)
    header, jpeg = await receive_frame(communicator)
    image = Image.open(io.BytesIO(jpeg))
    assert image.format == "JPEG" and image.size == (270, 600)
    assert (header["width"], header["height"]) == (270, 600)
    assert (header["phone_width"], header["phone_height"]) == (1080, 2400)
    # The viewer resizes its canvas: frames follow.
    await communicator.send_json_to({"type": "view", "width": 135, "height": 300, "max_fps": 30})
    while True:
        header, jpeg = await receive_frame(communicator)
        if header["width"] == 135:
            break
    assert Image.open(io.BytesIO(jpeg)).size == (135, 300)
    await communicator.disconnect()


async def test_a_slow_viewer_gets_the_newest_frame_not_a_queue(screen_phones, role_users):
    communicator, _ = await watch(screen_phones[0], role_users["manager"])
    first, _ = await receive_frame(communicator, with_pixels=False, ack=False)
    # Not acked: nothing more is sent however many captures happen meanwhile.
    assert await communicator.receive_nothing(timeout=1.0)
    await communicator.send_json_to({"type": "ack", "seq": first["seq"]})
    second, _ = await receive_frame(communicator, with_pixels=False)
    assert second["seq"] >= first["seq"] + 3, "frames captured while unacked were dropped"
    await communicator.send_json_to({"type": "stats"})
    stats = await receive_json(communicator, "stats")
    assert stats["dropped"] >= second["seq"] - first["seq"] - 1
    assert stats["capture"]["changed"] <= 2, "an unchanged screen is not re-encoded"
    await communicator.disconnect()


async def test_a_hidden_page_pauses_its_stream(screen_phones, role_users):
    communicator, _ = await watch(screen_phones[0], role_users["manager"])
    await receive_frame(communicator, with_pixels=False)
    await communicator.send_json_to({"type": "pause"})
    await asyncio.sleep(0.3)
    while not await communicator.receive_nothing(timeout=0.5):
        await receive(communicator)  # a frame that was already on its way
    await communicator.send_json_to({"type": "resume"})
    header, jpeg = await receive_frame(communicator, with_pixels=False)
    assert header["seq"] > 0
    await communicator.disconnect()


async def test_only_the_admin_holding_the_lease_controls_the_phone(screen_phones, role_users):
    device = screen_phones[1]
    phone = connection(device)
    x, y = await database_sync_to_async(element_center)(phone, "Chatter")
    for role in ("manager", "admin"):  # watching is not controlling
        communicator, _ = await watch(device, role_users[role], 270, 600)
        header, _ = await receive_frame(communicator)
        await communicator.send_json_to({"type": "input", "id": 1, "action": "tap", "x": x / 4, "y": y / 4,
                                         "frame": {"seq": header["seq"], "width": 270, "height": 600}})
        result = await receive_json(communicator, "input_result")
        assert result["ok"] is False and result["error"] == "no_lease", result
        assert "take the lease" in result["reason"]
        await communicator.disconnect()
    assert (await database_sync_to_async(phone.foreground)())["package"].endswith("launcher")

    await database_sync_to_async(control.take_control)(device, role_users["admin"])
    communicator, hello = await watch(device, role_users["admin"], 270, 600)
    assert hello["can_control"] is True
    header, before = await receive_frame(communicator)
    await communicator.send_json_to({"type": "input", "id": 2, "action": "tap", "x": x / 4, "y": y / 4,
                                     "frame": {"seq": header["seq"], "width": 270, "height": 600}})
    result = await receive_json(communicator, "input_result")
    assert result["ok"] is True, result
    assert result["action"] == {"action": "click", "point": [x, y]}  # scaled by that frame's size
    assert not (await database_sync_to_async(phone.foreground)())["package"].endswith("launcher")
    while True:  # a new picture follows
        _, after = await receive_frame(communicator)
        if after != before:
            break
    await communicator.send_json_to({"type": "input", "id": 3, "action": "key", "key": "home"})
    assert (await receive_json(communicator, "input_result"))["ok"] is True
    await communicator.disconnect()


async def test_input_aimed_at_a_stale_frame_is_refused(screen_phones, role_users, settings):
    settings.STREAM_STALE_INPUT_MS = 300
    device = screen_phones[2]
    phone = connection(device)
    await database_sync_to_async(control.take_control)(device, role_users["admin"])
    communicator, _ = await watch(device, role_users["admin"], 270, 600)
    old, _ = await receive_frame(communicator)
    tap = {"type": "input", "action": "tap", "x": 10, "y": 10}

    await communicator.send_json_to({**tap, "id": 1, "frame": {"seq": 10 ** 9, "width": 270, "height": 600}})
    result = await receive_json(communicator, "input_result")
    assert result["error"] == "stale_frame" and "unknown or too old" in result["reason"]

    size = {"width": old["width"], "height": old["height"]}  # this phone's aspect ratio is its own
    await communicator.send_json_to({**tap, "id": 2, "frame": {"seq": old["seq"], "width": 540, "height": 1200}})
    result = await receive_json(communicator, "input_result")
    assert result["error"] == "bad_message" and f"{old['width']}x{old['height']}" in result["reason"]

    # The screen changes (an app opens) and the old frame ages: a tap aimed at it is refused...
    x, y = await database_sync_to_async(element_center)(phone, "Chatter")
    await database_sync_to_async(phone.shell)(f"input tap {x} {y}")
    while True:
        newest, jpeg = await receive_frame(communicator)
        if jpeg and newest["seq"] > old["seq"]:
            break
    await asyncio.sleep(0.4)
    await communicator.send_json_to({**tap, "id": 3, "frame": {"seq": old["seq"], **size}})
    result = await receive_json(communicator, "input_result")
    assert result["error"] == "stale_frame" and "changed since" in result["reason"], result
    # ...while the same tap aimed at the newest frame is placed and run.
    await communicator.send_json_to({**tap, "id": 4, "frame": {"seq": newest["seq"], **size}})
    result = await receive_json(communicator, "input_result")
    assert result["ok"] is True, result
    await communicator.send_json_to({"type": "input", "id": 5, "action": "key", "key": "home"})
    assert (await receive_json(communicator, "input_result"))["ok"]
    await communicator.disconnect()


async def test_malformed_messages_get_clear_errors_and_the_socket_keeps_working(screen_phones, role_users):
    communicator, _ = await watch(screen_phones[0], role_users["admin"])
    await receive_frame(communicator, with_pixels=False)
    bad = [
        ("text", "not json", "JSON objects"),
        ("text", "[1, 2]", "JSON objects"),
        ("text", '{"type": "dance"}', "unknown message type 'dance'"),
        ("bytes", b"\x00\x01", "JSON objects"),
        ("text", '{"type": "view", "width": "wide", "height": 10}', "positive numbers"),
    ]
    for kind, payload, expected in bad:
        if kind == "text":
            await communicator.send_to(text_data=payload)
        else:
            await communicator.send_to(bytes_data=payload)
        error = await receive_json(communicator, "error")
        assert error["code"] == "bad_message" and expected in error["message"], (payload, error)
    await communicator.send_json_to({"type": "input", "id": 9, "action": "fly"})
    result = await receive_json(communicator, "input_result")
    assert result["error"] == "bad_message" and "'action' must be" in result["reason"]
    await communicator.send_json_to({"type": "input", "id": 10, "action": "tap", "x": 1, "y": 2})
    result = await receive_json(communicator, "input_result")
    assert result["error"] == "bad_message" and "frame" in result["reason"]
    header, _ = await receive_frame(communicator, with_pixels=False)  # still streaming
    assert header["seq"] > 0
    await communicator.disconnect()


async def test_a_vanished_phone_is_reported_and_others_keep_streaming(screen_phones, role_users):
    gone, other = screen_phones[0], screen_phones[1]
    await database_sync_to_async(control.take_control)(gone, role_users["admin"])
    watcher, _ = await watch(gone, role_users["admin"])
    bystander, _ = await watch(other, role_users["manager"])
    await receive_frame(watcher, with_pixels=False)
    await database_sync_to_async(farm_control)(gone, "host:sim-disconnect")
    try:
        message = await receive_json(watcher, "phone_unavailable")
        assert gone.serial in message["message"]
        await watcher.send_json_to({"type": "input", "id": 1, "action": "key", "key": "back"})
        result = await receive_json(watcher, "input_result")
        assert result["ok"] is False and result["error"] == "phone_unavailable", result
        for _ in range(3):  # the other phone's viewer is not affected
            await receive_frame(bystander, with_pixels=False)
    finally:
        await database_sync_to_async(farm_control)(gone, "host:sim-connect")
    await receive_json(watcher, "phone_back", timeout=15)
    header, _ = await receive_frame(watcher, with_pixels=False)
    lease = await database_sync_to_async(control.controller_lease)(gone, role_users["admin"])
    assert lease is not None, "the lease survives a phone that comes and goes"
    await watcher.disconnect()
    await bystander.disconnect()


async def test_a_still_screen_sends_no_pixels_only_a_few_unchanged_notes(screen_phones, role_users):
    communicator, _ = await watch(screen_phones[0], role_users["manager"])
    await receive_frame(communicator)  # the first picture
    notes = []
    deadline = asyncio.get_running_loop().time() + 1.0
    while asyncio.get_running_loop().time() < deadline:
        header, jpeg = await receive_frame(communicator, with_pixels=False)
        notes.append((header["seq"], jpeg))
    assert all(jpeg == b"" for _, jpeg in notes), "an unchanged screen is not re-sent"
    assert 3 <= len(notes) <= 1 + senders.STILL_FPS * 1.2  # enough to keep the age honest
    await communicator.disconnect()


async def test_a_source_that_cannot_run_is_explained_and_the_viewer_falls_back(
        screen_phones, role_users, settings):
    settings.STREAM_SOURCE = "scrcpy"
    settings.SCRCPY_SERVER_JAR = "/nowhere/scrcpy-server-v2.4"  # a wrong path
    communicator, _ = await watch(screen_phones[0], role_users["manager"])
    message = await receive_json(communicator, "stream")
    while message["source"] != "screencap":
        message = await receive_json(communicator, "stream")
    assert "SCRCPY_SERVER_JAR=/nowhere" in message["reason"]
    header, jpeg = await receive_frame(communicator)  # the universal fallback streams
    assert jpeg[:2] == b"\xff\xd8"
    await communicator.disconnect()


async def test_a_quiet_viewer_stays_connected(screen_phones, role_users):
    """A viewer of a still screen hears nothing on the channel layer for long stretches.

    redis-py >= 6 reads with a 5 s socket timeout by default, exactly the time channels_redis
    blocks in BZPOPMIN, so an idle consumer dies with "Timeout reading from redis". The channel
    layer needs a longer socket_timeout in settings, e.g.
    "hosts": [{"address": REDIS_URL, "socket_timeout": 30}].
    """
    communicator, _ = await watch(screen_phones[0], role_users["manager"], max_fps=1)
    await asyncio.sleep(6.5)
    await communicator.send_json_to({"type": "stats"})
    stats = await receive_json(communicator, "stats")
    assert stats["frames_sent"] >= 1
    await communicator.disconnect()
