"""Where a phone's pictures come from, when they are decoded here: the newest screen.

- `screencap`: polls `screencap -p` over ADB. Works on any phone. An unchanged PNG is reported as
  such, so nothing is decoded or re-encoded. The universal fallback.
- `scrcpy`: a scrcpy server streams H.264, decoded here (see `scrcpy.py`), for viewers whose
  browser cannot decode it.

STREAM_SOURCE (a setting, from the environment) orders what viewers get (devices/streaming/feeds.py):
`auto` (default: scrcpy's H.264 relayed to browsers with WebCodecs, else minicap's JPEG frames
relayed, else screencap), `scrcpy`, `minicap` or `screencap`.
"""
from abc import ABC, abstractmethod
from dataclasses import dataclass

from django.conf import settings
from PIL import Image

from devices.phone import PhoneConnection, PhoneUnavailable
from devices.streaming.frames import png_size

SOURCES = ("auto", "scrcpy", "minicap", "screencap")


class SourceUnavailable(PhoneUnavailable):
    """The configured source cannot run here (missing decoder, server jar...); viewers are told."""


@dataclass
class Capture:
    size: tuple[int, int]  # the phone's screen in pixels (touch coordinates)
    png: bytes | None = None
    image: Image.Image | None = None
    unchanged: bool = False  # the same pixels as this source's previous capture


class FrameSource(ABC):
    name = ""

    @abstractmethod
    def capture(self) -> Capture:
        """Block until the newest screen is available; PhoneUnavailable when the phone is gone."""

    def close(self):
        """Free what the source holds (sockets, processes on the phone); nothing by default."""
        return None


class ScreencapSource(FrameSource):
    name = "screencap"

    def __init__(self, phone: PhoneConnection):
        self.phone = phone
        self._last_png = None

    def capture(self) -> Capture:
        png = self._screencap()
        unchanged = png == self._last_png  # a byte compare costs far less than decode + encode
        self._last_png = png
        return Capture(size=png_size(png), png=png, unchanged=unchanged)

    def _screencap(self) -> bytes:
        return self.phone.screencap_png()


def configured_source_name() -> str:
    name = settings.STREAM_SOURCE
    if name not in SOURCES:
        raise ValueError(f"STREAM_SOURCE={name!r}: choose one of {', '.join(SOURCES)}")
    return name


def open_source(phone: PhoneConnection, name: str | None = None) -> FrameSource:
    """A picture source: `scrcpy` decodes a scrcpy stream here; anything else polls screencap."""
    if name == "scrcpy":
        from devices.streaming.scrcpy import ScrcpySource  # optional: needs PyAV and a scrcpy server jar

        return ScrcpySource(phone)
    return ScreencapSource(phone)
