"""The virtual farm's ADB server: serves a Farm's phones on a TCP port with the ADB server protocol.

Clients (adbutils 2.x, Debian's `adb` 1.0.41) talk to it exactly as to a real `adb server`:
host queries (`host:version`, `host:devices-l`, `host:track-devices`, `host-serial:S:features`,
...) are answered and the connection closed; a transport switch (`host:transport:S`,
`host:tport:serial:S`, ...) keeps the connection for one device service (see device_services.py).

Non-standard, for tests and anomaly injection: `host:sim-disconnect:<serial>` unplugs a phone
(it disappears from device lists, its open connections drop, trackers are told) and
`host:sim-connect:<serial>` plugs it back.

One asyncio loop serves every connection; phone.run() (CPU-bound rendering) runs in a thread
pool so a slow phone never stalls the others.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import struct
from concurrent.futures import ThreadPoolExecutor

from simfarm.device_services import serve_device_service
from simfarm.host_requests import WAIT_FOR as _WAIT_FOR
from simfarm.host_requests import split_host_request, transport_target
from simfarm.screen_daemons import ScreenDaemons
from simfarm.types import ShellResult
from simfarm.wire import OKAY, ProtocolError, fail, finish, length_block, okay_block, read_request

logger = logging.getLogger(__name__)

ADB_SERVER_VERSION = 41  # what Debian's adb 1.0.41 expects; anything else makes it kill us
TRACK_POLL_SECONDS = 0.5  # trackers also notice phones the farm changes on its own

# Device features this server implements; a phone's features are intersected with these, as the
# real server intersects a device's features with its own.
SUPPORTED_FEATURES = ("shell_v2", "cmd", "stat_v2", "ls_v2", "fixed_push_mkdir", "apex", "abb",
                      "fixed_push_symlink_timestamp", "abb_exec", "remount_shell", "track_app")


class _Refused(Exception):
    """A request we answer with FAIL and this message."""


class AdbServer:
    """Serves `farm.phones` as an ADB server. Use start() inside a running loop, or ServerThread."""

    def __init__(self, farm, host: str = "127.0.0.1", port: int = 0, workers: int | None = None):
        self.farm = farm
        self.host = host
        self.port = port
        phone_count = max(1, len(farm.phones))
        self._executor = ThreadPoolExecutor(max_workers=workers or max(8, 2 * phone_count),
                                            thread_name_prefix="phone")
        self._unplugged: set[str] = set()
        self._device_connections: dict[str, set[asyncio.StreamWriter]] = {}
        self._trackers: set[asyncio.Event] = set()
        self.daemons = ScreenDaemons(self._run_blocking)
        self._handlers: set[asyncio.Task] = set()
        self._server: asyncio.base_events.Server | None = None
        self._stopped: asyncio.Event | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> int:
        """Start listening; returns the bound port (useful with port=0)."""
        self._stopped = asyncio.Event()
        self._server = await asyncio.start_server(self._handle_client, self.host, self.port,
                                                  reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        logger.info("virtual farm ADB server on %s:%d with %d phones", self.host, self.port,
                    len(self.farm.phones))
        return self.port

    async def wait_stopped(self) -> None:
        """Wait for stop(), then end the connections still open so the loop can close cleanly."""
        await self._stopped.wait()
        handlers = [task for task in self._handlers if not task.done()]
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)

    def stop(self) -> None:
        """Stop accepting and end the server (from inside the loop)."""
        if self._server is not None:
            self._server.close()
        for writers in self._device_connections.values():
            for writer in list(writers):
                writer.transport.abort()
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._stopped is not None:
            self._stopped.set()

    # -- phones as clients see them ------------------------------------------------------------

    def visible_phones(self) -> list:
        """Phones that are plugged in, in the farm's (serial) order."""
        return [phone for phone in list(self.farm.phones.values())
                if phone.serial not in self._unplugged]

    def device_features(self, phone) -> list[str]:
        features = getattr(phone, "features", None) or SUPPORTED_FEATURES
        return [feature for feature in features if feature in SUPPORTED_FEATURES]

    def device_list(self, long_format: bool) -> str:
        lines = []
        for phone in self.visible_phones():
            if long_format:
                # Same layout as adb's append_transport(): padded serial, state, tags, id last.
                lines.append(f"{phone.serial:<22} {phone.state} product:{phone.product} "
                             f"model:{phone.model} device:{phone.device_name} "
                             f"transport_id:{phone.transport_id}\n")
            else:
                lines.append(f"{phone.serial}\t{phone.state}\n")
        return "".join(lines)

    def set_plugged_in(self, serial: str, plugged_in: bool) -> None:
        if serial not in self.farm.phones:
            raise _Refused(f"device '{serial}' not found")
        if plugged_in:
            self._unplugged.discard(serial)
        else:
            self._unplugged.add(serial)
            self.daemons.stop_all(serial)
            for writer in list(self._device_connections.get(serial, ())):
                writer.transport.abort()  # an unplugged phone drops its open streams
        for tracker in self._trackers:
            tracker.set()

    async def run_on_phone(self, phone, command: str) -> ShellResult:
        try:
            return await self._run_blocking(phone.run, command)
        except ConnectionAbortedError:
            raise
        except Exception as error:  # a phone bug must not leave the client waiting blind
            logger.exception("phone %s failed on %r", phone.serial, command)
            message = f"virtual phone error running {command!r}: {error}\n"
            return ShellResult(b"", message.encode(), 1)
        finally:
            self.daemons.poke(phone.serial)  # streams look at the screen again at once

    async def _run_blocking(self, function, *args):
        """Phone work (commands, rendering, encoding) on the phones' pool, off the loop."""
        try:
            pending = asyncio.get_running_loop().run_in_executor(self._executor, function, *args)
        except RuntimeError as error:  # the executor is shut down: the server is stopping
            raise ConnectionAbortedError(str(error)) from error
        return await pending

    # -- connections ---------------------------------------------------------------------------

    async def _handle_client(self, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await self._serve_connection(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass  # the client went away; that ends only its own connection
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("internal error serving a client")
            try:
                writer.write(fail("internal error in the virtual farm's ADB server"))
            except Exception:
                pass
        finally:
            writer.close()

    async def _serve_connection(self, reader, writer) -> None:
        try:
            request = await read_request(reader)
            logger.debug("request %r", request)
            target = await self._host_request(request, reader, writer)
            if target is None:
                await finish(reader, writer)  # a host query: answered, now close (adb expects it)
                return
            phone, service = target
            if service is None:
                service = await read_request(reader)
            logger.debug("device service on %s: %r", phone.serial, service)
        except (ProtocolError, _Refused) as refusal:
            writer.write(fail(str(refusal)))
            await finish(reader, writer)
            return
        connections = self._device_connections.setdefault(phone.serial, set())
        connections.add(writer)
        try:
            await serve_device_service(service, phone, reader, writer, self.run_on_phone, self.daemons)
        finally:
            connections.discard(writer)

    async def _host_request(self, request: str, reader, writer):
        """Answer a host request. Returns (phone, service or None) when the connection now
        belongs to a phone, None when the request was a query that has been answered."""
        prefix, serial, transport_id, command = split_host_request(request, list(self.farm.phones))
        if prefix is None:
            # A device service sent with no transport chosen goes to the only phone, as in adb.
            return self._checked_for_service(self._pick_transport("any")), request
        if prefix == "host":
            answer = await self._host_command(command, reader, writer)
        elif _WAIT_FOR.fullmatch(command) and prefix == "host-serial":
            answer = await self._wait_for(command, reader, writer, serial)  # may not exist yet
        else:
            phone = self._find_phone(serial, transport_id, prefix)
            answer = await self._device_query(phone, command, reader, writer)
        if isinstance(answer, _Switched):
            return answer.phone, None
        if answer is not None:
            writer.write(answer)
        return None

    def _find_phone(self, serial, transport_id, prefix):
        if prefix == "host-serial":
            return self._pick_transport("serial", serial)
        if prefix == "host-transport-id":
            return self._pick_transport("id", transport_id)
        return self._pick_transport(prefix.removeprefix("host-"))

    def _pick_transport(self, kind: str, key: str | None = None):
        """Find the phone a request names; raise _Refused with adb's wording when there is none."""
        phones = self.visible_phones()
        if kind == "serial":
            matches = [phone for phone in phones if phone.serial == key]
            if not matches:
                raise _Refused(f"device '{key}' not found")
            return matches[0]
        if kind == "id":
            matches = [phone for phone in phones if str(phone.transport_id) == str(key)]
            if not matches:
                raise _Refused(f"no device with transport id '{key}'")
            return matches[0]
        if kind == "usb":
            raise _Refused("no devices found: the virtual farm's phones are local "
                           "(emulator-like) transports, not USB")
        if not phones:
            raise _Refused("no devices/emulators found")
        if len(phones) > 1:
            raise _Refused("more than one device/emulator")
        return phones[0]

    @staticmethod
    def _checked_for_service(phone):
        if phone.state != "device":
            raise _Refused("device offline" if phone.state == "offline"
                           else f"device '{phone.serial}' is {phone.state}")
        return phone

    def _switch_to(self, phone, writer, with_id: bool) -> _Switched:
        """Acknowledge a transport switch (tport: also sends the transport id, 8 bytes LE)."""
        self._checked_for_service(phone)
        writer.write(OKAY + (struct.pack("<Q", phone.transport_id) if with_id else b""))
        return _Switched(phone)

    async def _device_query(self, phone, command: str, reader, writer):
        """host-serial:/host-transport-id:/host-usb:/host-local: queries about one phone.
        Writes the answer itself; returns _Switched for a transport switch."""
        if command == "get-state":
            writer.write(okay_block(phone.state))
        elif command == "get-serialno":
            writer.write(okay_block(phone.serial))
        elif command == "get-devpath":
            writer.write(okay_block("unknown"))
        elif command == "features":
            writer.write(okay_block(",".join(self.device_features(phone))))
        elif command == "list-forward":
            writer.write(okay_block(""))
        elif command == "killforward-all":
            writer.write(OKAY)
        elif command.startswith("killforward:"):
            writer.write(fail(f"listener '{command[len('killforward:'):]}' not found"))
        elif command.startswith("forward:"):
            writer.write(fail("port forwarding is not supported by the virtual farm "
                              "(its phones have no sockets)"))
        elif _WAIT_FOR.fullmatch(command):
            await self._wait_for(command, reader, writer, serial=None)
        elif command == "transport" or command.startswith("tport"):
            return self._switch_to(phone, writer, with_id=command.startswith("tport"))
        else:
            writer.write(fail(f"unknown host service '{command[:200]}'"))
        return None

    async def _host_command(self, command: str, reader, writer):
        """`host:` queries. Returns the reply bytes, None when already written, or _Switched."""
        if command == "version":
            return okay_block(f"{ADB_SERVER_VERSION:04x}")
        if command in ("devices", "devices-l"):
            return okay_block(self.device_list(long_format=command == "devices-l"))
        if command in ("track-devices", "track-devices-l"):
            await self._track_devices(reader, writer, long_format=command == "track-devices-l")
            return None
        if command == "kill":
            writer.write(OKAY)
            await writer.drain()
            self.stop()
            return None
        if command == "host-features":
            return okay_block(",".join(SUPPORTED_FEATURES))
        if command in ("features", "get-state", "get-serialno", "get-devpath", "list-forward",
                       "killforward-all") or command.startswith(("forward:", "killforward:")):
            if command == "list-forward":
                return okay_block("")  # no forwards on any phone
            if command == "killforward-all":
                return OKAY
            return await self._device_query(self._pick_transport("any"), command, reader, writer)
        if _WAIT_FOR.fullmatch(command):
            await self._wait_for(command, reader, writer, serial=None)
            return None
        transport = transport_target(command)
        if transport is not None:
            kind, key, with_id = transport
            return self._switch_to(self._pick_transport(kind, key), writer, with_id=with_id)
        if command.startswith(("sim-disconnect:", "sim-connect:")):
            action, _, serial = command.partition(":")
            self.set_plugged_in(serial, plugged_in=action == "sim-connect")
            return okay_block(f"{'connected' if action == 'sim-connect' else 'disconnected'} "
                              f"{serial}")
        if command.startswith(("connect:", "disconnect:", "pair:")):
            return fail("the virtual farm has no network transports to connect; use "
                        "host:sim-connect:<serial> / host:sim-disconnect:<serial>")
        return fail(f"unknown host service '{command[:200]}'")

    async def _track_devices(self, reader, writer, long_format: bool) -> None:
        """Stream the device list now and whenever it changes, until the client leaves."""
        writer.write(OKAY)
        changed = asyncio.Event()
        self._trackers.add(changed)
        client_gone = asyncio.ensure_future(reader.read(1))
        last_sent = None
        try:
            while not client_gone.done():
                listing = self.device_list(long_format)
                if listing != last_sent:
                    writer.write(length_block(listing))
                    await writer.drain()
                    last_sent = listing
                changed.clear()
                waiter = asyncio.ensure_future(changed.wait())
                try:
                    await asyncio.wait({waiter, client_gone}, timeout=TRACK_POLL_SECONDS,
                                       return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiter.cancel()
        finally:
            self._trackers.discard(changed)
            client_gone.cancel()

    async def _wait_for(self, command: str, reader, writer, serial: str | None) -> None:
        """wait-for-TRANSPORT-STATE: OKAY now, a second OKAY once the condition holds."""
        wanted = _WAIT_FOR.fullmatch(command)
        writer.write(OKAY)
        await writer.drain()
        client_gone = asyncio.ensure_future(reader.read(1))
        try:
            while not client_gone.done():
                phones = [phone for phone in self.visible_phones()
                          if serial is None or phone.serial == serial]
                if wanted["transport"] == "usb":
                    phones = []  # virtual phones are never USB devices
                if wanted["state"] == "disconnect":
                    ready = not phones
                else:
                    ready = any(wanted["state"] in ("any", phone.state) for phone in phones)
                if ready:
                    writer.write(OKAY)
                    return
                await asyncio.wait({client_gone}, timeout=0.1)
        finally:
            client_gone.cancel()


class _Switched:
    """The connection now belongs to this phone; its next request is a device service."""

    def __init__(self, phone):
        self.phone = phone
