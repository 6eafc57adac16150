"""One phone reached over ADB: the only way product code talks to a phone (virtual or real)."""
import re
import time
from dataclasses import dataclass, field
from functools import cached_property

import adbutils

# Commands that only read: sending one leaves a recent UI dump valid. Anything else (input, am,
# monkey, pm clear, settings put, sleep, unknown commands) may change the screen and retires it.
READ_ONLY_COMMANDS = ("echo", "true", "getprop", "wm size", "wm density", "dumpsys", "pm list", "pm path",
                      "settings get", "cat ", "ls", "screencap", "content query", "uiautomator dump /dev/tty")


class PhoneUnavailable(Exception):
    """The phone or its ADB server does not answer (unplugged, offline, server down)."""


def adb_client(address: str, timeout: float = 10) -> adbutils.AdbClient:
    host, _, port = address.rpartition(":")
    return adbutils.AdbClient(host=host or "127.0.0.1", port=int(port), socket_timeout=timeout)


@dataclass
class PhoneConnection:
    address: str  # host:port of the ADB server
    serial: str
    _server_version: int | None = field(default=None, repr=False, compare=False)
    # The last UI dump and when it was read (monotonic), until a command that may change the screen.
    _last_dump: tuple[str, float] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def for_device(cls, device):
        return cls(address=device.adb_server, serial=device.serial)

    @cached_property
    def adb(self) -> adbutils.AdbDevice:
        return adb_client(self.address).device(serial=self.serial)

    def shell(self, command: str, timeout: float = 20) -> str:
        self._forget_dump_unless_read_only(command)
        try:
            return self.adb.shell(command, timeout=timeout)
        except (adbutils.AdbError, OSError) as error:
            raise PhoneUnavailable(f"{self.serial}@{self.address}: {error}") from error

    def shell_result(self, command: str, timeout: float = 20):
        """(exit code, output) for commands whose success matters."""
        self._forget_dump_unless_read_only(command)
        try:
            result = self.adb.shell2(command, timeout=timeout)
        except (adbutils.AdbError, OSError) as error:
            raise PhoneUnavailable(f"{self.serial}@{self.address}: {error}") from error
        return result.returncode, result.output

    def exec_out(self, command: str) -> bytes:
        """Binary-clean output of `exec:COMMAND` (what `adb exec-out` does).

        Talks to the ADB server through adbutils' client but skips its fixed waits (a
        `host:version` round trip before every command and a 10 ms sleep on close): about 20 of
        the 22 ms a capture otherwise takes, which matters when screens are polled many times a
        second. The answer is read in large chunks and joined once.
        """
        self._forget_dump_unless_read_only(command)
        try:
            client = self.adb._client
            if self._server_version is None:
                self._server_version = client.server_version()
            connection = client.make_connection()
            try:
                if self._server_version >= 41:
                    connection.send_command(f"host:tport:serial:{self.serial}")
                    connection.check_okay()
                    connection.read(8)  # the transport id
                else:
                    connection.send_command(f"host:transport:{self.serial}")
                    connection.check_okay()
                connection.send_command(f"exec:{command}")
                connection.check_okay()
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
        try:
            xml = self.adb.dump_hierarchy()
        except (adbutils.AdbError, OSError) as error:
            raise PhoneUnavailable(f"{self.serial}@{self.address}: {error}") from error
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
        if "$(" in command or "`" in command or not all(part.startswith(READ_ONLY_COMMANDS) for part in parts):
            self._last_dump = None

    def window_size(self) -> tuple[int, int]:
        match = re.search(r"(\d+)x(\d+)", self.shell("wm size"))
        if not match:
            raise PhoneUnavailable(f"{self.serial}: cannot read the screen size")
        return int(match.group(1)), int(match.group(2))

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
