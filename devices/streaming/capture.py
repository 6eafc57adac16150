"""A phone's screen for its viewers: one feed per phone (and source, and size), shared by all its viewers.

Flow control as STF does it: a feed overwrites `latest` and wakes whoever waits. Nothing is
queued, so a slow viewer simply gets the newest frame when it is ready again (stale ones are
dropped). Feeds live in the web process (one per phone per process): frames never cross Redis.
A feed runs while someone watches and stops when the last viewer leaves.

`CaptureLoop` is the universal feed: it polls pictures (`screencap`, or frames a scrcpy stream
decoded here) and each viewer size is encoded from them in this process. The relayed feeds
(devices/streaming/feeds.py) forward what the phone encoded itself.
"""
import asyncio
import itertools
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings

from devices.phone import PhoneConnection, PhoneUnavailable
from devices.streaming.frames import Frame, Picture
from devices.streaming.sources import SourceUnavailable, open_source

log = logging.getLogger(__name__)
RETRY_SECONDS = 1.0  # a phone that stopped answering is asked again this often
STILL_AFTER, STILL_INTERVAL = 10, 0.1  # after 10 unchanged captures, poll at most 10 times a second

# Captures, decodes and encodes block (sockets, zlib, libjpeg): they run on this pool, not on the
# small default one that 16 phones would exhaust. zlib and libjpeg release the GIL. One pool per
# process, sized when it starts (the STREAM_THREADS setting).
_pool = ThreadPoolExecutor(max_workers=settings.STREAM_THREADS, thread_name_prefix="screen")


async def run_blocking(function, *args):
    return await asyncio.get_running_loop().run_in_executor(_pool, function, *args)


class Feed:
    """Viewers, the newest frame, and the task that produces frames while anyone watches."""

    codec = "jpeg"   # what viewers receive: "jpeg" frames or "h264" packets
    source = ""      # where the frames come from, for the page and the logs

    def __init__(self, phone: PhoneConnection, key):
        self.phone = phone
        self.key = key
        self.viewers: dict[object, float] = {}  # viewer -> the frames per second it wants
        self.latest: Frame | None = None
        self.stats = {"captures": 0, "changed": 0, "capture_seconds": 0.0, "errors": 0}
        self.published = 0  # frames published so far: a viewer's share of them tells what it skipped
        self._changed = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def add_viewer(self, viewer, max_fps: float):
        self.viewers[viewer] = max_fps
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"{self.source} {self.key}")

    def remove_viewer(self, viewer):
        self.viewers.pop(viewer, None)
        if not self.viewers:
            self.retire()
            self.wake()  # let the task see it has nobody left to serve

    def retire(self):
        """New viewers get a new feed from now on (nobody is left, or this one gave up)."""
        if _loops.get(self.key) is self:
            del _loops[self.key]

    def wake(self):
        """Look now instead of after the usual interval (input just changed the screen)."""
        self._wake.set()

    async def newer_than(self, seq: int) -> Frame:
        """The newest frame once there is one newer than `seq` (never a queue of old ones)."""
        while self.latest is None or self.latest.seq <= seq:
            await self._changed.wait()
        return self.latest

    def next_seq(self) -> int:
        """Frame numbers are unique per phone across its feeds and their restarts, so a viewer's
        memory of frames (to place input) never mistakes an old frame for a new one."""
        phone_key = self.key[:3]
        _last_seq[phone_key] = _last_seq.get(phone_key, 0) + 1
        return _last_seq[phone_key]

    def _publish(self, frame: Frame):
        self.latest = frame
        self.published += 1
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    async def _sleep(self, seconds: float) -> bool:
        """Wait `seconds` or until woken; True when woken (input happened)."""
        if seconds > 0 and not self._wake.is_set():
            try:
                await asyncio.wait_for(self._wake.wait(), seconds)
            except TimeoutError:
                pass
        woken = self._wake.is_set()
        self._wake.clear()
        return woken

    async def _run(self):
        raise NotImplementedError


