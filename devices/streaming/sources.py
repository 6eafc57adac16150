"""Where a phone's frames come from. Every source gives the same thing: the newest screen.

- `screencap` (default): polls `screencap -p` over ADB. Works on any phone, the virtual farm
  included. An unchanged PNG is reported as such, so nothing is decoded or re-encoded.
- `scrcpy`: a scrcpy server on a real phone streams H.264, decoded here (see `scrcpy.py`).

Choose with STREAM_SOURCE=screencap|scrcpy (environment or Django setting).
"""
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass

import adbutils
from django.conf import settings
from PIL import Image

from devices.phone import PhoneConnection, PhoneUnavailable

from .frames import png_size

SOURCES = ("screencap", "scrcpy")


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
        """Free what the source holds (sockets, processes on the phone)."""


class ScreencapSource(FrameSource):
    name = "screencap"

    def __init__(self, phone: PhoneConnection):
        self.phone = phone
        self._last_png = None
        self._server_version = None

    def capture(self) -> Capture:
        png = self._screencap()
        unchanged = png == self._last_png  # a byte compare costs far less than decode + encode
        self._last_png = png
        return Capture(size=png_size(png), png=png, unchanged=unchanged)

    def _screencap(self) -> bytes:
        """What phone.screencap_png() does, through the same adbutils client, minus adbutils' fixed
        waits: it asks `host:version` on a new connection before every command and sleeps 10 ms
        when closing one, ~20 of the ~22 ms a farm capture takes; polled 30 times a second, that
        is most of each frame's latency. The answer is read in large chunks and joined once."""
        try:
            if self._server_version is None:
                self._server_version = self.phone.adb._client.server_version()
            connection = self.phone.adb._client.make_connection()
            try:
                if self._server_version >= 41:
                    connection.send_command(f"host:tport:serial:{self.phone.serial}")
                    connection.check_okay()
                    connection.read(8)  # the transport id
                else:
                    connection.send_command(f"host:transport:{self.phone.serial}")
                    connection.check_okay()
                connection.send_command("exec:screencap -p")  # exec: is binary clean
                connection.check_okay()
                chunks = []
                while chunk := connection.conn.recv(1 << 20):
                    chunks.append(chunk)
            finally:
                connection.conn.close()
        except (adbutils.AdbError, OSError) as error:
            self._server_version = None
            raise PhoneUnavailable(f"{self.phone.serial}@{self.phone.address}: {error}") from error
        png = b"".join(chunks)
        if not png.startswith(b"\x89PNG"):
            raise PhoneUnavailable(f"{self.phone.serial}: screencap gave no PNG: {png[:100]!r}")
        return png


def configured_source_name() -> str:
    name = getattr(settings, "STREAM_SOURCE", None) or os.environ.get("STREAM_SOURCE", "screencap")
    if name not in SOURCES:
        raise ValueError(f"STREAM_SOURCE={name!r}: choose one of {', '.join(SOURCES)}")
    return name


def open_source(phone: PhoneConnection, name: str | None = None) -> FrameSource:
    name = name or configured_source_name()
    if name == "scrcpy":
        from .scrcpy import ScrcpySource  # optional: needs PyAV and a scrcpy server jar

        return ScrcpySource(phone)
    return ScreencapSource(phone)
