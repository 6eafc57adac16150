"""Screens the phone encodes itself, read as they come: minicap's JPEG frames, scrcpy's H.264.

Both daemons are started the way STF and scrcpy start them: a long-running `shell:` command (kept
open: closing it stops the daemon) and a connection to the abstract socket it listens on. The
binaries come from the operator (MINICAP_DIR, SCRCPY_SERVER_JAR: pushed before the start) or are
already on the phone in /data/local/tmp (a provisioned farm; the virtual phones are).

- minicap: a 24-byte global header, then frames of u32 little-endian length + JPEG. Frames come
  only when the screen changes; minicap skips frames while we have not read the last one.
- scrcpy 2.x: see devices/streaming/scrcpy.py for the wire format; packets are relayed to
  browsers as they are (WebCodecs decodes them).

Every argument of the daemons' command lines is a number or a name we made: nothing read from a
phone, a viewer or a model reaches a shell here.
"""
import asyncio
import os
import random
import struct

from django.conf import settings

from devices.phone import PhoneConnection, PhoneUnavailable
from devices.streaming import scrcpy
from devices.streaming.adb_async import AdbStreamError, close_quietly, open_service
from devices.streaming.sources import SourceUnavailable

MINICAP_HEADER = struct.Struct("<BBIIIIIBB")
FRAME_LENGTH = struct.Struct("<I")
REMOTE_MINICAP = "/data/local/tmp/minicap"
REMOTE_MINICAP_LIBRARY = "/data/local/tmp/minicap.so"
LISTEN_TIMEOUT = 5.0     # a daemon that does not listen by then did not start
STALL_SECONDS = 2.0      # a frame whose bytes stop coming for this long: the stream stalled
MAX_FRAME_BYTES = 16 << 20


class StreamBroken(PhoneUnavailable):
    """The stream ended, stalled or sent bytes that make no sense; starting it again may help."""


async def _read_shell_output(reader: asyncio.StreamReader) -> str:
    try:
        data = await asyncio.wait_for(reader.read(4096), 0.5)
    except (TimeoutError, OSError):
        return ""
    return data.decode("utf-8", "replace").strip()


class DaemonStream:
    """A daemon started over `shell:` and the connection to its abstract socket."""

    def __init__(self, phone: PhoneConnection):
        self.phone = phone
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self._shell_reader = self._shell_writer = None

    async def _start(self, what: str, command: str, socket_name: str):
        """Run `command` (kept open) and connect to `socket_name` once it listens."""
        self._shell_reader, self._shell_writer = await open_service(self.phone.address, self.phone.serial,
                                                                    "shell:" + command)
        deadline = asyncio.get_running_loop().time() + LISTEN_TIMEOUT
        while True:
            try:
                self.reader, self.writer = await open_service(self.phone.address, self.phone.serial,
                                                              f"localabstract:{socket_name}")
                return
            except AdbStreamError as error:
                if self._shell_reader.at_eof() or asyncio.get_running_loop().time() > deadline:
                    said = await _read_shell_output(self._shell_reader)
                    await self.close()
                    raise SourceUnavailable(f"{self.phone.serial}: {what} did not start: {said or error}") from error
                await asyncio.sleep(0.1)

    async def read_exactly(self, size: int, stall: float | None = STALL_SECONDS) -> bytes:
        try:
            if stall is None:
                return await self.reader.readexactly(size)
            return await asyncio.wait_for(self.reader.readexactly(size), stall)
        except asyncio.IncompleteReadError as error:
            raise StreamBroken(f"{self.phone.serial}: the stream ended") from error
        except TimeoutError as error:
            raise StreamBroken(f"{self.phone.serial}: the stream stalled mid-frame") from error
        except OSError as error:
            raise StreamBroken(f"{self.phone.serial}: {error}") from error

    async def close(self):
        close_quietly(self.writer)
        close_quietly(self._shell_writer)  # ends the daemon


