"""`/ws/devices/<id>/screen/`: a phone's screen as binary JPEG frames out, input as JSON in.

Client -> server (JSON text):
  {"type": "view", "width": W, "height": H, "max_fps": F}   start, or change the size / rate
  {"type": "ack", "seq": N}                                  frame N is drawn; send the next one
  {"type": "pause"} / {"type": "resume"}                     the page is hidden / visible again
  {"type": "input", "id": any, "action": "tap"|"long_press"|"swipe"|"text"|"key", ...,
   "frame": {"seq": N, "width": W, "height": H}}            x/y in the pixels of frame N
Server -> client: binary frames (frames.HEADER + JPEG; an empty JPEG = unchanged, checked at the
header's time) and JSON: hello, input_result, lease, phone_unavailable, phone_back, stats, error.

Who may watch is checked again whenever the phone's lease changes (devices/signals.py tells this
phone's group) and every PERMISSION_RECHECK_SECONDS: a viewer who may no longer watch (an
annotator whose lease ended) gets {"type": "error", "code": "not_your_phone"} and the socket
closes with 4403. A malformed message gets {"type": "error", "code": "bad_message"}; `view`
messages beyond VIEW_MESSAGES_PER_SECOND get {"type": "error", "code": "too_many_views"} and are
ignored. Neither closes the socket.
"""
import asyncio
import json
import logging
import math
import os
import time
from collections import OrderedDict, deque
from dataclasses import dataclass

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.utils import timezone

from accounts.consumers import CLOSE_FORBIDDEN, RoleWebsocketConsumer
from accounts.roles import ADMIN, ANNOTATOR, MANAGER, has_role
from devices.leases import current_lease
from devices.models import Device, Lease
from devices.phone import PhoneConnection
from devices.streaming import control
from devices.streaming.capture import capture_loop_for, run_blocking
from devices.streaming.frames import fit_size, pack

log = logging.getLogger(__name__)
CLOSE_UNKNOWN_DEVICE = 4404
STALE_INPUT_SECONDS = float(os.environ.get("STREAM_STALE_INPUT_MS", "2000")) / 1000
MAX_FPS = float(os.environ.get("STREAM_MAX_FPS", "30"))
STILL_FPS = 5.0  # "unchanged" notes per second on a still screen
ACK_TIMEOUT = 5.0  # a client that never acks still gets a frame now and then
SENT_MEMORY = 64  # frames remembered per viewer, to place input computed on them
KEEPALIVE_SECONDS = 30
PERMISSION_RECHECK_SECONDS = 5.0  # besides every lease change: catches a lease that lapsed unannounced
VIEW_MESSAGES_PER_SECOND = 5      # each may change the size the screen is encoded at
MAX_VIEW_SIDE = 8192              # pixels: no canvas is larger
MAX_MESSAGE_CHARS = 16 * 1024     # typed text is at most 2000 characters


def device_group(device_id) -> str:
    return f"device-screen-{device_id}"


def notify_viewers(device_id, event: str):
    """Tell every open screen of a phone that its lease or status changed (from sync code)."""
    async_to_sync(get_channel_layer().group_send)(
        device_group(device_id), {"type": "device.changed", "event": event})


def may_watch(device, user) -> bool:
    """Managers and admins watch any phone; an annotator only one their live lease holds."""
    if has_role(user, MANAGER, ADMIN):
        return True
    return Lease.objects.filter(device=device, user=user, released_at__isnull=True,
                                expires_at__gt=timezone.now()).exists()


def view_size(message) -> tuple[tuple[int, int], float]:
    """((width, height), max_fps) of a `view` message; InputRefused('bad_message') unless width and
    height are finite numbers in (0, MAX_VIEW_SIDE] and max_fps a finite positive number."""
    width, height, fps = message.get("width"), message.get("height"), message.get("max_fps", MAX_FPS)
    if not all(_finite_positive(v) for v in (width, height, fps)):
        raise control.InputRefused("bad_message", "view needs positive numbers width, height, max_fps")
    if width > MAX_VIEW_SIDE or height > MAX_VIEW_SIDE:
        raise control.InputRefused("bad_message", f"view width and height are at most {MAX_VIEW_SIDE} pixels")
    return (max(1, int(width)), max(1, int(height))), min(float(fps), MAX_FPS)


