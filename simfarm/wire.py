"""Byte-level pieces of the ADB smart-socket protocol shared by the server's modules.

A request is 4 hex digits of length followed by that many bytes. A reply starts with `OKAY`, or
with `FAIL` followed by a length-prefixed message; host queries that return text send it as a
length-prefixed block after `OKAY`.
"""
from __future__ import annotations

import asyncio
import string

OKAY = b"OKAY"
FAIL = b"FAIL"
_HEX_DIGITS = set(string.hexdigits.encode())

# How long to wait for the client to close its end after we have sent everything. Closing first
# while the client still has unread bytes in flight to us makes the kernel send RST, which can
# destroy our last bytes (the shell exit code) before the client reads them.
LINGER_SECONDS = 2.0


class ProtocolError(Exception):
    """The client sent something that is not a valid request; the message goes back in a FAIL."""


def length_block(payload: bytes | str) -> bytes:
    """A payload with its 4-hex-digit length in front, as host queries return text."""
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    if len(payload) > 0xFFFF:
        raise ValueError("a length block holds at most 65535 bytes")
    return b"%04x" % len(payload) + payload


def okay_block(payload: bytes | str) -> bytes:
    return OKAY + length_block(payload)


def fail(message: str) -> bytes:
    return FAIL + length_block(message.encode("utf-8")[:0xFFFF])


async def read_request(reader: asyncio.StreamReader) -> str:
    """Read one smart-socket request. Raises ProtocolError on a malformed length prefix and
    asyncio.IncompleteReadError when the client goes away mid-request."""
    prefix = await reader.readexactly(4)
    if not all(byte in _HEX_DIGITS for byte in prefix):
        raise ProtocolError(f"malformed request: length prefix {prefix!r} is not 4 hex digits")
    length = int(prefix, 16)
    if length == 0:
        raise ProtocolError("malformed request: empty request")
    body = await reader.readexactly(length)
    return body.decode("utf-8", errors="replace")


async def discard_until_eof(reader: asyncio.StreamReader) -> None:
    """Read and drop whatever the client sends (shell stdin, close-stdin packets) until it closes."""
    while await reader.read(65536):
        pass


async def finish(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 pending_reader: asyncio.Task | None = None) -> None:
    """Flush what we wrote, half-close, give the client a moment to close its side, then close."""
    try:
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        drain_task = pending_reader or asyncio.ensure_future(discard_until_eof(reader))
        try:
            await asyncio.wait_for(drain_task, LINGER_SECONDS)
        except TimeoutError:
            pass
    except (ConnectionError, asyncio.IncompleteReadError, OSError):
        pass
    finally:
        writer.close()
