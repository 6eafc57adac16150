"""The Settings app's state where a real phone's shell reads it: settings keys, properties, files.

The Settings app (apps/settings.yaml) keeps its choices in its own data (`pm clear
com.android.settings` resets them, as the farm's task resets rely on). A real phone has no
`content://com.android.settings/...` provider to read them by: the shell sees them in the system
settings tables, system properties and `dumpsys` (dumpsys_system.py). This module links the two,
so both always tell the same story:

- `settings get/put` of a linked key reads / changes the Settings app's data (SettingsStore.links):
  system `status_bar_show_battery_percent` (Battery percentage), `ringtone` (a media URI whose
  `title=` is the ringtone); secure `night_display_activated` (Eye comfort), `backup_enabled`,
  `enabled_accessibility_services` and `accessibility_enabled` (TalkBack); global
  `preferred_network_mode` (RIL network-mode codes), `ble_scan_always_enabled` (Bluetooth scanning).
- `getprop persist.sys.timezone` is the time zone's Olson ID (`setprop` changes it too).
- An app's `files:` (FORMAT.md) lie on shared storage from boot and come back with `pm clear`:
  the junk Storage → Free up space deletes.
"""
from __future__ import annotations

import hashlib
from urllib.parse import parse_qs, quote, urlsplit

SETTINGS_APP = "com.android.settings"
TALKBACK = "com.google.android.marvin.talkback/com.google.android.marvin.talkback.TalkBackService"
# Preferred network type → RILConstants network mode, as AOSP's EnabledNetworkModePreferenceController
# writes them for a GSM/UMTS carrier: NR_LTE_GSM_WCDMA, LTE_GSM_WCDMA, WCDMA_PREF, GSM_ONLY.
NETWORK_MODES = {"5G (recommended)": "26", "LTE": "9", "3G": "0", "2G": "1"}
TIME_ZONES = {
    "GMT+00:00 Coordinated Universal Time": "Etc/UTC",
    "GMT+01:00 Central European Standard Time": "Europe/Berlin",
    "GMT+08:00 China Standard Time": "Asia/Shanghai",
    "GMT+09:00 Japan Standard Time": "Asia/Tokyo",
    "GMT-05:00 Eastern Standard Time": "America/New_York",
    "GMT-08:00 Pacific Standard Time": "America/Los_Angeles",
}
RINGTONE_IDS = {"Lollipop": 30, "Copycat": 21, "Crackle": 22, "Flutterby": 24, "Hey hey": 25, "Spaceship": 28}
BROWSERS = {"Chrome": "com.android.chrome", "Firefox": "org.mozilla.firefox"}   # "None": no holder


def settings_state(phone) -> dict:
    """The Settings app's data (its defaults until something changes them)."""
    return phone.app_state(SETTINGS_APP)


# -- linked settings keys --------------------------------------------------------------------------

def _switch():
    return (lambda on, stored: "1" if on else "0",
            lambda value, on: value.strip() not in ("", "0", "false", "null"))


def _network_mode():
    names = {code: name for name, code in NETWORK_MODES.items()}
    return (lambda name, stored: NETWORK_MODES.get(name, stored),
            lambda value, name: names.get(value.strip()))


def ringtone_uri(title: str) -> str:
    number = RINGTONE_IDS.get(title) or 100 + int(hashlib.sha256(title.encode()).hexdigest()[:4], 16) % 900
    return f"content://media/internal/audio/media/{number}?title={quote(title)}&canonical=1"


def _ringtone_title(value: str, current):
    parts = urlsplit(value.strip())
    titles = parse_qs(parts.query).get("title")
    if titles:
        return titles[0]
    number = parts.path.rsplit("/", 1)[-1]
    return next((title for title, n in RINGTONE_IDS.items() if str(n) == number), None)


def _accessibility_services(talkback, stored):
    others = [name for name in (stored or "").split(":") if name and name != TALKBACK]
    return ":".join(others + ([TALKBACK] if talkback else []))


LINKS = {  # (namespace, key) -> (Settings app variable, state -> setting, setting -> state or None)
    ("system", "status_bar_show_battery_percent"): ("show_battery_percent", *_switch()),
    ("secure", "night_display_activated"): ("night_light", *_switch()),
    ("secure", "backup_enabled"): ("backup_on", *_switch()),
    ("global", "ble_scan_always_enabled"): ("bluetooth_scanning", *_switch()),
    ("global", "preferred_network_mode"): ("preferred_network", *_network_mode()),
    ("system", "ringtone"): ("ringtone", lambda title, stored: ringtone_uri(str(title)), _ringtone_title),
    ("secure", "enabled_accessibility_services"): (
        "talkback", _accessibility_services, lambda value, on: TALKBACK in value.split(":")),
    ("secure", "accessibility_enabled"): (   # turning accessibility off stops TalkBack; on alone starts nothing
        "talkback", lambda on, stored: "1" if on else (stored or "0"), lambda value, on: False if value.strip() == "0" else None),
}


def link_settings(phone) -> None:
    """Make the LINKS keys of `phone.settings` views of the Settings app's data."""
    for (namespace, key), (variable, to_setting, to_state) in LINKS.items():
        phone.settings.links[(namespace, key)] = (_reader(phone, variable, to_setting),
                                                  _writer(phone, variable, to_state))


def _reader(phone, variable, to_setting):
    def read(stored):
        state = settings_state(phone)
        return to_setting(state[variable], stored) if variable in state else stored
    return read


def _writer(phone, variable, to_state):
    def write(value):
        state = settings_state(phone)
        new = to_state(value, state.get(variable))
        if variable in state and new is not None:
            state[variable] = new
    return write


# -- properties --------------------------------------------------------------------------------------

def time_zone_id(title: str) -> str:
    return TIME_ZONES.get(title, title)


def derived_props(phone) -> dict:
    """System properties that follow the Settings app's data."""
    zone = settings_state(phone).get("time_zone")
    return {"persist.sys.timezone": time_zone_id(zone)} if zone else {}


def set_prop(phone, key: str, value: str) -> bool:
    """`setprop` of a property derived_props() gives: change the Settings app's data (False: not one)."""
    if key != "persist.sys.timezone":
        return False
    titles = {zone_id: title for title, zone_id in TIME_ZONES.items()}
    settings_state(phone)["time_zone"] = titles.get(value, value)
    phone.engine.changed()
    return True


# -- shared-storage files that come with an app's data ----------------------------------------------

def seed_files(phone, packages=None) -> None:
    """Write the `files:` of these installed apps (all when None) onto shared storage."""
    for package in packages if packages is not None else list(phone.engine.apps):
        spec = phone.engine.apps.get(package)
        for entry in (spec.files if spec else None) or []:
            phone.fs.write(entry["path"], str(entry.get("text", "")).encode())