class CaptureLoop(Feed):
    """Pictures polled from the phone (or decoded here), encoded per viewer size."""

    def __init__(self, phone: PhoneConnection, key, source_name=None):
        super().__init__(phone, key)
        self.source_name = source_name or "screencap"
        # What viewers and the unavailability memo call it (feeds.source_plan's names).
        self.source = "scrcpy-decoded" if self.source_name == "scrcpy" else self.source_name

    async def _run(self):
        source, picture, last_error, still = None, None, "", 0
        try:
            while self.viewers:
                began = time.monotonic()
                try:
                    if source is None:
                        source = await run_blocking(open_source, self.phone, self.source_name)
                    captured_at = time.time()
                    capture = await run_blocking(source.capture)
                except SourceUnavailable as error:  # cannot run here (no decoder, no server): others may
                    log.warning("screen of %s: %s unavailable: %s", self.phone.serial, self.source, error)
                    mark_unavailable(self.phone, self.source, str(error))
                    self._publish(Frame(self.next_seq(), time.time(), picture, error=str(error), fatal=True))
                    self.retire()
                    return
                except Exception as error:
                    message = str(error) if isinstance(error, PhoneUnavailable) else \
                        f"{self.phone.serial}: capture failed: {error}"
                    if message != last_error:
                        log.warning("screen of %s unavailable: %s", self.phone.serial, message,
                                    exc_info=not isinstance(error, PhoneUnavailable))
                    last_error = message
                    self.stats["errors"] += 1
                    self._publish(Frame(self.next_seq(), time.time(), picture, error=message))
                    if source is not None:
                        await run_blocking(source.close)
                        source = None
                    await self._sleep(RETRY_SECONDS)
                    continue
                if last_error:
                    log.info("screen of %s is back", self.phone.serial)
                    last_error = ""
                self.stats["captures"] += 1
                self.stats["capture_seconds"] += time.monotonic() - began
                if picture is None or not capture.unchanged or picture.size != capture.size:
                    self.stats["changed"] += 1
                    picture = Picture(next(_versions), capture.size, png=capture.png, image=capture.image)
                self._publish(Frame(self.next_seq(), captured_at, picture))
                still = still + 1 if capture.unchanged else 0
                interval = 1.0 / max(self.viewers.values(), default=1.0)
                if still >= STILL_AFTER:  # a still screen is polled less; input wakes the loop
                    interval = max(interval, STILL_INTERVAL)
                if await self._sleep(interval - (time.monotonic() - began)):
                    still = 0  # after input, poll at full rate: a real phone's screen changes late
        finally:
            if source is not None:
                await run_blocking(source.close)


_loops: dict[tuple, Feed] = {}
_unavailable: dict[tuple, tuple[float, str]] = {}
UNAVAILABLE_FOR_S = 60.0  # a source that gave up on a phone is not tried there again for this long


def mark_unavailable(phone: PhoneConnection, source: str, reason: str, seconds: float = UNAVAILABLE_FOR_S):
    _unavailable[(phone.address, phone.serial, source)] = (time.monotonic() + seconds, reason)


def unavailable_reason(phone: PhoneConnection, source: str) -> str:
    until, reason = _unavailable.get((phone.address, phone.serial, source), (0.0, ""))
    return reason if time.monotonic() < until else ""
_last_seq: dict[tuple, int] = {}
_versions = itertools.count(1)  # picture versions are unique in the process


def feed_for(phone: PhoneConnection, kind: str, factory, *detail):
    """The phone's feed of this kind (and detail, e.g. a size) in this process and event loop
    (tests run one event loop each); `factory(phone, key)` makes it when there is none."""
    key = (id(asyncio.get_running_loop()), phone.address, phone.serial, kind, *detail)
    feed = _loops.get(key)
    if feed is None:
        feed = _loops[key] = factory(phone, key)
    return feed


def feeds_of(phone: PhoneConnection) -> list[Feed]:
    """The feeds of a phone running in this process (any event loop)."""
    return [feed for key, feed in list(_loops.items()) if key[1:3] == (phone.address, phone.serial)]


def capture_loop_for(phone: PhoneConnection, source_name=None) -> CaptureLoop:
    """The phone's polling feed (`screencap`, or scrcpy decoded here)."""
    name = source_name or "screencap"
    return feed_for(phone, "pictures:" + name, lambda p, key: CaptureLoop(p, key, name))
