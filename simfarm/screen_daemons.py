"""The screen-streaming daemons a farm runs on phones: minicap (JPEG frames) and scrcpy's server (H.264).

Both are started as real farms start them, with a long-running `shell:` command, and listen on an
abstract socket that a client reaches with the `localabstract:NAME` device service:

- minicap (STF's): `LD_LIBRARY_PATH=/data/local/tmp /data/local/tmp/minicap -P 1080x2400@360x800/0
  [-n NAME] [-Q QUALITY]` (`-i` prints the display as JSON, `-s` writes one JPEG to stdout). A
  client gets the 24-byte global header (version 1, header size, pid, real and virtual size,
  orientation, quirks), then frames as a little-endian u32 length and a JPEG, one per screen
  change. The daemon encodes the newest screen only once the client has taken the previous frame
  (minicap's frame skipping), so a slow client gets fewer, fresher frames.
- scrcpy 2.x: `CLASSPATH=JAR app_process / com.genymobile.scrcpy.Server VERSION key=value...` with
  tunnel_forward=true, audio=false, control=false, video_codec=h264. The first connection to
  `scrcpy_<scid>` is the video socket: dummy byte, 64-byte device name, codec meta (codec id,
  width, height, big-endian), then packets of (u64 PTS with flags, u32 size, Annex B data); the
  first packet is the codec config (SPS/PPS). The server ends when that socket closes.

The files live in /data/local/tmp as if the farm's image came provisioned (see `preinstall`); a
client may push its own. A display that changes size (wm size) ends the streams: real clients
restart minicap or scrcpy on rotation too. Stopping the shell command stops the daemon.
"""
from __future__ import annotations

import asyncio
import json
import re
import shlex
import struct
import time
from dataclasses import dataclass, field

from simfarm.screen_stream import H264Encoder, ScreenEncoder, h264_available, scaled_size
from simfarm.wire import OKAY, discard_until_eof, fail, finish

MINICAP_BINARY = "/data/local/tmp/minicap"
MINICAP_LIBRARY = "/data/local/tmp/minicap.so"
SCRCPY_SERVER = "/data/local/tmp/scrcpy-server.jar"
SCRCPY_VERSIONS = ("2.4",)  # what a client may name; the video protocol is the same across 2.x
MINICAP_HEADER = struct.Struct("<BBIIIIIBB")
FRAME_LENGTH = struct.Struct("<I")
SCRCPY_PACKET = struct.Struct(">QI")
SCRCPY_CONFIG_FLAG, SCRCPY_KEY_FLAG = 1 << 63, 1 << 62
CODEC_H264 = int.from_bytes(b"h264", "big")
POLL_SECONDS = 0.25  # besides the pokes after each command, how often a daemon looks at its screen
_PROJECTION = re.compile(r"(\d+)x(\d+)@(\d+)x(\d+)/(0|90|180|270)")


def preinstall(fs) -> None:
    """What a provisioned farm phone has in /data/local/tmp (a client may push its own instead)."""
    fs.write(MINICAP_BINARY, b"\x7fELF minicap (virtual farm)\n", 0o100755)
    fs.write(MINICAP_LIBRARY, b"\x7fELF minicap.so (virtual farm)\n", 0o100644)
    fs.write(SCRCPY_SERVER, b"PK\x03\x04 scrcpy-server (virtual farm)\n", 0o100644)


def display_state(phone) -> tuple:
    """Changes whenever what the display shows may have changed."""
    return phone.engine.version, phone.screen_on


@dataclass
class Launch:
    """A parsed daemon command line. `output` set: answer it like a one-shot command instead."""

    kind: str = ""                 # minicap | scrcpy
    socket_name: str = ""
    virtual_size: tuple = (0, 0)   # minicap: the box frames are fitted into
    quality: int = 80
    max_size: int = 0              # scrcpy
    output: tuple | None = None    # (stdout bytes, stderr bytes, exit code)


def _result(stdout=b"", stderr="", code=0) -> Launch:
    return Launch(output=(stdout, stderr.encode() if isinstance(stderr, str) else stderr, code))


