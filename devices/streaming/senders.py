"""What one viewer's socket sends from a feed: JPEG frames (newest wins) or H.264 packets (in order).

- `JpegSender`: the viewer gets the next frame only after it acked the previous one, so a slow
  viewer skips stale frames instead of queueing them (STF's flow control). New pictures go out at
  the viewer's max_fps; on a still screen an "unchanged" note (header, no JPEG) goes out at most
  STILL_FPS times a second, just to keep the frame age honest.
- `H264Sender`: H.264 frames depend on each other, so they cannot be skipped one by one. The viewer
  starts at a key frame (with the codec config) and gets every packet after it; a viewer whose
  unacknowledged packets pile up (a slow link, a slow decoder) is moved to JPEG at a lower rate
  rather than queued behind: newest-wins again.

Either way, the first new picture captured after an input ran is announced to the viewer
(`input_frame`), so the page can mark the frame that shows the input's effect.
"""
import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass

from devices.streaming.capture import run_blocking
from devices.streaming.frames import RelayedPicture, pack, pack_video

log = logging.getLogger(__name__)
STILL_FPS = 5.0  # "unchanged" notes per second on a still screen
ACK_TIMEOUT = 5.0  # a client that never acks still gets a frame now and then
H264_MAX_UNACKED = 8      # packets a viewer may have in flight before it counts as lagging...
H264_MAX_LAG_S = 1.0      # ...or this old, the oldest of them
SLOW_LINK_FPS = 10.0      # what a lagging H.264 viewer gets as JPEG


@dataclass
class SentFrame:
    version: int          # the picture (JPEG) or packet (H.264) it showed
    phone_size: tuple[int, int]
    jpeg_size: tuple[int, int]  # the frame's size as the viewer drew it (JPEG or video)
    captured_at: float


class Sender:
    def __init__(self, viewer, feed):
        self.viewer = viewer  # the ScreenConsumer: send, send_json, box, max_fps, sent, marks
        self.feed = feed
        self.task: asyncio.Task | None = None
        self.frames_sent = 0
        self.dropped = 0
        self.encode_seconds = 0.0

    def start(self):
        self.task = asyncio.create_task(self._run_guarded())

    def stop(self):
        if self.task is not None:
            self.task.cancel()
            self.task = None

    async def _run_guarded(self):
        try:
            await self.run()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a closed socket, mostly: the consumer's disconnect cleans up
            log.info("screen of %s for %s stopped: %r", self.viewer.device, self.viewer.user, error)

    async def run(self):
        raise NotImplementedError

    def acked(self, seq):
        raise NotImplementedError

    def latest_view(self):
        """(version, phone size) of what the feed shows now, or None."""
        raise NotImplementedError

    async def _phone_state(self, item, last_error: str) -> str:
        """Tell the viewer when the phone vanishes or comes back; the error now ('' = none)."""
        if item.error:
            if item.error != last_error:
                await self.viewer.send_json({"type": "phone_unavailable", "message": item.error})
            return item.error
        if last_error:
            await self.viewer.send_json({"type": "phone_back"})
        return ""

    def _remember(self, seq, sent: SentFrame):
        self.viewer.remember_frame(seq, sent)
        self.frames_sent += 1


