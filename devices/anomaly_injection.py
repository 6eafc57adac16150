"""Anomaly injection during collection (report §2.3.7): system interruptions (a push notification,
a low-battery alert, a pre-set permission dialog) and network trouble (disconnection, latency),
so trajectories capture how a model recovers.

Each kind is injected with ordinary ADB commands where Android has one (`cmd notification post`,
`dumpsys battery`, `svc wifi/data`, `cmd connectivity airplane-mode`). Kinds Android cannot produce
from a shell (a permission dialog out of the blue, a slow network without root, an ad) use the
virtual farm's broadcast `am broadcast -a com.sim.ANOMALY --es kind K`; a real phone ignores that
broadcast (no receiver answers it: injection fails there and nothing is recorded; on the farm the
record says `"via": "farm"`); WHERE_IT_WORKS says it per kind
(the launch form shows it). Handoff states that cannot be injected on real phones (login expiry,
CAPTCHA, payment verification...) are not offered: the hand-back channel gathers them where they
occur (flywheel/collection/handback.py).
"""
from __future__ import annotations

import random
from datetime import UTC, datetime

from devices.phone import PhoneUnavailable
from devices.uitree import all_nodes, parse_hierarchy

FARM_ANOMALY = "com.sim.ANOMALY"
LOW_BATTERY_LEVEL = 12
NOTIFICATION_TITLES = [("New message", "Are we still on for tonight?"), ("Delivery update", "Your parcel is out for delivery"),
                       ("Calendar", "Team sync starts in 10 minutes"), ("Weather alert", "Heavy rain expected after 5 pm")]
PERMISSIONS = {"location": "android.permission.ACCESS_FINE_LOCATION", "camera": "android.permission.CAMERA",
               "microphone": "android.permission.RECORD_AUDIO", "contacts": "android.permission.READ_CONTACTS",
               "notifications": "android.permission.POST_NOTIFICATIONS"}

# kind -> what it looks like to the model (for the record and the docs)
KINDS = {
    "notification": "a heads-up push notification over the current screen",
    "low_battery": "the 'Battery may run out soon' alert",
    "permission_dialog": "an 'Allow APP to ...?' runtime permission dialog for the foreground app",
    "network_off": "Wi-Fi and mobile data off: apps show 'Network unavailable, please retry'",
    "airplane_mode": "airplane mode on: no network at all",
    "slow_network": "the page keeps 'Loading…' for a while",
    "ad_popup": "a full-screen ad in the foreground app",
    "storage_full": "the 'Storage space running out' alert",
    "app_crash": "'APP keeps stopping' for the foreground app",
    "app_not_responding": "'APP isn't responding' for the foreground app",
    "update_prompt": "a 'New version available' prompt in the foreground app",
}
NEEDS_APP = ("permission_dialog", "app_crash", "app_not_responding", "ad_popup", "update_prompt", "slow_network")


class AnomalyError(Exception):
    pass


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def anomaly_command(kind: str, rng: random.Random, package: str | None = None) -> tuple[str, str]:
    """(shell command line, via) for one kind. Pure, so the choice of command is testable."""
    if kind == "notification":
        title, text = rng.choice(NOTIFICATION_TITLES)
        tag = f"flywheel{rng.randrange(10_000)}"
        return f"cmd notification post -t {_quote(title)} {tag} {_quote(text)}", "adb"
    if kind == "low_battery":
        # The alert fires when the level falls through 15% unplugged, so pass through 20% first.
        return (f"dumpsys battery unplug; dumpsys battery set level 20; "
                f"dumpsys battery set level {LOW_BATTERY_LEVEL}"), "adb"
    if kind == "network_off":
        return "svc wifi disable; svc data disable", "adb"
    if kind == "airplane_mode":
        return "cmd connectivity airplane-mode enable", "adb"
    if kind == "storage_full":
        return "am broadcast -a android.intent.action.DEVICE_STORAGE_LOW", "adb"
    if kind == "permission_dialog":
        permission = rng.choice(sorted(PERMISSIONS))
        # Revoking is the real half (the app must ask again); the dialog itself is the farm's.
        return (f"pm revoke {package} {PERMISSIONS[permission]}; am broadcast -a {FARM_ANOMALY} "
                f"--es kind permission_dialog --es package {package} --es permission {permission}"), "farm"
    if kind in KINDS:
        target = f" --es package {package}" if package else ""
        return f"am broadcast -a {FARM_ANOMALY} --es kind {kind}{target}", "farm"
    raise AnomalyError(f"unknown anomaly kind {kind!r}; known: {', '.join(KINDS)}")


