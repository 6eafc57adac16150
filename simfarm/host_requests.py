"""Parsing the host side of ADB server requests: which phone a request names, and which
requests switch the connection to a phone. Pure functions, so the rules are easy to test."""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

WAIT_FOR = re.compile(r"wait-for-(?P<transport>any|usb|local)-"
                      r"(?P<state>device|recovery|rescue|sideload|bootloader|disconnect|any)")


class HostRequest(NamedTuple):
    prefix: str | None  # host, host-serial, host-transport-id, host-usb, host-local; None: a device service
    serial: str | None
    transport_id: str | None
    command: str


class TransportTarget(NamedTuple):
    kind: str  # serial, id, any, usb, local
    key: str | None
    answer_with_transport_id: bool  # tport: replies OKAY + 8-byte transport id


def split_host_request(request: str, known_serials: Iterable[str]) -> HostRequest:
    if request.startswith("host:"):
        return HostRequest("host", None, None, request[len("host:"):])
    for prefix in ("host-usb:", "host-local:"):
        if request.startswith(prefix):
            return HostRequest(prefix[:-1], None, None, request[len(prefix):])
    if request.startswith("host-serial:"):
        rest = request[len("host-serial:"):]
        # A serial may hold ':' (e.g. 127.0.0.1:5555): prefer the longest known serial.
        for serial in sorted(known_serials, key=len, reverse=True):
            if rest.startswith(serial + ":"):
                return HostRequest("host-serial", serial, None, rest[len(serial) + 1:])
        serial, _, command = rest.partition(":")
        return HostRequest("host-serial", serial, None, command)
    if request.startswith("host-transport-id:"):
        transport_id, _, command = request[len("host-transport-id:"):].partition(":")
        return HostRequest("host-transport-id", None, transport_id, command)
    return HostRequest(None, None, None, request)


def transport_target(command: str) -> TransportTarget | None:
    """The phone a `host:` transport switch asks for, or None when it is not a switch."""
    simple = {"transport-any": "any", "transport-usb": "usb", "transport-local": "local",
              "tport:any": "any", "tport:usb": "usb", "tport:local": "local"}
    if command in simple:
        return TransportTarget(simple[command], None, command.startswith("tport"))
    for prefix, kind, with_id in (("transport:", "serial", False),
                                  ("transport-id:", "id", False),
                                  ("tport:serial:", "serial", True)):
        if command.startswith(prefix):
            return TransportTarget(kind, command[len(prefix):], with_id)
    return None