class JpegSender(Sender):
    codec = "jpeg"

    def __init__(self, viewer, feed):
        super().__init__(viewer, feed)
        self._acked = asyncio.Event()
        self._acked.set()
        self._last_sent_seq = None
        self._last_sent: SentFrame | None = None

    def acked(self, seq):
        if seq == self._last_sent_seq:
            self._acked.set()

    def latest_view(self):
        frame = self.feed.latest
        if frame is None or frame.picture is None:
            return None
        return frame.picture.version, frame.picture.size

    async def run(self):
        last_seq, last_error, last_sent, last_published = 0, "", None, None
        while True:
            await self.feed.newer_than(last_seq)
            try:
                await asyncio.wait_for(self._acked.wait(), ACK_TIMEOUT)
            except TimeoutError:
                pass
            if last_sent is not None:
                await self.pace(last_sent)
            frame = self.feed.latest  # the newest: whatever came meanwhile was dropped
            if last_published is not None:
                self.dropped += max(0, self.feed.published - last_published - 1)
            last_published = self.feed.published
            if frame.fatal:
                await self.viewer.fall_back(self, frame.error)
                return
            last_seq = frame.seq
            last_error = await self._phone_state(frame, last_error)
            if last_error:
                continue
            last_sent = time.monotonic()  # pace from the start: encoding is part of the interval
            await self.send_frame(frame)

    async def pace(self, last_sent):
        """New pictures go out at the viewer's max_fps; "unchanged" notes only STILL_FPS times a
        second, but a change ends that wait at once."""
        while True:
            frame = self.feed.latest
            if frame.error or self.is_new_picture(frame):
                await asyncio.sleep(max(0.0, last_sent + 1 / self.viewer.max_fps - time.monotonic()))
                return
            wait = last_sent + 1 / min(self.viewer.max_fps, STILL_FPS) - time.monotonic()
            if wait <= 0:
                return
            try:
                await asyncio.wait_for(self.feed.newer_than(frame.seq), wait)
            except TimeoutError:
                return

    def is_new_picture(self, frame) -> bool:
        previous = self._last_sent
        return not (previous and frame.picture is not None and previous.version == frame.picture.version
                    and previous.jpeg_size == frame.picture.output_size(self.viewer.box))

    async def send_frame(self, frame):
        picture = frame.picture
        new = self.is_new_picture(frame)
        if not new:
            jpeg, size = b"", picture.output_size(self.viewer.box)  # unchanged: only the time is news
        else:
            began = time.monotonic()
            if isinstance(picture, RelayedPicture):  # encoded on the phone: relayed as it came
                jpeg, size = picture.jpeg(self.viewer.box)
            else:
                jpeg, size = await run_blocking(picture.jpeg, self.viewer.box)
            self.encode_seconds += time.monotonic() - began
        self._last_sent = SentFrame(picture.version, picture.size, size, frame.captured_at)
        self._last_sent_seq = frame.seq
        self._remember(frame.seq, self._last_sent)
        self._acked.clear()
        if new:
            await self.viewer.frame_going_out(frame.seq, frame.captured_at)
        await self.viewer.send(bytes_data=pack(frame, jpeg, size))


class H264Sender(Sender):
    codec = "h264"

    def __init__(self, viewer, feed):
        super().__init__(viewer, feed)
        self._unacked: deque = deque()  # (seq, monotonic time sent)
        self._last_seq = 0

    def acked(self, seq):
        while self._unacked and self._unacked[0][0] <= seq:
            self._unacked.popleft()

    def lagging(self) -> bool:
        return len(self._unacked) > H264_MAX_UNACKED or bool(
            self._unacked and time.monotonic() - self._unacked[0][1] > H264_MAX_LAG_S)

    def latest_view(self):
        return (self._last_seq, self.feed.display) if self._last_seq else None

    async def run(self):
        feed, last_error, announced = self.feed, "", None
        while True:
            try:
                item = await asyncio.wait_for(feed.newer_than(self._last_seq), 1 / STILL_FPS)
            except TimeoutError:
                if self._last_seq and not last_error:  # unchanged: only the time is news
                    await self.viewer.send(bytes_data=pack_video(self._last_seq, feed.checked_at, False,
                                                                 feed.video_size, feed.display, b""))
                continue
            if item.fatal:
                await self.viewer.fall_back(self, item.error)
                return
            last_error = await self._phone_state(item, last_error)
            if last_error:
                self._last_seq = max(self._last_seq, item.seq)
                continue
            packets = feed.packets_after(self._last_seq)
            if not packets:
                continue
            if announced != (feed.codec_string, feed.video_size):
                announced = (feed.codec_string, feed.video_size)
                await self.viewer.send_json({"type": "stream", "codec": "h264", "source": feed.source,
                                             "codec_string": feed.codec_string, "width": feed.video_size[0],
                                             "height": feed.video_size[1]})
            for packet in packets:
                data = packet.data
                if packet.key_frame and feed.config and feed.config not in data[:len(feed.config) + 8]:
                    data = feed.config + data  # a decoder starting here needs the SPS/PPS first
                self._remember(packet.seq, SentFrame(packet.seq, feed.display, feed.video_size, packet.captured_at))
                self._unacked.append((packet.seq, time.monotonic()))
                self._last_seq = packet.seq
                await self.viewer.frame_going_out(packet.seq, packet.captured_at)
                await self.viewer.send(bytes_data=pack_video(packet.seq, packet.captured_at, packet.key_frame,
                                                             feed.video_size, feed.display, data))
            if self.lagging():
                await self.viewer.fall_back(self, "this viewer cannot keep up with the video (slow link or "
                                                  "decoder): JPEG frames at a lower rate instead", slow=True)
                return