ANY_PHONE, FARM_ONLY = "any phone", "virtual farm only"


def where_it_works(kind: str) -> str:
    """Any phone when the kind is injected with ordinary ADB commands alone; else the farm only."""
    _, via = anomaly_command(kind, random.Random(0), "com.example.app")
    return ANY_PHONE if via == "adb" else FARM_ONLY


def broadcast_answered(output: str) -> bool:
    """`am broadcast` prints the result code a receiver set: RESULT_OK (-1) from the farm's receiver;
    0 when no receiver took it (a real phone), so a farm-only kind is never recorded as shown there."""
    return "Broadcast completed: result=-1" in output


def inject_anomaly(phone, kind: str, rng: random.Random | None = None, package: str | None = None) -> dict:
    """Inject one anomaly now; returns {"kind", "command", "at", "via", "package"} for the step."""
    rng = rng or random.Random()
    if kind in NEEDS_APP and package is None:
        package = phone.foreground().get("package") or None
        if package is None or "launcher" in package:
            raise AnomalyError(f"{kind} needs an app in the foreground")
    command, via = anomaly_command(kind, rng, package)
    code, output = phone.shell_result(command)
    if code != 0 or "Error" in output or "Exception" in output:
        raise AnomalyError(f"injecting {kind} failed ({code}): {output.strip()[-300:]}")
    if via == "farm" and not broadcast_answered(output):
        raise AnomalyError(f"{kind} shows only on the virtual farm: nothing on this phone answered its broadcast")
    return {"kind": kind, "command": command, "at": datetime.now(UTC).isoformat(), "via": via,
            "package": package}


def maybe_inject(phone, rates: dict[str, float], rng: random.Random) -> dict | None:
    """At most one anomaly per step, each kind with its probability (seeded, so reproducible).
    Returns the record, or None when nothing was injected (or the chosen kind could not be)."""
    for kind in sorted(rates):
        probability = rates[kind]
        if kind not in KINDS:
            raise AnomalyError(f"unknown anomaly kind {kind!r}; known: {', '.join(KINDS)}")
        if rng.random() < probability:
            try:
                return inject_anomaly(phone, kind, rng)
            except AnomalyError:
                return None  # e.g. an in-app kind while the launcher is in front
    return None


CLEAR_COMMANDS = [
    "svc wifi enable", "svc data enable", "cmd connectivity airplane-mode disable", "dumpsys battery reset",
    f"am broadcast -a {FARM_ANOMALY} --es kind clear",  # the farm's overlays; ignored by real phones
]
SYSTEM_UI = "com.android.systemui"
DIALOG_BUTTONS = ("android:id/button1", "android:id/button2")
MAX_BACKS = 3


def system_dialog_shown(phone) -> bool:
    """A SystemUI alert (low battery, storage) is up: such a window stays until it is answered."""
    return any(node.package == SYSTEM_UI and node.resource_id in DIALOG_BUTTONS
               for node in all_nodes(parse_hierarchy(phone.dump_hierarchy())))


def clear_anomalies(phone) -> list[str]:
    """Network back on, battery back to real, injected overlays gone. Returns what failed.
    A battery or storage alert outlives its cause on a real phone: Back closes it, as a person would."""
    failed = []
    for command in CLEAR_COMMANDS:
        try:
            code, output = phone.shell_result(command)
        except PhoneUnavailable as error:
            failed.append(f"{command}: {error}")
            continue
        if code != 0:
            failed.append(f"{command}: {output.strip()[-200:]}")
    try:
        for _ in range(MAX_BACKS):
            if not system_dialog_shown(phone):
                break
            phone.shell("input keyevent KEYCODE_BACK")
    except PhoneUnavailable as error:
        failed.append(f"closing a system alert: {error}")
    return failed


WHERE_IT_WORKS = {kind: where_it_works(kind) for kind in KINDS}
