"""`/ws/devices/<id>/screen/`: a phone's screen as binary frames out, input as JSON in.

Client -> server (JSON text):
  {"type": "view", "width": W, "height": H, "max_fps": F,   start, or change the size / rate /
   "codecs": ["h264", "jpeg"]}                               what the browser decodes (default jpeg)
  {"type": "ack", "seq": N}                                  frame N is drawn; send the next one
  {"type": "pause"} / {"type": "resume"}                     the page is hidden / visible again
  {"type": "input", "id": any, "action": "tap"|"long_press"|"swipe"|"text"|"key", ...,
   "frame": {"seq": N, "width": W, "height": H}}            x/y in the pixels of frame N
Server -> client: binary frames (frames.HEADER + JPEG, or frames.VIDEO_HEADER + H.264; empty =
unchanged, checked at the header's time) and JSON: hello, stream (which codec and source, and why
a better one was skipped), input_ack (at once), input_result, input_frame (the first new frame
captured after the input ran), lease, phone_unavailable, phone_back, stats, error.

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
import time
from collections import OrderedDict, deque

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from accounts.consumers import CLOSE_FORBIDDEN, RoleWebsocketConsumer
from accounts.roles import ADMIN, ANNOTATOR, MANAGER, has_role
from devices import screen_signal
from devices.leases import current_lease
from devices.models import Device, Lease
from devices.phone import PhoneConnection
from devices.streaming import control, feeds
from devices.streaming.capture import run_blocking
from devices.streaming.senders import SLOW_LINK_FPS, H264Sender, JpegSender, SentFrame

log = logging.getLogger(__name__)
CLOSE_UNKNOWN_DEVICE = 4404
SENT_MEMORY = 64  # frames remembered per viewer, to place input computed on them
CODECS = ("h264", "jpeg")
MARK_WITHIN_S = 2.0      # an input whose effect no new frame showed by then is reported as such
PREFETCH_SETTLE_S = 0.15  # a controlled screen still this long gets its UI dump read ahead of input
MAX_FALLBACKS, RETRY_ALL_SOURCES_S = 4, 5.0  # more moves than this in 10 s: wait, then start again
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
    return Lease.objects.live().filter(device=device, user=user).exists()


def view_size(message) -> tuple[tuple[int, int], float]:
    """((width, height), max_fps) of a `view` message; InputRefused('bad_message') unless width and
    height are finite numbers in (0, MAX_VIEW_SIDE] and max_fps a finite positive number."""
    max_fps = settings.STREAM_MAX_FPS
    width, height, fps = message.get("width"), message.get("height"), message.get("max_fps", max_fps)
    if not all(_finite_positive(v) for v in (width, height, fps)):
        raise control.InputRefused("bad_message", "view needs positive numbers width, height, max_fps")
    if width > MAX_VIEW_SIDE or height > MAX_VIEW_SIDE:
        raise control.InputRefused("bad_message", f"view width and height are at most {MAX_VIEW_SIDE} pixels")
    return (max(1, int(width)), max(1, int(height))), min(float(fps), max_fps)


def view_codecs(message) -> tuple[str, ...]:
    """The codecs a `view` message says the browser decodes, best first (JPEG when it says none)."""
    codecs = message.get("codecs", ["jpeg"])
    if not isinstance(codecs, list) or not codecs or not all(codec in CODECS for codec in codecs):
        raise control.InputRefused("bad_message", f"codecs must be a non-empty list of {', '.join(CODECS)}")
    return tuple(dict.fromkeys(codecs))


def _finite_positive(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value) and value > 0
    except OverflowError:  # an integer too large for a float
        return False


class ScreenConsumer(RoleWebsocketConsumer):
    # Managers and admins watch any phone; an annotator watches the phone their session leases.
    required_roles = (MANAGER, ADMIN, ANNOTATOR)

    async def on_accepted(self):
        self.user = self.scope["user"]
        self.device = None
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
        self.box, self.max_fps, self.codecs, self.paused = None, 1.0, ("jpeg",), False
        self.slow_link = False  # set once this viewer could not keep up with H.264: JPEG from then on
        self.sent: OrderedDict[int, SentFrame] = OrderedDict()
        self.marks: list[tuple] = []  # (input id, executed at, input received at) awaiting a new frame
        self.fallbacks: list[float] = []  # when this viewer last moved to another source
        self.prefetch = None
        self.phone = PhoneConnection.for_device(self.device)
        self.view_times = deque(maxlen=VIEW_MESSAGES_PER_SECOND)
        self.refused = False  # set once the viewer may no longer watch: the socket is closing
        await self.channel_layer.group_add(device_group(self.device.pk), self.channel_name)
        self.can_control = await database_sync_to_async(control.can_control)(self.device, self.user)
        await self.send_json({
            "type": "hello", "server_time": time.time() * 1000,
            "device": {"id": self.device.pk, "serial": self.device.serial, "status": self.device.status},
            "can_control": self.can_control, "stale_input_ms": settings.STREAM_STALE_INPUT_MS})
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
        box, max_fps = view_size(message)
        codecs = view_codecs(message)
        self.view_times.append(now)
        self.box, self.max_fps, self.codecs = box, max_fps, codecs
        if self.slow_link:
            self.max_fps = min(self.max_fps, SLOW_LINK_FPS)
        if not self.paused:
            await self.start_stream()

    async def on_ack(self, message):
        if self.sender is not None and isinstance(message.get("seq"), int):
            self.sender.acked(message["seq"])

    async def on_pause(self, message):
        self.paused = True
        self.stop_stream()  # a hidden page costs the phone nothing

    async def on_resume(self, message):
        self.paused = False
        if self.box:
            await self.start_stream()

    def wanted_codecs(self):
        return tuple(codec for codec in self.codecs if not (self.slow_link and codec == "h264")) or ("jpeg",)

    async def start_stream(self, skipped_reason=""):
        """Attach to the best feed for this viewer (a new one when the choice changed)."""
        feed, skipped = feeds.choose(self.phone, self.wanted_codecs(), self.box)
        if self.sender is not None and self.sender.feed is feed and not self.sender.task.done():
            feed.viewers[self] = self.max_fps  # same feed: only the rate may have changed
            return
        self.stop_stream()
        self.sent.clear()  # frame numbers of another feed mean nothing to this one
        feed.add_viewer(self, self.max_fps)
        self.sender = (H264Sender if feed.codec == "h264" else JpegSender)(self, feed)
        self.sender.start()
        if feed.codec != "h264":  # the H.264 sender says it once the codec config is known
            await self.send_json({"type": "stream", "codec": feed.codec, "source": feed.source,
                                  "max_fps": self.max_fps, "skipped": skipped, "reason": skipped_reason})

    def stop_stream(self):
        if self.sender is not None:
            self.sender.stop()
            self.sender.feed.remove_viewer(self)
            self.sender = None
        if getattr(self, "prefetch", None) is not None:
            self.prefetch.cancel()

    async def fall_back(self, sender, reason, slow=False):
        """The sender's feed gave up (its source is marked unavailable) or this viewer lags behind
        H.264: move to the next source. Called from the sender's own task."""
        if sender is not self.sender:
            return
        log.info("screen of %s for %s: %s", self.device, self.user, reason)
        now = time.monotonic()
        self.fallbacks = [moment for moment in self.fallbacks if now - moment < 10] + [now]
        if len(self.fallbacks) > MAX_FALLBACKS:  # every source fails at once: say so, do not spin
            sender.feed.remove_viewer(self)
            self.sender = None
            await self.send_json({"type": "phone_unavailable",
                                  "message": f"no screen source works on this phone now ({reason})"})
            await asyncio.sleep(RETRY_ALL_SOURCES_S)
            self.fallbacks = []
            if not self.paused and self.sender is None:
                await self.start_stream(skipped_reason=reason)
            return
        if slow:
            self.slow_link = True
            self.max_fps = min(self.max_fps, SLOW_LINK_FPS)
        sender.feed.remove_viewer(self)
        self.sender = None  # the sender's task ends by itself after this call
        await self.start_stream(skipped_reason=reason)

    async def on_stats(self, message):
        sender, feed = self.sender, self.sender.feed if self.sender else None
        await self.send_json({
            "type": "stats", "codec": sender.codec if sender else "", "source": feed.source if feed else "",
            "frames_sent": sender.frames_sent if sender else 0, "dropped": sender.dropped if sender else 0,
            "encode_seconds": round(sender.encode_seconds, 4) if sender else 0.0,
            "capture": feed.stats if feed else {}, "screen_dumps": screen_signal.stats})

    # frames going out ------------------------------------------------------------------------
    def remember_frame(self, seq, sent: SentFrame):
        self.sent[seq] = sent
        while len(self.sent) > SENT_MEMORY:
            self.sent.popitem(last=False)

    async def frame_going_out(self, seq, captured_at):
        """A new picture is about to be sent: announce it as the effect of inputs that ran before
        it was captured, and read the controlled screen's UI dump ahead of the next input."""
        now = time.time()
        for mark in list(self.marks):
            input_id, executed_at, received_at = mark
            if captured_at >= executed_at:
                self.marks.remove(mark)
                await self.send_json({"type": "input_frame", "id": input_id, "seq": seq, "changed": True,
                                      "ms": round((now - received_at) * 1000)})
            elif now - executed_at > MARK_WITHIN_S:
                self.marks.remove(mark)
                await self.send_json({"type": "input_frame", "id": input_id, "seq": None, "changed": False})
        if self.can_control:
            if self.prefetch is not None:
                self.prefetch.cancel()
            self.prefetch = asyncio.create_task(self.read_screen_ahead())

    async def read_screen_ahead(self):
        """Once the screen has settled, dump it (kept by its page-flip count): the audit of the next
        input then reads it instead of waiting for a dump of its own (devices/screen_signal.py)."""
        await asyncio.sleep(PREFETCH_SETTLE_S)
        try:
            await run_blocking(screen_signal.current_dump, self.phone)
        except Exception as error:  # only an optimisation: the input's own audit dumps if needed
            log.debug("reading the screen of %s ahead failed: %s", self.device, error)

    # input -------------------------------------------------------------------------------------
    async def on_input(self, message):
        received_at = time.time()
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
        await self.send_json({"type": "input_ack", "id": message.get("id"), "action": action})
        if self.prefetch is not None:
            self.prefetch.cancel()
        try:
            result = await database_sync_to_async(control.execute, thread_sensitive=False)(
                self.device, action, control.console_holder(self.user))
        except Exception as error:
            log.exception("input of %s on %s failed", self.user, self.device)
            result = {"ok": False, "blocked": False, "error": "failed", "reason": f"internal error: {error}"}
        if result["error"] or result["blocked"]:
            log.warning("input of %s on %s: %s %s", self.user, self.device, action, result)
        elif self.sender is not None:
            self.marks.append((message.get("id"), time.time(), received_at))
            self.sender.feed.wake()  # show the effect now rather than at the next tick
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
        latest = self.sender.latest_view() if self.sender is not None else None
        if latest is not None:
            version, phone_size = latest
            if phone_size != sent.phone_size:
                raise control.InputRefused(
                    "stale_frame", "The screen changed size (rotated?) since that frame; act again.")
            age = time.time() - sent.captured_at
            if version != sent.version and age * 1000 > settings.STREAM_STALE_INPUT_MS:
                raise control.InputRefused(
                    "stale_frame", f"The screen changed since frame {frame['seq']}, which is "
                                   f"{age * 1000:.0f} ms old; look again and repeat the input.")
        return control.canonical_action(message, sent.jpeg_size, sent.phone_size)

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
