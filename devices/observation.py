"""What a phone shows right now: screenshot, UI dump, screen size and the foreground app with its
activity stack (the context every step records, §2.3.7). Pure phone I/O; nothing is stored here."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from devices.phone import PhoneConnection
from devices.uitree import page_text, parse_hierarchy


@dataclass
class Observation:
    png: bytes
    hierarchy_xml: str
    width: int
    height: int
    foreground: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)

    @property
    def screen_text(self) -> str:
        return page_text(parse_hierarchy(self.hierarchy_xml))


def observe(phone: PhoneConnection) -> Observation:
    """Screenshot, UI dump, screen size and foreground app/activity stack, with their timings."""
    started = time.monotonic()
    png = phone.screencap_png()
    shot_ms = _ms(started)
    xml = phone.dump_hierarchy()
    dump_ms = _ms(started) - shot_ms
    width, height = phone.window_size()
    foreground = phone.foreground()
    return Observation(png=png, hierarchy_xml=xml, width=width, height=height, foreground=foreground,
                       timings={"screencap_ms": shot_ms, "dump_ms": dump_ms, "observe_ms": _ms(started)})


def _ms(since: float) -> int:
    return round((time.monotonic() - since) * 1000)
