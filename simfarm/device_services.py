"""Device services: what a client asks for after it has switched the connection to one phone.

`shell:` (v1: raw output then close), `shell,v2,...:` (packets with stdout, stderr and the exit
code), `exec:` (binary-clean stdout), `abb_exec:`/`abb:` (the `cmd` binder bridge), `sync:`, and
`localabstract:NAME` for the screen-streaming daemons a shell command started (screen_daemons.py).
Everything else gets a FAIL naming the service, so a client never waits on a reply that will not come.
"""
from __future__ import annotations

import asyncio
import re
import shlex
import struct
from collections.abc import Awaitable, Callable

from simfarm.screen_daemons import ScreenDaemons, parse_launch
from simfarm.sync_protocol import serve_sync
from simfarm.types import ShellResult
from simfarm.wire import OKAY, discard_until_eof, fail, finish

# shell protocol v2 packet ids (AOSP shell_protocol.h)
STDOUT_ID, STDERR_ID, EXIT_ID = 1, 2, 3
PACKET_HEADER = struct.Struct("<BI")
# Split big outputs (a PNG) into packets this size, like adbd's buffer does: readers that
# concatenate per packet stay fast and no reader needs one huge allocation.
SHELL_PACKET_PAYLOAD = 64 * 1024

_SHELL_SERVICE = re.compile(r"shell(?:,(?P<options>[^:]*))?:(?P<command>.*)", re.DOTALL)

RunOnPhone = Callable[[object, str], Awaitable[ShellResult]]

_REFUSED_SERVICES = {
    "reboot": "reboot is not supported by the virtual farm (the phone stays up)",
    "remount": "remount is not supported by the virtual farm: /system is read-only",
    "framebuffer": "framebuffer: is not supported by the virtual farm; use `screencap -p`",
    "reverse": "reverse forwarding is not supported by the virtual farm",
    "tcpip": "tcpip: is not supported by the virtual farm (its phones have no network adbd)",
    "usb": "usb: is not supported by the virtual farm",
    "jdwp": "jdwp is not supported by the virtual farm (no Java debugger on virtual phones)",
    "track-jdwp": "track-jdwp is not supported by the virtual farm",
    "track-app": "track-app is not supported by the virtual farm",
    "tcp": "the virtual phones have no sockets to connect to",
    "localabstract": "nothing listens there: start a screen daemon (minicap, scrcpy) first",
    "localreserved": "the virtual phones have no sockets to connect to",
    "localfilesystem": "the virtual phones have no sockets to connect to",
    "local": "the virtual phones have no sockets to connect to",
    "dev": "the virtual phones have no devices to open",
    "sink": "sink: is not supported by the virtual farm",
    "source": "source: is not supported by the virtual farm",
}


def _service_name(service: str) -> str:
    return re.split(r"[:,]", service, maxsplit=1)[0]


async def serve_device_service(service: str, phone, reader: asyncio.StreamReader,
                               writer: asyncio.StreamWriter, run_on_phone: RunOnPhone,
                               daemons: ScreenDaemons | None = None) -> None:
    """Answer one device service on a connection already switched to `phone`."""
    shell = _SHELL_SERVICE.fullmatch(service)
    if shell:
        options = (shell.group("options") or "").split(",")
        launch = parse_launch(phone, shell.group("command")) if daemons is not None else None
        if launch is not None:
            await daemons.run(launch, phone, reader, writer, "v2" in options, shell_v2_packets)
        else:
            await _shell(shell.group("command"), "v2" in options, phone, reader, writer, run_on_phone)
    elif service.startswith("localabstract:") and daemons is not None:
        await daemons.connect(phone, service[len("localabstract:"):], reader, writer)
    elif service.startswith("exec:"):
        await _exec(service[len("exec:"):], phone, reader, writer, run_on_phone)
    elif service.startswith(("abb_exec:", "abb:")):
        name, _, packed_args = service.partition(":")
        command = "cmd " + " ".join(shlex.quote(arg) for arg in packed_args.split("\0") if arg)
        if name == "abb_exec":
            await _exec(command, phone, reader, writer, run_on_phone)
        else:
            await _shell(command, True, phone, reader, writer, run_on_phone)
    elif service == "sync:":
        writer.write(OKAY)
        await serve_sync(reader, writer, phone.fs)
        await finish(reader, writer)
    elif service in ("root:", "unroot:"):
        # adbd's own answer on a user build: OKAY, a line of text, then close.
        message = ("adbd cannot run as root in production builds\n" if service == "root:"
                   else "adbd not running as root\n")
        writer.write(OKAY + message.encode())
        await finish(reader, writer)
    elif _service_name(service) in _REFUSED_SERVICES:
        writer.write(fail(_REFUSED_SERVICES[_service_name(service)]))
        await finish(reader, writer)
    else:
        writer.write(fail(f"unknown device service {service[:200]!r} (the virtual farm serves "
                          "shell:, shell,v2:, exec:, abb_exec:, sync:)"))
        await finish(reader, writer)


async def _shell(command: str, use_protocol_v2: bool, phone, reader, writer,
                 run_on_phone: RunOnPhone) -> None:
    if not command.strip():
        writer.write(fail("interactive shell is not supported by the virtual farm: "
                          "pass a command, e.g. `adb shell ls`"))
        await finish(reader, writer)
        return
    writer.write(OKAY)
    await writer.drain()
    # Keep reading while the command runs: stdin and close-stdin packets must not pile up
    # unread, and an EOF tells us the client left.
    client_input = asyncio.ensure_future(discard_until_eof(reader))
    try:
        result = await run_on_phone(phone, command)
    except BaseException:
        client_input.cancel()
        raise
    if use_protocol_v2:
        writer.write(_shell_v2_packets(result))
    else:
        # v1 has one stream and no exit code: both outputs together, as a terminal shows them
        writer.write(result.terminal_output)
    await finish(reader, writer, client_input)


async def _exec(command: str, phone, reader, writer, run_on_phone: RunOnPhone) -> None:
    writer.write(OKAY)
    await writer.drain()
    client_input = asyncio.ensure_future(discard_until_eof(reader))
    try:
        result = await run_on_phone(phone, command)
    except BaseException:
        client_input.cancel()
        raise
    writer.write(result.stdout)  # exec: is binary clean: stdout only, untouched
    await finish(reader, writer, client_input)


def _shell_v2_packets(result: ShellResult) -> bytes:
    return shell_v2_packets(result.stdout, result.stderr, result.exit_code)


def shell_v2_packets(stdout: bytes, stderr: bytes, exit_code: int | None) -> bytes:
    """Shell protocol v2 packets for this output; the exit packet only when `exit_code` is known."""
    packets = []
    for packet_id, payload in ((STDOUT_ID, stdout), (STDERR_ID, stderr)):
        view = memoryview(payload)
        for offset in range(0, len(view), SHELL_PACKET_PAYLOAD):
            chunk = view[offset:offset + SHELL_PACKET_PAYLOAD]
            packets.append(PACKET_HEADER.pack(packet_id, len(chunk)))
            packets.append(chunk)
    if exit_code is not None:
        packets.append(PACKET_HEADER.pack(EXIT_ID, 1) + bytes([exit_code & 0xFF]))
    return b"".join(packets)
