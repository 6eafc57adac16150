"""One capture loop per phone, shared by all its viewers; it keeps only the newest frame.

Flow control as STF does it: the loop overwrites `latest` and wakes whoever waits. Nothing is
queued, so a slow viewer simply gets the newest frame when it is ready again (stale ones are
dropped). The loop captures as fast as its fastest viewer asks (max_fps), and stops when the last
viewer leaves. Loops live in the web process (one per phone per process): frames never cross Redis.
"""
import asyncio
import itertools
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor

from devices.phone import PhoneConnection, PhoneUnavailable
from devices.streaming.frames import Frame, Picture
from devices.streaming.sources import open_source

log = logging.getLogger(__name__)
RETRY_SECONDS = 1.0  # a phone that stopped answering is asked again this often
STILL_AFTER, STILL_INTERVAL = 10, 0.1  # after 10 unchanged captures, poll at most 10 times a second

# Captures, decodes and encodes block (sockets, zlib, libjpeg): they run on this pool, not on the
# small default one that 16 phones would exhaust. zlib and libjpeg release the GIL.
_pool = ThreadPoolExecutor(max_workers=int(os.environ.get("STREAM_THREADS", "32")),
                           thread_name_prefix="screen")


async def run_blocking(function, *args):
    return await asyncio.get_running_loop().run_in_executor(_pool, function, *args)


class CaptureLoop:
    def __init__(self, phone: PhoneConnection, key, source_name=None):
        self.phone = phone
        self.key = key
        self.source_name = source_name
        self.viewers: dict[object, float] = {}  # viewer -> the frames per second it wants
        self.latest: Frame | None = None
        self.stats = {"captures": 0, "changed": 0, "capture_seconds": 0.0, "errors": 0}
        self._changed = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    # viewers ------------------------------------------------------------------------------
    def add_viewer(self, viewer, max_fps: float):
        self.viewers[viewer] = max_fps
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"capture {self.key}")

    def remove_viewer(self, viewer):
        self.viewers.pop(viewer, None)
        if not self.viewers and _loops.get(self.key) is self:
            del _loops[self.key]
            self.wake()  # let the task see it has nobody left to serve

    def wake(self):
        """Capture now instead of after the usual interval (input just changed the screen)."""
        self._wake.set()

    async def newer_than(self, seq: int) -> Frame:
        """The newest frame once there is one newer than `seq` (never a queue of old ones)."""
        while self.latest is None or self.latest.seq <= seq:
            await self._changed.wait()
        return self.latest

    # the loop -------------------------------------------------------------------------------
    def _publish(self, frame: Frame):
        self.latest = frame
        _last_seq[self.key] = frame.seq
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
        # Numbers continue across loops of one phone, so a viewer's memory of frames stays valid.
        source, picture, last_error, still = None, None, "", 0
        seq = _last_seq.get(self.key, 0)
        try:
            while self.viewers:
                began = time.monotonic()
                try:
                    if source is None:
                        source = await run_blocking(open_source, self.phone, self.source_name)
                    captured_at = time.time()
                    capture = await run_blocking(source.capture)
                except Exception as error:
                    message = str(error) if isinstance(error, PhoneUnavailable) else \
                        f"{self.phone.serial}: capture failed: {error}"
                    if message != last_error:
                        log.warning("screen of %s unavailable: %s", self.phone.serial, message,
                                    exc_info=not isinstance(error, PhoneUnavailable))
                    last_error = message
                    self.stats["errors"] += 1
                    seq += 1
                    self._publish(Frame(seq, time.time(), picture, error=message))
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
                seq += 1
                self._publish(Frame(seq, captured_at, picture))
                still = still + 1 if capture.unchanged else 0
                interval = 1.0 / max(self.viewers.values(), default=1.0)
                if still >= STILL_AFTER:  # a still screen is polled less; input wakes the loop
                    interval = max(interval, STILL_INTERVAL)
                if await self._sleep(interval - (time.monotonic() - began)):
                    still = 0  # after input, poll at full rate: a real phone's screen changes late
        finally:
            if source is not None:
                await run_blocking(source.close)


_loops: dict[tuple, CaptureLoop] = {}
_last_seq: dict[tuple, int] = {}
_versions = itertools.count(1)  # picture versions are unique in the process


def capture_loop_for(phone: PhoneConnection, source_name=None) -> CaptureLoop:
    """The phone's loop in this process and event loop (tests run one event loop each)."""
    key = (id(asyncio.get_running_loop()), phone.address, phone.serial)
    loop = _loops.get(key)
    if loop is None:
        loop = _loops[key] = CaptureLoop(phone, key, source_name)
    return loop
