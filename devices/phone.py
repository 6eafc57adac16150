"""One phone reached over ADB: the only way product code talks to a phone (virtual or real)."""
import re
import struct
import time
from dataclasses import dataclass, field
from functools import cached_property

import adbutils

SHELL_V2_PACKET = struct.Struct("<BI")  # shell protocol v2: id (1 stdout, 2 stderr, 3 exit), length
_features: dict[tuple[str, str], bool] = {}  # (address, serial) -> speaks shell protocol v2

# Commands that only read: sending one leaves a recent UI dump valid. Anything else (input, am,
# monkey, pm clear, settings put, sleep, unknown commands) may change the screen and retires it.
WINDOW_SIZE_TTL_S = 30.0
READ_ONLY_COMMANDS = ("echo", "true", "getprop", "wm size", "wm density", "dumpsys", "pm list", "pm path",
                      "settings get", "cat ", "ls", "screencap", "content query", "uiautomator dump /dev/tty",
                      "service call SurfaceFlinger 1013")


class PhoneUnavailable(Exception):
    """The phone or its ADB server does not answer (unplugged, offline, server down)."""


def adb_endpoint(address: str) -> tuple[str, int]:
    """(host, port) this process connects to for the phone host the console calls `address`.

    On one machine the two are the same; on a central server a phone host's ADB server is reached
    through a route (`ADB_SERVERS=name=127.0.0.1:port`, an SSH tunnel), since an ADB server never
    listens beyond its own host."""
    from django.conf import settings

    host, _, port = settings.ADB_ROUTES.get(address, address).rpartition(":")
    return host or "127.0.0.1", int(port)


def adb_client(address: str, timeout: float = 10) -> adbutils.AdbClient:
    host, port = adb_endpoint(address)
    return adbutils.AdbClient(host=host, port=port, socket_timeout=timeout)


UI_DUMP = "/data/local/tmp/uidump.xml"  # where adbutils (and uiautomator's own default users) write it


def ui_dump_from_output(code: int, output: str) -> str | None:
    """The XML of `uiautomator dump F && cat F`: what follows uiautomator's "dumped to" line, or None
    when the dump failed (an ERROR line, a non-zero exit, no XML)."""
    start = output.find("<?xml")
    if code != 0 or start < 0 or "ERROR" in output[:start]:
        return None
    return output[start:]


