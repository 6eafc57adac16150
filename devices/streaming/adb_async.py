"""Long-lived ADB connections on the event loop, for screen streams.

A stream (minicap's frames, scrcpy's video socket, the shell that keeps their daemon alive) is
one ADB connection that stays open for as long as someone watches. Reading it with asyncio keeps
the web process from parking a thread per phone and lets frames be relayed as soon as they land.
Short commands keep going through adbutils (devices/phone.py).
"""
import asyncio

from devices.phone import adb_endpoint

CONNECT_TIMEOUT = 5.0


class AdbStreamError(Exception):
    """The ADB server refused the service or went away."""


async def _expect_okay(reader: asyncio.StreamReader, what: str) -> None:
    status = await reader.readexactly(4)
    if status == b"OKAY":
        return
    if status == b"FAIL":
        length = int(await reader.readexactly(4), 16)
        message = (await reader.readexactly(length)).decode("utf-8", "replace")
        raise AdbStreamError(f"{what}: {message}")
    raise AdbStreamError(f"{what}: unexpected answer {status!r}")


def _request(text: str) -> bytes:
    data = text.encode()
    return b"%04x" % len(data) + data


async def open_service(address: str, serial: str, service: str,
                       timeout: float = CONNECT_TIMEOUT) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to `service` (e.g. `localabstract:minicap`, `shell:...`) on phone `serial`
    of the ADB server at `address` (host:port). AdbStreamError when refused or unreachable."""
    host, port = adb_endpoint(address)
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, limit=1 << 20), timeout)
    except (OSError, TimeoutError) as error:
        raise AdbStreamError(f"ADB server {address}: {error or 'timed out'}") from error
    try:
        writer.write(_request(f"host:transport:{serial}"))
        await asyncio.wait_for(_expect_okay(reader, f"{serial}@{address}"), timeout)
        writer.write(_request(service))
        await asyncio.wait_for(_expect_okay(reader, f"{service[:60]} on {serial}"), timeout)
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as error:
        writer.close()
        raise AdbStreamError(f"{service[:60]} on {serial}@{address}: {error or 'timed out'}") from error
    except AdbStreamError:
        writer.close()
        raise
    return reader, writer


def close_quietly(writer: asyncio.StreamWriter | None) -> None:
    if writer is not None:
        try:
            writer.close()
        except (OSError, RuntimeError):
            pass
