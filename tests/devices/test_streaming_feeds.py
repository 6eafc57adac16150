"""Relayed feeds under bad input: corrupt frames are dropped, a stalled or broken stream is started
again, and a source that keeps failing is given up so its viewers fall back (the phone and its
other viewers unaffected). Streams here are scripted; the farm-backed paths are in
test_streaming_relay.py."""
import asyncio
import io

import pytest
from PIL import Image

from devices.phone import PhoneConnection
from devices.streaming import capture, feeds
from devices.streaming.relay import StreamBroken
from devices.streaming.sources import SourceUnavailable


def jpeg_of(color, size=(90, 200)):
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, "JPEG")
    return buffer.getvalue()


class ScriptedMinicap:
    """Plays `script` (JPEG bytes, or an exception to raise), then stays silent like a still screen."""

    opened = []
    scripts = []

    def __init__(self, phone, box):
        self.display = (1080, 2400)
        self.script = list(self.scripts.pop(0)) if self.scripts else []

    async def open(self, run_blocking):
        ScriptedMinicap.opened.append(self)
        if self.script and isinstance(self.script[0], BaseException):
            raise self.script.pop(0)

    async def next_frame(self):
        if not self.script:
            await asyncio.Event().wait()
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        await asyncio.sleep(0.01)
        return item

    async def close(self):
        pass


@pytest.fixture
def scripted(monkeypatch):
    ScriptedMinicap.opened, ScriptedMinicap.scripts = [], []
    monkeypatch.setattr(feeds, "MinicapStream", ScriptedMinicap)
    monkeypatch.setattr(feeds, "_phone_answers", lambda phone: True)
    monkeypatch.setattr(feeds, "page_flips", lambda phone: None)
    monkeypatch.setattr(feeds, "PROBE_AFTER_S", 0.05)
    monkeypatch.setattr(feeds, "CHECKED_EVERY_S", 0.02)
    capture._unavailable.clear()
    yield ScriptedMinicap
    capture._unavailable.clear()


def minicap_feed():
    phone = PhoneConnection("127.0.0.1:1", "real-7")
    return feeds._minicap_feed(phone, (90, 200)), phone


async def pictures(feed, count, timeout=5):
    """The next `count` distinct pictures the feed publishes (and the last frame seen)."""
    seen, frame = [], None
    while len(seen) < count:
        frame = await asyncio.wait_for(feed.newer_than(frame.seq if frame else 0), timeout)
        if frame.picture is not None and (not seen or seen[-1] is not frame.picture):
            seen.append(frame.picture)
    return seen


async def test_corrupt_frames_are_dropped_and_the_stream_goes_on(scripted):
    red, blue = jpeg_of("red"), jpeg_of("blue")
    scripted.scripts = [[red, b"not a jpeg at all", red[:-2], blue]]
    feed, _ = minicap_feed()
    feed.add_viewer("viewer", 30)
    first, second = await pictures(feed, 2)
    assert first.jpeg((1, 1)) == (red, (90, 200)) and second.jpeg((1, 1))[0] == blue
    assert feed.stats["corrupt"] == 2 and len(scripted.opened) == 1
    feed.remove_viewer("viewer")


async def test_a_stream_of_garbage_is_started_again(scripted):
    scripted.scripts = [[b"x"] * feeds.CORRUPT_LIMIT, [jpeg_of("green")]]
    feed, _ = minicap_feed()
    feed.add_viewer("viewer", 30)
    (picture,) = await pictures(feed, 1)
    assert picture.jpeg((1, 1))[0] == jpeg_of("green")
    assert len(scripted.opened) == 2 and feed.stats["restarts"] == 1
    feed.remove_viewer("viewer")


async def test_a_silent_stream_whose_screen_changed_has_stalled_and_is_restarted(scripted, monkeypatch):
    flips = iter(range(1000))
    monkeypatch.setattr(feeds, "page_flips", lambda phone: next(flips))  # the display keeps flipping
    scripted.scripts = [[jpeg_of("red")], [jpeg_of("blue")]]
    feed, _ = minicap_feed()
    feed.add_viewer("viewer", 30)
    first, second = await pictures(feed, 2)
    assert second.jpeg((1, 1))[0] == jpeg_of("blue") and feed.stats["restarts"] == 1
    feed.remove_viewer("viewer")


async def test_a_still_screen_is_not_a_stall_and_is_reported_as_checked(scripted, monkeypatch):
    monkeypatch.setattr(feeds, "page_flips", lambda phone: 41)  # nothing drawn
    scripted.scripts = [[jpeg_of("red")]]
    feed, _ = minicap_feed()
    feed.add_viewer("viewer", 30)
    (picture,) = await pictures(feed, 1)
    frame = feed.latest
    for _ in range(5):  # "unchanged, checked just now" notes: same picture, later times
        newer = await asyncio.wait_for(feed.newer_than(frame.seq), 2)
        assert newer.picture is picture and newer.captured_at >= frame.captured_at
        frame = newer
    await asyncio.sleep(0.3)
    assert len(scripted.opened) == 1 and feed.stats["restarts"] == 0
    feed.remove_viewer("viewer")


async def test_a_source_that_keeps_breaking_is_given_up_and_viewers_fall_back(scripted):
    scripted.scripts = [[StreamBroken("stalled")]] * (feeds.RESTARTS + 1)
    feed, phone = minicap_feed()
    feed.add_viewer("viewer", 30)
    frame = await asyncio.wait_for(feed.newer_than(0), 10)
    while not frame.fatal:
        frame = await asyncio.wait_for(feed.newer_than(frame.seq), 10)
    assert "keeps breaking" in frame.error and len(scripted.opened) == feeds.RESTARTS + 1
    fallback, skipped = feeds.choose(phone, ("jpeg",), (90, 200))
    assert fallback.source == "screencap" and "minicap: minicap keeps breaking" in skipped[0]
    feed.remove_viewer("viewer")


async def test_a_phone_without_minicap_is_told_why_at_once(scripted):
    scripted.scripts = [[SourceUnavailable("real-7: no minicap in /data/local/tmp; set MINICAP_DIR")]]
    feed, phone = minicap_feed()
    feed.add_viewer("viewer", 30)
    frame = await asyncio.wait_for(feed.newer_than(0), 5)
    assert frame.fatal and "MINICAP_DIR" in frame.error and len(scripted.opened) == 1
    assert "MINICAP_DIR" in feeds.unavailable_reason(phone, "minicap")
    feed.remove_viewer("viewer")


def test_h264_viewers_start_at_the_last_key_frame():
    feed = feeds.H264Feed(PhoneConnection("127.0.0.1:1", "real-7"), ("k",), 800)
    key, delta1, delta2 = (feeds.VideoPacket(seq, 0.0, seq == 10, b"") for seq in (10, 11, 12))
    feed.gop = [key, delta1, delta2]
    assert feed.packets_after(0) == [key, delta1, delta2]     # a new viewer: the whole GOP
    assert feed.packets_after(11) == [delta2]                 # a viewer that has 10 and 11
    assert feed.packets_after(12) == []
    feed.gop = [feeds.VideoPacket(20, 0.0, True, b"")]        # a new key frame while it lagged
    assert [packet.seq for packet in feed.packets_after(12)] == [20]
    config = b"\x00\x00\x00\x01\x67\x42\xc0\x1f\x8c\x8d" + b"\x00\x00\x00\x01\x68\xce"
    assert feeds.avc_codec_string(config) == "avc1.42c01f"