def provision_minicap(phone: PhoneConnection) -> None:
    """Push minicap for this phone's ABI and SDK from MINICAP_DIR (minicap-prebuilt's layout:
    libs/<abi>/minicap, jni/libs/android-<sdk>/<abi>/minicap.so), or check it is there already."""
    folder = settings.MINICAP_DIR
    if folder:
        abi = phone.shell("getprop ro.product.cpu.abi").strip()
        sdk = phone.shell("getprop ro.build.version.sdk").strip()
        binary = os.path.join(folder, "libs", abi, "minicap")
        library = os.path.join(folder, "jni", "libs", f"android-{sdk}", abi, "minicap.so")
        missing = [path for path in (binary, library) if not os.path.isfile(path)]
        if missing:
            raise SourceUnavailable(f"{phone.serial}: MINICAP_DIR has no minicap for {abi}, SDK {sdk} "
                                    f"({', '.join(missing)})")
        phone.adb.sync.push(binary, REMOTE_MINICAP, mode=0o755)
        phone.adb.sync.push(library, REMOTE_MINICAP_LIBRARY, mode=0o644)
        return
    listing = phone.shell(f"ls {REMOTE_MINICAP} {REMOTE_MINICAP_LIBRARY}")
    if "No such file" in listing or REMOTE_MINICAP_LIBRARY not in listing:
        raise SourceUnavailable(f"{phone.serial}: no minicap in /data/local/tmp; set MINICAP_DIR to a "
                                "minicap-prebuilt folder to push it")


class MinicapStream(DaemonStream):
    """JPEG frames of this phone's screen fitted into `box`, encoded on the phone."""

    def __init__(self, phone: PhoneConnection, box: tuple[int, int]):
        super().__init__(phone)
        self.box = box
        self.display = (0, 0)

    async def open(self, run_blocking):
        await run_blocking(provision_minicap, self.phone)
        self.display = await run_blocking(self.phone.window_size)
        name = f"flywheel_minicap_{random.randrange(1 << 30):08x}"
        projection = f"{self.display[0]}x{self.display[1]}@{self.box[0]}x{self.box[1]}/0"
        await self._start("minicap", f"LD_LIBRARY_PATH=/data/local/tmp {REMOTE_MINICAP} -P {projection} "
                          f"-Q {settings.MINICAP_QUALITY} -n {name}", name)
        version, header_size, *_ = MINICAP_HEADER.unpack(await self.read_exactly(MINICAP_HEADER.size))
        if version != 1 or header_size < MINICAP_HEADER.size:
            await self.close()
            raise SourceUnavailable(f"{self.phone.serial}: minicap speaks protocol {version}, we speak 1")
        if header_size > MINICAP_HEADER.size:
            await self.read_exactly(header_size - MINICAP_HEADER.size)

    async def next_frame(self) -> bytes:
        """The next JPEG (bytes as sent; the caller checks them). Waits as long as the screen is still."""
        (length,) = FRAME_LENGTH.unpack(await self.read_exactly(FRAME_LENGTH.size, stall=None))
        if not 0 < length <= MAX_FRAME_BYTES:
            raise StreamBroken(f"{self.phone.serial}: minicap announced a frame of {length} bytes")
        return await self.read_exactly(length)


class ScrcpyStream(DaemonStream):
    """H.264 packets of this phone's screen, longer side at most `max_size`, encoded on the phone."""

    def __init__(self, phone: PhoneConnection, max_size: int):
        super().__init__(phone)
        self.max_size = max_size
        self.video_size = (0, 0)
        self.display = (0, 0)

    async def open(self, run_blocking):
        jar = await run_blocking(scrcpy.jar_on_phone, self.phone)
        self.display = await run_blocking(self.phone.window_size)
        scid = random.randrange(1, 1 << 31)
        await self._start("the scrcpy server", scrcpy.server_command(scrcpy.server_version(), scid, self.max_size, jar=jar),
                          f"scrcpy_{scid:08x}")
        if await self.read_exactly(1) != b"\x00":
            await self.close()
            raise SourceUnavailable(f"{self.phone.serial}: no dummy byte: not a scrcpy 2.x server")
        await self.read_exactly(64)  # device name
        codec, width, height = struct.unpack(">III", await self.read_exactly(12))
        if codec != scrcpy.CODEC_H264:
            await self.close()
            raise SourceUnavailable(f"{self.phone.serial}: scrcpy sends codec {codec:#x}, we asked for h264")
        self.video_size = (width, height)

    async def next_packet(self) -> tuple[bool, bool, int, bytes]:
        """(is_config, is_key_frame, pts, data) of the next packet."""
        flags, size = scrcpy.PACKET_HEADER.unpack(await self.read_exactly(scrcpy.PACKET_HEADER.size, stall=None))
        if size > MAX_FRAME_BYTES:
            raise StreamBroken(f"{self.phone.serial}: scrcpy announced a packet of {size} bytes")
        data = await self.read_exactly(size)
        return (bool(flags & scrcpy.CONFIG_FLAG), bool(flags & scrcpy.KEY_FRAME_FLAG),
                flags & scrcpy.PTS_MASK, data)
