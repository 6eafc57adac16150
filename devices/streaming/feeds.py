"""Relayed feeds (what the phone encoded, forwarded as bytes) and the choice of feed for a viewer.

- `JpegRelayFeed`: minicap's JPEG frames at one size. Each frame is checked to be one whole JPEG
  (and its size read from its header), then published as it came: nothing is decoded here.
- `H264Feed`: scrcpy's H.264 packets. It keeps the packets since the last key frame (one GOP), so
  a viewer that joins or resynchronises starts from a key frame with the codec config.

A relayed stream that ends, stalls or sends garbage is started again (a few times, then the feed
gives up and its viewers move to the next source: `choose`). A still screen sends nothing, so
silence alone is not a stall: after PROBE_AFTER_S of silence the feed reads the phone's page-flip
counter (devices/screen_signal.py); if the display flipped since the previous look and still no
frame came, the stream has stalled. While it is healthy the feed says "checked just now" a few
times a second, so the page's frame age stays honest on a still screen.

`choose()` orders the sources for a viewer by STREAM_SOURCE and what the viewer decodes:
auto = scrcpy's H.264 (viewers with WebCodecs), then minicap, then screencap polling.
"""
import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass

from django.conf import settings

from devices.phone import PhoneConnection, PhoneUnavailable
from devices.screen_signal import page_flips
from devices.streaming.adb_async import AdbStreamError
from devices.streaming.capture import (
    Feed,
    _versions,
    capture_loop_for,
    feed_for,
    feeds_of,
    mark_unavailable,
    run_blocking,
    unavailable_reason,
)
from devices.streaming.frames import Frame, RelayedPicture, jpeg_size
from devices.streaming.relay import MinicapStream, ScrcpyStream, StreamBroken
from devices.streaming.sources import SourceUnavailable, configured_source_name

log = logging.getLogger(__name__)
RESTARTS, RESTART_WINDOW_S = 3, 30.0   # more breaks than this in the window: the feed gives up
CORRUPT_LIMIT = 5                      # corrupt frames in a row before the stream is started again
PROBE_AFTER_S = 1.0
CHECKED_EVERY_S = 0.2
MAX_GOP_PACKETS = 600                  # scrcpy's default key frame interval is 10 s
MAX_RELAY_SIZES = 3                    # minicap instances per phone (one per distinct viewer size)
H264_SIZE_STEP = 160


@dataclass
class VideoPacket:
    seq: int
    captured_at: float  # when it reached us (seconds since the epoch)
    key_frame: bool
    data: bytes
    error: str = ""
    fatal: bool = False


