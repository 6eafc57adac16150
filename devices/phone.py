"""One phone reached over ADB: the only way product code talks to a phone (virtual or real)."""
import re
from dataclasses import dataclass
from functools import cached_property

import adbutils


class PhoneUnavailable(Exception):
    """The phone or its ADB server does not answer (unplugged, offline, server down)."""


def adb_client(address: str, timeout: float = 10) -> adbutils.AdbClient:
    host, _, port = address.rpartition(":")
    return adbutils.AdbClient(host=host or "127.0.0.1", port=int(port), socket_timeout=timeout)


@dataclass
class PhoneConnection:
    address: str  # host:port of the ADB server
    serial: str

    @classmethod
    def for_device(cls, device):
        return cls(address=device.adb_server, serial=device.serial)

    @cached_property
    def adb(self) -> adbutils.AdbDevice:
        return adb_client(self.address).device(serial=self.serial)

    def shell(self, command: str, timeout: float = 20) -> str:
        try:
            return self.adb.shell(command, timeout=timeout)
        except (adbutils.AdbError, OSError) as error:
            raise PhoneUnavailable(f"{self.serial}@{self.address}: {error}") from error

    def shell_result(self, command: str, timeout: float = 20):
        """(exit code, output) for commands whose success matters."""
        try:
            result = self.adb.shell2(command, timeout=timeout)
        except (adbutils.AdbError, OSError) as error:
            raise PhoneUnavailable(f"{self.serial}@{self.address}: {error}") from error
        return result.returncode, result.output

    def screencap_png(self) -> bytes:
        try:
            with self.adb.open_transport() as conn:  # exec: is binary clean, shell: may not be
                conn.send_command("exec:screencap -p")
                conn.check_okay()
                return conn.read_until_close(encoding=None)
        except (adbutils.AdbError, OSError) as error:
            raise PhoneUnavailable(f"{self.serial}@{self.address}: {error}") from error

    def dump_hierarchy(self) -> str:
        try:
            return self.adb.dump_hierarchy()
        except (adbutils.AdbError, OSError) as error:
            raise PhoneUnavailable(f"{self.serial}@{self.address}: {error}") from error

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
