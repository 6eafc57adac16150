"""Has the screen changed? SurfaceFlinger's page-flip counter answers for the price of one command.

`service call SurfaceFlinger 1013` returns the display's page-flip count, which moves whenever
anything is drawn (UI test frameworks use it to wait for idle). The safety audit must judge each
input on the screen as it is just before it; a UI dump costs tens of milliseconds on the virtual
farm and seconds on some real phones. So the last dump of each phone is kept with the counter read
just before it, and handed out again while the counter has not moved: the screen is the one that
dump describes. A phone whose counter cannot be read (no such transaction, no permission) gets a
fresh dump every time, as before. A screen that keeps redrawing (a blinking cursor) moves the
counter too: then it is a fresh dump, which is the safe side.

The cache is per process and per phone (address, serial): the console's live-control input and a
collection worker each keep their own.
"""
import re
import threading
import time

from devices.phone import PhoneConnection, PhoneUnavailable

PAGE_FLIPS_COMMAND = "service call SurfaceFlinger 1013"
MAX_DUMP_AGE_S = 60.0  # a kept dump is not trusted longer than this, counter or not
_PARCEL = re.compile(r"Result: Parcel\(([0-9a-fA-F]{8})\b")
_lock = threading.Lock()
_dumps: dict[tuple[str, str], tuple[int, str, float]] = {}   # (flips before the dump, xml, monotonic time)
_unsupported: set[tuple[str, str]] = set()
stats = {"reused": 0, "dumped": 0}  # in this process, for benchmarks and the stats message


def parse_page_flips(output: str) -> int | None:
    match = _PARCEL.search(output or "")
    if match is None:
        return None
    value = int(match.group(1), 16)
    return None if value >= 0x80000000 else value  # a negative status (unknown transaction, denied)


def page_flips(phone: PhoneConnection) -> int | None:
    """The phone's page-flip count now, or None when it cannot tell."""
    key = (phone.address, phone.serial)
    if key in _unsupported:
        return None
    try:
        value = parse_page_flips(phone.exec_out(PAGE_FLIPS_COMMAND).decode("utf-8", "replace"))
    except PhoneUnavailable:
        return None
    if value is None:
        _unsupported.add(key)  # this phone does not say; stop asking
    return value


def current_dump(phone: PhoneConnection) -> str:
    """The UI hierarchy as it is now: the kept dump while the display has not flipped since, else a
    new one (kept for next time)."""
    key = (phone.address, phone.serial)
    flips = page_flips(phone)
    with _lock:
        kept = _dumps.get(key)
    if flips is not None and kept is not None and kept[0] == flips and time.monotonic() - kept[2] < MAX_DUMP_AGE_S:
        stats["reused"] += 1
        return kept[1]
    stats["dumped"] += 1
    xml = phone.dump_hierarchy()
    if flips is not None:  # the counter read BEFORE the dump: a change during it shows up next time
        with _lock:
            _dumps[key] = (flips, xml, time.monotonic())
    return xml


def forget(phone: PhoneConnection) -> None:
    with _lock:
        _dumps.pop((phone.address, phone.serial), None)