def parse_launch(phone, command: str) -> Launch | None:
    """The daemon `command` starts on `phone`, a one-shot answer, or None (not a daemon command)."""
    if "minicap" not in command and "com.genymobile.scrcpy.Server" not in command:
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    env = {}
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words:
        return None
    if words[0].rsplit("/", 1)[-1] == "minicap":
        return _parse_minicap(phone, words, env)
    if words[0] == "app_process" and "com.genymobile.scrcpy.Server" in words:
        return _parse_scrcpy(phone, words, env)
    return None


def _parse_minicap(phone, words, env) -> Launch:
    binary = words[0] if "/" in words[0] else MINICAP_BINARY
    if not phone.fs.isfile(binary):
        return _result(stderr=f"/system/bin/sh: {words[0]}: inaccessible or not found\n", code=127)
    library_dir = env.get("LD_LIBRARY_PATH", "/system/lib64")
    if not phone.fs.isfile(f"{library_dir.rstrip('/')}/minicap.so"):
        return _result(stderr=f'CANNOT LINK EXECUTABLE "{binary}": library "minicap.so" not found\n', code=1)
    options, index = {}, 1
    while index < len(words):
        word = words[index]
        if word in ("-P", "-n", "-Q", "-d", "-r"):
            if index + 1 >= len(words):
                return _result(stderr=f"minicap: option {word} needs a value\n", code=1)
            options[word] = words[index + 1]
            index += 2
        elif word in ("-i", "-s", "-S", "-t", "-h"):
            options[word] = True
            index += 1
        else:
            return _result(stderr=f"minicap: unknown argument {word}\n", code=1)
    width, height = ScreenEncoder.for_phone(phone).display_size()
    if options.get("-i"):
        info = {"id": 0, "width": width, "height": height, "xdpi": phone.density, "ydpi": phone.density,
                "size": 6.1, "density": phone.density / 160, "fps": 60.0, "secure": False, "rotation": 0}
        return _result(stdout=(json.dumps(info) + "\n").encode())
    projection = _PROJECTION.fullmatch(options.get("-P", ""))
    if projection is None:
        return _result(stderr="minicap: -P <w>x<h>@<w>x<h>/{0|90|180|270} is required\n", code=1)
    virtual = (int(projection.group(3)), int(projection.group(4)))
    if min(virtual) < 1:
        return _result(stderr="minicap: the virtual size must be positive\n", code=1)
    try:
        quality = max(1, min(100, int(options.get("-Q", 80))))
    except ValueError:
        return _result(stderr="minicap: -Q takes a number\n", code=1)
    if options.get("-s"):  # one screenshot as JPEG on stdout
        _, jpeg = ScreenEncoder.for_phone(phone).jpeg(fit_into((width, height), virtual), quality)
        return _result(stdout=jpeg)
    return Launch("minicap", options.get("-n", "minicap"), virtual_size=virtual, quality=quality)


def _parse_scrcpy(phone, words, env) -> Launch:
    jar = env.get("CLASSPATH", "")
    data = phone.fs.read(jar) if jar and phone.fs.isfile(jar) else b""
    if not data.startswith(b"PK"):
        return _result(stderr="Error: Could not find or load main class com.genymobile.scrcpy.Server\n", code=1)
    position = words.index("com.genymobile.scrcpy.Server")
    if position + 1 >= len(words):
        return _result(stderr="[server] ERROR: Missing client version\n", code=1)
    version, options = words[position + 1], {}
    if version not in SCRCPY_VERSIONS:
        return _result(stderr=f"[server] ERROR: The server version ({SCRCPY_VERSIONS[0]}) does not match "
                              f"the client ({version})\n", code=1)
    for word in words[position + 2:]:
        key, _, value = word.partition("=")
        options[key] = value
    problems = []
    if options.get("tunnel_forward") != "true":
        problems.append("the virtual farm has no reverse tunnels: pass tunnel_forward=true")
    if options.get("audio", "true") != "false":
        problems.append("the virtual phones have no audio capture: pass audio=false")
    if options.get("control", "true") != "false":
        problems.append("the virtual farm's scrcpy has no control socket: pass control=false")
    if options.get("video_codec", "h264") != "h264":
        problems.append(f"video_codec={options['video_codec']} is not supported (h264 only)")
    why_not = h264_available()
    if why_not:
        problems.append(f"the virtual farm cannot encode video: {why_not}")
    try:
        scid = int(options.get("scid", "-1"), 16)
        max_size = int(options.get("max_size", "0"))
    except ValueError:
        problems.append("scid must be hexadecimal and max_size a number")
        scid, max_size = -1, 0
    if problems:
        return _result(stderr="".join(f"[server] ERROR: {problem}\n" for problem in problems), code=1)
    name = "scrcpy" if scid == -1 else f"scrcpy_{scid:08x}"
    return Launch("scrcpy", name, max_size=max_size)