@dataclass
class PhoneConnection:
    address: str  # host:port of the ADB server
    serial: str
    _server_version: int | None = field(default=None, repr=False, compare=False)
    # The last UI dump and when it was read (monotonic), until a command that may change the screen.
    _last_dump: tuple[str, float] | None = field(default=None, repr=False, compare=False)
    # The screen size and when it was read (monotonic): window_size().
    _window_size: tuple[tuple[int, int], float] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def for_device(cls, device):
        return cls(address=device.adb_server, serial=device.serial)

    @cached_property
    def adb(self) -> adbutils.AdbDevice:
        return adb_client(self.address).device(serial=self.serial)

    def shell(self, command: str, timeout: float = 20) -> str:
        if self._speaks_shell_v2():
            return self.shell_result(command, timeout)[1].rstrip()
        self._forget_dump_unless_read_only(command)
        try:
            return self.adb.shell(command, timeout=timeout)
        except (adbutils.AdbError, OSError) as error:
            raise PhoneUnavailable(f"{self.serial}@{self.address}: {error}") from error

    def shell_result(self, command: str, timeout: float = 20):
        """(exit code, output) for commands whose success matters. Over shell protocol v2 (the
        exit code comes in its own packet) when the phone speaks it, as every Android 7+ does."""
        self._forget_dump_unless_read_only(command)
        try:
            if self._speaks_shell_v2():
                return self._shell_v2(command, timeout)
            result = self.adb.shell2(command, timeout=timeout)
        except (adbutils.AdbError, OSError) as error:
            self._server_version = None
            raise PhoneUnavailable(f"{self.serial}@{self.address}: {error}") from error
        return result.returncode, result.output

    def _speaks_shell_v2(self) -> bool:
        key = (self.address, self.serial)
        if key not in _features:
            try:
                _features[key] = "shell_v2" in self.adb.get_features().split(",")
            except (adbutils.AdbError, OSError) as error:
                raise PhoneUnavailable(f"{self.serial}@{self.address}: {error}") from error
        return _features[key]

    def _shell_v2(self, command: str, timeout: float) -> tuple[int, str]:
        connection = self._open_service(f"shell,v2,raw:{command}", timeout)
        output, code = [], None
        try:
            buffer = b""
            while code is None:
                chunk = connection.conn.recv(1 << 20)
                if not chunk:
                    break
                buffer += chunk
                while len(buffer) >= SHELL_V2_PACKET.size:
                    kind, length = SHELL_V2_PACKET.unpack_from(buffer)
                    if len(buffer) < SHELL_V2_PACKET.size + length:
                        break
                    payload = buffer[SHELL_V2_PACKET.size:SHELL_V2_PACKET.size + length]
                    buffer = buffer[SHELL_V2_PACKET.size + length:]
                    if kind in (1, 2):
                        output.append(payload)
                    elif kind == 3:
                        code = payload[0] if payload else 0
        finally:
            connection.conn.close()
        if code is None:
            raise PhoneUnavailable(f"{self.serial}@{self.address}: the shell ended without an exit code")
        return code, b"".join(output).decode("utf-8", "replace")

    def _open_service(self, service: str, timeout: float | None = None):
        """A connection to `service` on this phone, skipping adbutils' fixed waits (a
        `host:version` round trip before every command and a 10 ms sleep on close): about 20 of
        the 22 ms a short command otherwise takes."""
        client = self.adb._client
        if self._server_version is None:
            self._server_version = client.server_version()
        connection = client.make_connection()
        try:
            if timeout is not None:
                connection.conn.settimeout(timeout)
            if self._server_version >= 41:
                connection.send_command(f"host:tport:serial:{self.serial}")
                connection.check_okay()
                connection.read(8)  # the transport id
            else:
                connection.send_command(f"host:transport:{self.serial}")
                connection.check_okay()
            connection.send_command(service)
            connection.check_okay()
        except BaseException:
            connection.conn.close()
            raise
        return connection

    def exec_out(self, command: str) -> bytes:
        """Binary-clean output of `exec:COMMAND` (what `adb exec-out` does), read in large chunks
        and joined once (screens are polled many times a second)."""
        self._forget_dump_unless_read_only(command)
        try:
            connection = self._open_service(f"exec:{command}")
            try:
                chunks = []
                while chunk := connection.conn.recv(1 << 20):
                    chunks.append(chunk)
            finally:
                connection.conn.close()
        except (adbutils.AdbError, OSError) as error:
            self._server_version = None
            raise PhoneUnavailable(f"{self.serial}@{self.address}: {error}") from error
        return b"".join(chunks)

    def screencap_png(self) -> bytes:
        png = self.exec_out("screencap -p")
        if not png.startswith(b"\x89PNG"):
            raise PhoneUnavailable(f"{self.serial}: screencap gave no PNG: {png[:100]!r}")
        return png

    def dump_hierarchy(self) -> str:
        """`uiautomator dump` read back in the same shell (one connection; adbutils' own dump opens
        three, each with a version round trip and a 10 ms sleep on close: most of an explorer's time)."""
        if not self._speaks_shell_v2():
            try:
                xml = self.adb.dump_hierarchy()
            except (adbutils.AdbError, OSError) as error:
                raise PhoneUnavailable(f"{self.serial}@{self.address}: {error}") from error
        else:
            code, output = self.shell_result(f"rm -f {UI_DUMP}; uiautomator dump {UI_DUMP} && cat {UI_DUMP}")
            xml = ui_dump_from_output(code, output)
            if xml is None:
                raise PhoneUnavailable(f"{self.serial}@{self.address}: uiautomator dump failed: "
                                       f"{output.strip()[:200]}")
        self._last_dump = (xml, time.monotonic())
        return xml

    def recent_dump(self, max_age_s: float) -> str | None:
        """The UI dump read through this connection less than `max_age_s` ago, if no command that
        may change the screen was sent since; else None."""
        if self._last_dump is None:
            return None
        xml, read_at = self._last_dump
        return xml if time.monotonic() - read_at < max_age_s else None

    def _forget_dump_unless_read_only(self, command: str) -> None:
        parts = [part.strip() for part in re.split(r"[;&|\n]+", command) if part.strip()]
        if any(part.startswith("wm ") and part not in ("wm size", "wm density") for part in parts):
            self._window_size = None   # `wm size 720x1600`, `wm size reset`
        if "$(" in command or "`" in command or not all(part.startswith(READ_ONLY_COMMANDS) for part in parts):
            self._last_dump = None

    def window_size(self) -> tuple[int, int]:
        """The screen size, read through this connection at most once per WINDOW_SIZE_TTL_S (every
        observation asks, and an ADB round trip to a real phone costs tens of milliseconds); a `wm`
        command sent through it that is not a plain read forgets it."""
        cached = self._window_size
        if cached is not None and time.monotonic() - cached[1] < WINDOW_SIZE_TTL_S:
            return cached[0]
        match = re.search(r"(\d+)x(\d+)", self.shell("wm size"))
        if not match:
            raise PhoneUnavailable(f"{self.serial}: cannot read the screen size")
        size = int(match.group(1)), int(match.group(2))
        self._window_size = (size, time.monotonic())
        return size

    def foreground(self) -> dict:
        """The foreground package and activity, and the activity stack (§2.3.7 context)."""
        text = self.shell("dumpsys activity activities")
        resumed = re.search(r"(?:mResumedActivity|ResumedActivity):.*?\s([\w.]+)/([\w.$]+)", text)
        stack = re.findall(r"ActivityRecord\{\S+ u\d+ ([\w.]+/[\w.$]+)", text)
        return {
            "package": resumed.group(1) if resumed else "",
            "activity": resumed.group(2) if resumed else "",
            "activity_stack": list(dict.fromkeys(stack)),
        }