def _finite_positive(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value) and value > 0
    except OverflowError:  # an integer too large for a float
        return False


@dataclass
class SentFrame:
    version: int
    phone_size: tuple[int, int]
    jpeg_size: tuple[int, int]
    captured_at: float


class ScreenConsumer(RoleWebsocketConsumer):
    # Managers and admins watch any phone; an annotator watches the phone their session leases.
    required_roles = (MANAGER, ADMIN, ANNOTATOR)

    async def on_accepted(self):
        self.user = self.scope["user"]
        self.device = None
        self.capture = None
        self.sender = None
        self.tasks = []
        device_id = self.scope["url_route"]["kwargs"]["device_id"]
        self.device = await database_sync_to_async(Device.objects.filter(pk=device_id).first)()
        if self.device is None:
            log.warning("screen socket of %s: no phone with id %s", self.user, device_id)
            await self.send_error("unknown_device", f"No phone with id {device_id}.")
            await self.close(code=CLOSE_UNKNOWN_DEVICE)
            return
        if not await database_sync_to_async(may_watch)(self.device, self.user):
            await self.send_error("not_your_phone", "Annotators watch only the phone their session holds.")
            self.device = None
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.box, self.max_fps, self.paused = None, 1.0, False
        self.sent: OrderedDict[int, SentFrame] = OrderedDict()
        self.acked = asyncio.Event()
        self.sender = None  # the task sending frames, while the client views and is not paused
        self.dropped = 0
        self.encode_seconds = 0.0
        self.frames_sent = 0
        self.phone = PhoneConnection.for_device(self.device)
        self.view_times = deque(maxlen=VIEW_MESSAGES_PER_SECOND)
        self.refused = False  # set once the viewer may no longer watch: the socket is closing
        await self.channel_layer.group_add(device_group(self.device.pk), self.channel_name)
        self.can_control = await database_sync_to_async(control.can_control)(self.device, self.user)
        await self.send_json({
            "type": "hello", "server_time": time.time() * 1000,
            "device": {"id": self.device.pk, "serial": self.device.serial, "status": self.device.status},
            "can_control": self.can_control, "stale_input_ms": STALE_INPUT_SECONDS * 1000})
        self.tasks = [asyncio.create_task(self.keep_lease()), asyncio.create_task(self.keep_checking())]

    async def disconnect(self, code):
        for task in getattr(self, "tasks", []):
            task.cancel()
        if getattr(self, "device", None) is not None:  # None: refused or unknown phone
            self.stop_stream()
            await self.channel_layer.group_discard(device_group(self.device.pk), self.channel_name)

    async def send_error(self, code, message):
        await self.send_json({"type": "error", "code": code, "message": message})

    # client messages -------------------------------------------------------------------------
    async def receive(self, text_data=None, bytes_data=None):
        if self.device is None or self.refused:
            return
        if text_data is not None and len(text_data) > MAX_MESSAGE_CHARS:
            await self.refuse_message(f"messages are at most {MAX_MESSAGE_CHARS} characters")
            return
        try:
            message = json.loads(text_data) if text_data is not None else None
        except (ValueError, RecursionError):
            message = None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            await self.refuse_message("messages must be JSON objects with a 'type'")
            return
        handler = getattr(self, f"on_{message['type']}", None)
        if handler is None:
            await self.refuse_message(f"unknown message type {message['type']!r}")
            return
        try:
            await handler(message)
        except control.InputRefused as refused:
            await self.refuse_message(str(refused))

    async def refuse_message(self, reason):
        log.warning("screen socket of %s on %s: bad message: %s", self.user, self.device, reason)
        await self.send_error("bad_message", reason)

    async def on_view(self, message):
        now = time.monotonic()
        if len(self.view_times) == self.view_times.maxlen and now - self.view_times[0] < 1.0:
            await self.send_error("too_many_views", f"at most {VIEW_MESSAGES_PER_SECOND} view messages a "
                                                    "second; this one was ignored")
            return
        self.view_times.append(now)
        self.box, self.max_fps = view_size(message)
        if not self.paused:
            self.start_stream()

    async def on_ack(self, message):
        if self.sent and message.get("seq") == next(reversed(self.sent)):
            self.acked.set()

    async def on_pause(self, message):
        self.paused = True
        self.stop_stream()  # a hidden page costs the phone nothing

    async def on_resume(self, message):
        self.paused = False
        if self.box:
            self.start_stream()

    def start_stream(self):
        self.capture = capture_loop_for(self.phone)
        self.capture.add_viewer(self, self.max_fps)
        if self.sender is None or self.sender.done():
            self.acked.set()
            self.sender = asyncio.create_task(self.send_frames())

    def stop_stream(self):
        if self.sender is not None:
            self.sender.cancel()
            self.sender = None
        if self.capture is not None:
            self.capture.remove_viewer(self)

    async def on_stats(self, message):
        await self.send_json({"type": "stats", "frames_sent": self.frames_sent, "dropped": self.dropped,
                              "encode_seconds": round(self.encode_seconds, 4),
                              "capture": self.capture.stats if self.capture else {}})

    async def on_input(self, message):
        started = time.monotonic()
        try:
            action = await self.action_for(message)
            self.can_control = await database_sync_to_async(control.can_control)(self.device, self.user)
            if not self.can_control:
                raise control.InputRefused(
                    "no_lease", "You are watching this phone. Only an admin holding its lease may "
                                "control it: take the lease on this page first.")
        except control.InputRefused as refused:
            log.warning("input of %s on %s refused (%s): %s", self.user, self.device, refused.code, refused)
            await self.send_json({"type": "input_result", "id": message.get("id"), "ok": False,
                                  "blocked": False, "error": refused.code, "reason": str(refused)})
            return
        try:
            result = await database_sync_to_async(control.execute, thread_sensitive=False)(
                self.device, action, control.console_holder(self.user))
        except Exception as error:
            log.exception("input of %s on %s failed", self.user, self.device)
            result = {"ok": False, "blocked": False, "error": "failed", "reason": f"internal error: {error}"}
        if result["error"] or result["blocked"]:
            log.warning("input of %s on %s: %s %s", self.user, self.device, action, result)
        if self.capture is not None:
            self.capture.wake()  # show the effect now rather than at the next tick
        await self.send_json({"type": "input_result", "id": message.get("id"), "action": action,
                              "ms": round((time.monotonic() - started) * 1000), **result})

    async def action_for(self, message):
        """The canonical action, placed with the frame the viewer computed it on."""
        if message.get("action") not in ("tap", "long_press", "swipe"):
            return control.canonical_action(message)
        frame = message.get("frame")
        if not isinstance(frame, dict) or not isinstance(frame.get("seq"), int):
            raise control.InputRefused("bad_message", "pointer input needs frame: {seq, width, height}")
        sent = self.sent.get(frame["seq"])
        if sent is None:
            raise control.InputRefused(
                "stale_frame", f"Frame {frame['seq']} is unknown or too old to place this input; "
                               "act again on the screen you see now.")
        if (frame.get("width"), frame.get("height")) != sent.jpeg_size:
            raise control.InputRefused(
                "bad_message", f"frame {frame['seq']} was {sent.jpeg_size[0]}x{sent.jpeg_size[1]}, "
                               f"not {frame.get('width')}x{frame.get('height')}")
        latest = self.capture.latest
        if latest is not None and latest.picture is not None:
            if latest.picture.size != sent.phone_size:
                raise control.InputRefused(
                    "stale_frame", "The screen changed size (rotated?) since that frame; act again.")
            age = time.time() - sent.captured_at
            if latest.picture.version != sent.version and age > STALE_INPUT_SECONDS:
                raise control.InputRefused(
                    "stale_frame", f"The screen changed since frame {frame['seq']}, which is "
                                   f"{age * 1000:.0f} ms old; look again and repeat the input.")
        return control.canonical_action(message, sent.jpeg_size, sent.phone_size)

    # server side -----------------------------------------------------------------------------
    async def send_frames(self):
        """Send the newest frame each time the client has drawn the previous one."""
        try:
            await self._send_frames()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.info("screen of %s for %s stopped: %r", self.device, self.user, error)

    async def _send_frames(self):
        last_seq, last_error, last_sent = 0, "", None
        while True:
            await self.capture.newer_than(last_seq)
            try:
                await asyncio.wait_for(self.acked.wait(), ACK_TIMEOUT)
            except TimeoutError:
                pass
            if last_sent is not None:
                await self.pace(last_sent)
            frame = self.capture.latest  # the newest: whatever came meanwhile was dropped
            if last_seq:
                self.dropped += max(0, frame.seq - last_seq - 1)
            last_seq = frame.seq
            if frame.error:
                if frame.error != last_error:
                    await self.send_json({"type": "phone_unavailable", "message": frame.error})
                last_error = frame.error
                continue
            if last_error:
                await self.send_json({"type": "phone_back"})
                last_error = ""
            last_sent = time.monotonic()  # pace from the start: encoding is part of the interval
            await self.send_frame(frame)

    async def pace(self, last_sent):
        """New pictures go out at the viewer's max_fps; "unchanged" notes only STILL_FPS times a
        second (they just keep the age honest), but a change ends that wait at once."""
        while True:
            frame = self.capture.latest
            if frame.error or self.is_new_picture(frame):
                await asyncio.sleep(max(0.0, last_sent + 1 / self.max_fps - time.monotonic()))
                return
            wait = last_sent + 1 / min(self.max_fps, STILL_FPS) - time.monotonic()
            if wait <= 0:
                return
            try:
                await asyncio.wait_for(self.capture.newer_than(frame.seq), wait)
            except TimeoutError:
                return

    def is_new_picture(self, frame):
        previous = next(reversed(self.sent.values())) if self.sent else None
        return not (previous and previous.version == frame.picture.version
                    and previous.jpeg_size == fit_size(frame.picture.size, self.box))

    async def send_frame(self, frame):
        picture = frame.picture
        if not self.is_new_picture(frame):
            jpeg, size = b"", fit_size(picture.size, self.box)  # unchanged: only the time is news
        else:
            began = time.monotonic()
            jpeg, size = await run_blocking(picture.jpeg, self.box)
            self.encode_seconds += time.monotonic() - began
        self.sent[frame.seq] = SentFrame(picture.version, picture.size, size, frame.captured_at)
        while len(self.sent) > SENT_MEMORY:
            self.sent.popitem(last=False)
        self.acked.clear()
        self.frames_sent += 1
        await self.send(bytes_data=pack(frame, jpeg, size))

    async def keep_lease(self):
        while True:
            await asyncio.sleep(KEEPALIVE_SECONDS)
            if self.can_control:
                await database_sync_to_async(control.keep_control_alive)(self.device, self.user)

    async def keep_checking(self):
        while True:
            await asyncio.sleep(PERMISSION_RECHECK_SECONDS)
            if not await self.still_allowed():
                return

    async def still_allowed(self) -> bool:
        """Close the socket (4403) of a viewer who may no longer watch this phone."""
        if self.refused:
            return False
        if await database_sync_to_async(may_watch)(self.device, self.user):
            return True
        self.refused = True
        log.info("screen of %s closed for %s: no longer allowed to watch", self.device, self.user)
        self.stop_stream()
        await self.send_error("not_your_phone", "Your lease on this phone ended; its screen is closed.")
        await self.close(code=CLOSE_FORBIDDEN)
        return False

    async def device_changed(self, message):
        """The phone's lease or status changed (lease changes come from devices/signals.py, other
        changes from views calling notify_viewers)."""
        if not await self.still_allowed():
            return
        self.can_control = await database_sync_to_async(control.can_control)(self.device, self.user)
        holder = await database_sync_to_async(_holder)(self.device)
        await self.send_json({"type": "lease", "event": message["event"], "holder": holder,
                              "can_control": self.can_control})


def _holder(device):
    lease = current_lease(device)
    return lease.holder if lease else ""