def fit_into(size: tuple[int, int], box: tuple[int, int]) -> tuple[int, int]:
    """`size` scaled to fit `box`, keeping its aspect ratio (what minicap makes of a projection)."""
    scale = min(box[0] / size[0], box[1] / size[1], 1.0)
    return max(1, round(size[0] * scale)), max(1, round(size[1] * scale))


def split_annexb(data: bytes) -> list[tuple[int, bytes]]:
    """[(NAL unit type, the unit with its start code)] of an Annex B byte string."""
    starts = [match.start() for match in re.finditer(b"\x00\x00\x01", data)]
    units = []
    for number, start in enumerate(starts):
        begin = start - 1 if start and data[start - 1] == 0 else start
        end = starts[number + 1] if number + 1 < len(starts) else len(data)
        if number + 1 < len(starts) and data[end - 1] == 0:
            end -= 1
        units.append((data[start + 3] & 0x1F, data[begin:end]))
    return units


@dataclass
class Daemon:
    phone: object
    launch: Launch
    pid: int
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    clients: set = field(default_factory=set)
    accepted: int = 0


class ScreenDaemons:
    """The daemons running on a farm's phones, their abstract sockets, and screen-change pokes."""

    def __init__(self, run_blocking):
        self._run_blocking = run_blocking  # async fn(callable, *args): the farm's thread pool
        self._sockets: dict[tuple[str, str], Daemon] = {}
        self._changes: dict[str, asyncio.Event] = {}
        self._next_pid = 4000

    def poke(self, serial: str) -> None:
        """A command ran on the phone: its screen may have changed."""
        event = self._changes.pop(serial, None)
        if event is not None:
            event.set()

    def _change_event(self, serial) -> asyncio.Event:
        return self._changes.setdefault(serial, asyncio.Event())

    # -- the daemon's own shell connection ---------------------------------------------------------

    async def run(self, launch: Launch, phone, reader, writer, shell_v2: bool, packets) -> None:
        """Serve the shell command that runs the daemon, until the client hangs up or it ends."""
        if launch.output is not None:
            stdout, stderr, code = launch.output
            writer.write(OKAY + (packets(stdout, stderr, code) if shell_v2 else stderr + stdout))
            await finish(reader, writer)
            return
        key = (phone.serial, launch.socket_name)
        if key in self._sockets:
            message = f"ERROR: Unable to bind socket: Address already in use ({launch.socket_name})\n"
            writer.write(OKAY + (packets(b"", message.encode(), 1) if shell_v2 else message.encode()))
            await finish(reader, writer)
            return
        self._next_pid += 1
        daemon = self._sockets[key] = Daemon(phone, launch, self._next_pid)
        log = (f"PID: {daemon.pid}\nINFO: listening on @{launch.socket_name} ({launch.kind})\n").encode()
        writer.write(OKAY + (packets(b"", log, None) if shell_v2 else log))
        client_gone = asyncio.ensure_future(discard_until_eof(reader))
        stopped = asyncio.ensure_future(daemon.stopped.wait())
        try:
            await writer.drain()
            await asyncio.wait({client_gone, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            self._stop(key, daemon)
        if not client_gone.done() and shell_v2:
            writer.write(packets(b"", b"", 0))
        await finish(reader, writer, client_gone)

    def _stop(self, key, daemon) -> None:
        daemon.stopped.set()
        if self._sockets.get(key) is daemon:
            del self._sockets[key]
        for client in list(daemon.clients):
            client.transport.abort()

    def stop_all(self, serial: str) -> None:
        """The phone was unplugged: its processes are gone."""
        for key, daemon in list(self._sockets.items()):
            if key[0] == serial:
                self._stop(key, daemon)

    # -- clients of the abstract socket -------------------------------------------------------------

    async def connect(self, phone, name: str, reader, writer) -> None:
        daemon = self._sockets.get((phone.serial, name))
        if daemon is None or (daemon.launch.kind == "scrcpy" and daemon.accepted):
            writer.write(fail(f"cannot connect to localabstract:{name}: Connection refused"))
            await finish(reader, writer)
            return
        daemon.accepted += 1
        daemon.clients.add(writer)
        writer.write(OKAY)
        client_gone = asyncio.ensure_future(discard_until_eof(reader))
        try:
            if daemon.launch.kind == "minicap":
                await self._minicap_frames(daemon, writer, client_gone)
            else:
                await self._scrcpy_video(daemon, writer, client_gone)
        except (ConnectionError, OSError):
            pass
        finally:
            daemon.clients.discard(writer)
            client_gone.cancel()
            if daemon.launch.kind == "scrcpy":  # scrcpy's server exits when its video socket closes
                self._stop((phone.serial, name), daemon)
            writer.close()

    async def _changes_of(self, daemon, client_gone):
        """Yield each new display state (the first at once); ends when the client or daemon does."""
        phone, sent = daemon.phone, None
        while not client_gone.done() and not daemon.stopped.is_set():
            event = self._change_event(phone.serial)
            state = display_state(phone)
            if state != sent:
                sent = state
                yield state
                continue
            waiter = asyncio.ensure_future(event.wait())
            try:
                await asyncio.wait({waiter, client_gone}, timeout=POLL_SECONDS,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()

    async def _minicap_frames(self, daemon, writer, client_gone) -> None:
        encoder = ScreenEncoder.for_phone(daemon.phone)
        display = encoder.display_size()
        virtual = daemon.launch.virtual_size
        writer.write(MINICAP_HEADER.pack(1, MINICAP_HEADER.size, daemon.pid, *display, *virtual, 0, 0))
        size = fit_into(display, virtual)
        async for _ in self._changes_of(daemon, client_gone):
            if encoder.display_size() != display:
                return  # rotated or resized: the client restarts minicap with a new projection
            _, jpeg = await self._run_blocking(encoder.jpeg, size, daemon.launch.quality)
            writer.write(FRAME_LENGTH.pack(len(jpeg)) + jpeg)
            await writer.drain()  # the next frame is the newest screen once this one is taken

    async def _scrcpy_video(self, daemon, writer, client_gone) -> None:
        phone = daemon.phone
        encoder = ScreenEncoder.for_phone(phone)
        display = encoder.display_size()
        size = scaled_size(display, daemon.launch.max_size, 8)
        name = phone.profile["model"].encode()[:63]
        writer.write(b"\x00" + name.ljust(64, b"\x00") + struct.pack(">III", CODEC_H264, *size))
        video = H264Encoder(size)
        started, config_sent = time.monotonic(), False
        try:
            async for _ in self._changes_of(daemon, client_gone):
                if encoder.display_size() != display:
                    return
                pts = int((time.monotonic() - started) * 1_000_000)
                units = await self._run_blocking(_encode_screen, encoder, video, size, pts)
                for data, key_frame in units:
                    if not config_sent:  # MediaCodec hands the SPS/PPS over first, as a config packet
                        nals = split_annexb(data)
                        config = b"".join(unit for kind, unit in nals if kind in (7, 8))
                        data = b"".join(unit for kind, unit in nals if kind not in (7, 8))
                        writer.write(SCRCPY_PACKET.pack(SCRCPY_CONFIG_FLAG, len(config)) + config)
                        config_sent = True
                    flags = pts | (SCRCPY_KEY_FLAG if key_frame else 0)
                    writer.write(SCRCPY_PACKET.pack(flags, len(data)) + data)
                await writer.drain()
        finally:
            video.close()


def _encode_screen(encoder: ScreenEncoder, video: H264Encoder, size, pts: int):
    _, image = encoder.image(size)
    return video.encode(image, pts)