class RelayFeed(Feed):
    """Starts the phone's daemon, reads its stream, restarts it when it breaks."""

    def __init__(self, phone: PhoneConnection, key):
        super().__init__(phone, key)
        self.stats.update(corrupt=0, restarts=0, bytes=0)
        self.failure = ""
        self.checked_at = 0.0           # when the stream was last known to show the current screen
        self.display = (0, 0)           # the phone's screen size (touch coordinates)
        self._last_data = 0.0           # monotonic time of the last byte of a frame
        self._probe = (None, 0.0)       # (page flips, monotonic time) of the last look
        self._suspect_since = None

    def make_stream(self):
        raise NotImplementedError

    async def read_stream(self, stream):
        raise NotImplementedError

    def still_note(self):
        """Publish "unchanged, checked now" (JPEG feeds); H.264 senders read `checked_at` instead."""

    async def _run(self):
        breaks: deque = deque()
        try:
            while self.viewers:
                stream = self.make_stream()
                try:
                    await stream.open(run_blocking)
                    self.display = stream.display
                    self._last_data, self._probe, self._suspect_since = time.monotonic(), (None, 0.0), None
                    await self._pump(stream)
                except SourceUnavailable as error:
                    self._give_up(str(error))
                    return
                except (PhoneUnavailable, AdbStreamError) as error:
                    if not await run_blocking(_phone_answers, self.phone):
                        self._publish(Frame(self.next_seq(), time.time(), None, error=str(error)))
                        await self._sleep(1.0)  # the phone is gone: keep trying, no other source would help
                        continue
                    now = time.monotonic()
                    breaks.append(now)
                    while breaks and now - breaks[0] > RESTART_WINDOW_S:
                        breaks.popleft()
                    self.stats["restarts"] += 1
                    log.warning("%s stream of %s broke (%s); restarting", self.source, self.phone.serial, error)
                    if len(breaks) > RESTARTS:
                        self._give_up(f"{self.source} keeps breaking ({error})")
                        return
                    await self._sleep(0.2 * len(breaks))
                finally:
                    await stream.close()
        finally:
            self.retire()

    def _give_up(self, reason: str):
        log.warning("screen of %s: %s unavailable: %s", self.phone.serial, self.source, reason)
        self.failure = reason
        mark_unavailable(self.phone, self.source, reason)
        self._publish(Frame(self.next_seq(), time.time(), None, error=reason, fatal=True))

    async def _pump(self, stream):
        reading = asyncio.ensure_future(self.read_stream(stream))
        try:
            while self.viewers and not reading.done():
                await asyncio.wait({reading}, timeout=CHECKED_EVERY_S)
                if reading.done():
                    break
                if time.monotonic() - self._last_data >= PROBE_AFTER_S:
                    await self._look_for_a_stall()
                if self._suspect_since is None:
                    self.checked_at = time.time()
                    self.still_note()
            if reading.done():
                reading.result()  # raises what broke the stream
        finally:
            reading.cancel()

    async def _look_for_a_stall(self):
        flips_before, looked_at = self._probe
        now = time.monotonic()
        if now - looked_at < PROBE_AFTER_S:
            return
        flips = await run_blocking(page_flips, self.phone)
        self._probe = (flips, now)
        if flips is None or flips_before is None:
            return
        if flips != flips_before and self._last_data < looked_at:
            if self._suspect_since is None:
                self._suspect_since = now  # a frame may still be on its way: look once more
            elif self._last_data < self._suspect_since:
                raise StreamBroken(f"{self.phone.serial}: the screen changed but {self.source} sent nothing")
        else:
            self._suspect_since = None

    def _received(self, size: int):
        self._last_data = time.monotonic()
        self._suspect_since = None
        self.checked_at = time.time()
        self.stats["bytes"] += size


class JpegRelayFeed(RelayFeed):
    source = "minicap"

    def __init__(self, phone, key, box):
        super().__init__(phone, key)
        self.box = box
        self._picture = None

    def make_stream(self):
        return MinicapStream(self.phone, self.box)

    def still_note(self):
        if self._picture is not None:
            self._publish(Frame(self.next_seq(), self.checked_at, self._picture))

    async def read_stream(self, stream):
        corrupt_in_a_row = 0
        while True:
            data = await stream.next_frame()
            received = time.time()
            self._received(len(data))
            try:
                size = jpeg_size(data)
            except ValueError as error:
                self.stats["corrupt"] += 1
                corrupt_in_a_row += 1
                log.warning("corrupt minicap frame from %s dropped: %s", self.phone.serial, error)
                if corrupt_in_a_row >= CORRUPT_LIMIT:
                    raise StreamBroken(f"{self.phone.serial}: {corrupt_in_a_row} corrupt frames in a row") from error
                continue
            corrupt_in_a_row = 0
            if (size[0] > size[1]) != (stream.display[0] > stream.display[1]):
                raise StreamBroken(f"{self.phone.serial}: the screen turned")  # start it with the new projection
            self.stats["captures"] += 1
            self.stats["changed"] += 1
            self._picture = RelayedPicture(next(_versions), stream.display, data, size)
            self._publish(Frame(self.next_seq(), received, self._picture))


class H264Feed(RelayFeed):
    codec = "h264"
    source = "scrcpy"

    def __init__(self, phone, key, max_size):
        super().__init__(phone, key)
        self.max_size = max_size
        self.config = b""
        self.codec_string = ""
        self.video_size = (0, 0)
        self.gop: list[VideoPacket] = []  # since the last key frame

    def make_stream(self):
        return ScrcpyStream(self.phone, self.max_size)

    async def read_stream(self, stream):
        self.video_size, self.gop = stream.video_size, []
        while True:
            is_config, key_frame, _, data = await stream.next_packet()
            received = time.time()
            self._received(len(data))
            if is_config:
                self.config, self.codec_string = data, avc_codec_string(data)
                continue
            if not self.gop and not key_frame:
                continue  # nothing can be decoded before the first key frame
            packet = VideoPacket(self.next_seq(), received, key_frame, data)
            if key_frame:
                self.gop = [packet]
            elif len(self.gop) >= MAX_GOP_PACKETS:
                raise StreamBroken(f"{self.phone.serial}: no key frame in {MAX_GOP_PACKETS} packets")
            else:
                self.gop.append(packet)
            self.stats["captures"] += 1
            self.stats["changed"] += 1
            self._publish(packet)

    def packets_after(self, seq: int) -> list[VideoPacket]:
        """What a viewer that has everything up to `seq` needs next: the rest of this GOP, or the
        whole GOP from its key frame when it missed packets (a new viewer, a resynchronisation)."""
        if not self.gop:
            return []
        if self.gop[0].seq > seq + 1 or seq < self.gop[0].seq - 1:
            return list(self.gop)
        return [packet for packet in self.gop if packet.seq > seq]


def avc_codec_string(config: bytes) -> str:
    """WebCodecs' codec string (avc1.PPCCLL) from the SPS in an H.264 config packet."""
    index = config.find(b"\x00\x00\x01")
    while index != -1 and index + 6 < len(config):
        if config[index + 3] & 0x1F == 7:
            profile, constraints, level = config[index + 4:index + 7]
            return f"avc1.{profile:02x}{constraints:02x}{level:02x}"
        index = config.find(b"\x00\x00\x01", index + 3)
    return "avc1.42e01f"  # constrained baseline 3.1: what a missing SPS most likely was


# -- which feed a viewer gets -------------------------------------------------------------------------

def source_plan(configured: str, codecs) -> list[str]:
    """The sources to try, best first, for a viewer that decodes `codecs` (h264 and/or jpeg)."""
    h264 = "h264" in codecs
    if configured == "auto":
        return (["scrcpy"] if h264 else []) + ["minicap", "screencap"]
    if configured == "scrcpy":
        return ["scrcpy" if h264 else "scrcpy-decoded", "screencap"]
    if configured == "minicap":
        return ["minicap", "screencap"]
    return ["screencap"]


def h264_max_size(box) -> int:
    """The scrcpy stream's longer side for a viewer box: rounded up so near sizes share one stream."""
    cap = settings.SCRCPY_MAX_SIZE
    wanted = -(-max(box) // H264_SIZE_STEP) * H264_SIZE_STEP
    return max(H264_SIZE_STEP, min(cap, wanted))


def choose(phone: PhoneConnection, codecs, box) -> tuple[Feed, list[str]]:
    """The feed for a viewer, and why better sources were skipped (said to the viewer)."""
    skipped = []
    for source in source_plan(configured_source_name(), codecs):
        reason = unavailable_reason(phone, source)
        if reason:
            skipped.append(f"{source}: {reason}")
            continue
        if source == "scrcpy":
            return _h264_feed(phone, h264_max_size(box)), skipped
        if source == "minicap":
            return _minicap_feed(phone, box), skipped
        if source == "scrcpy-decoded":
            return capture_loop_for(phone, "scrcpy"), skipped
        return capture_loop_for(phone, "screencap"), skipped
    return capture_loop_for(phone, "screencap"), skipped


def _h264_feed(phone, max_size) -> Feed:
    return feed_for(phone, "h264", lambda p, key: H264Feed(p, key, max_size), max_size)


def _minicap_feed(phone, box) -> Feed:
    running = [feed for feed in feeds_of(phone) if isinstance(feed, JpegRelayFeed) and not feed.failure
               and feed.key[0] == id(asyncio.get_running_loop())]
    if len(running) >= MAX_RELAY_SIZES and not any(feed.box == tuple(box) for feed in running):
        return max(running, key=lambda feed: feed.box[0] * feed.box[1])  # the browser scales it
    return feed_for(phone, "minicap", lambda p, key: JpegRelayFeed(p, key, tuple(box)), tuple(box))


def _phone_answers(phone: PhoneConnection) -> bool:
    try:
        phone.shell("true", timeout=3)
    except PhoneUnavailable:
        return False
    return True
