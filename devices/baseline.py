"""A phone's baseline: the global settings tasks touch, recorded once and restored on every reset
(DESIGN.md: a task starts from the phone's recorded baseline, never from what the last task left).

The settings are data, here and nowhere else. Reading them is one shell command built from this
list alone; restoring writes each differing value with `settings put`, the value shell-quoted (it
came from the phone). Radios go through the commands Android has for them, so a real phone's
radios follow, not only the setting.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass

NAMESPACES = ("global", "system", "secure")


@dataclass(frozen=True)
class BaselineSetting:
    namespace: str
    key: str
    # value -> fixed command, for settings whose change Android applies through a service
    commands: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        return f"{self.namespace}:{self.key}"


def _switch(on: str, off: str) -> tuple[tuple[str, str], ...]:
    return (("1", on), ("0", off))


BASELINE_SETTINGS = (
    BaselineSetting("global", "airplane_mode_on", _switch("cmd connectivity airplane-mode enable",
                                                          "cmd connectivity airplane-mode disable")),
    BaselineSetting("global", "wifi_on", _switch("svc wifi enable", "svc wifi disable")),
    BaselineSetting("global", "mobile_data", _switch("svc data enable", "svc data disable")),
    BaselineSetting("global", "bluetooth_on", _switch("svc bluetooth enable", "svc bluetooth disable")),
    BaselineSetting("global", "data_roaming"),
    BaselineSetting("global", "hotspot_on"),
    BaselineSetting("global", "nfc_on"),
    BaselineSetting("global", "zen_mode"),                # Do Not Disturb
    BaselineSetting("global", "low_power"),               # Battery Saver
    BaselineSetting("global", "auto_time"),
    BaselineSetting("global", "auto_time_zone"),          # with it on, the time zone follows the network
    BaselineSetting("global", "stay_on_while_plugged_in"),
    BaselineSetting("global", "animator_duration_scale"),
    BaselineSetting("system", "screen_brightness"),
    BaselineSetting("system", "screen_brightness_mode"),
    BaselineSetting("system", "screen_off_timeout"),
    BaselineSetting("system", "font_scale"),
    BaselineSetting("system", "system_locales"),          # the phone's language
    BaselineSetting("system", "time_12_24"),
    BaselineSetting("system", "accelerometer_rotation"),
    BaselineSetting("secure", "ui_night_mode"),           # dark theme
    BaselineSetting("secure", "location_mode"),
    # What Settings tasks change and System A reads (issue #36): a task never starts from another's.
    BaselineSetting("global", "preferred_network_mode"),
    BaselineSetting("system", "status_bar_show_battery_percent"),
    BaselineSetting("system", "ringtone"),
    BaselineSetting("secure", "night_display_activated"),   # Eye comfort / Night Light
    BaselineSetting("secure", "backup_enabled"),
    BaselineSetting("secure", "accessibility_enabled"),
    BaselineSetting("secure", "enabled_accessibility_services"),   # TalkBack and the like
)
_BY_NAME = {setting.name: setting for setting in BASELINE_SETTINGS}
MISSING = "null"  # what `settings get` prints for a key that is not set


END = "baseline-end"   # a last line, so a setting whose value is empty keeps its own (output is stripped)


def read_command() -> str:
    """One shell line that prints each baseline setting on its own line (built from constants)."""
    return "; ".join([*(f"settings get {s.namespace} {s.key}" for s in BASELINE_SETTINGS), f"echo {END}"])


def read_baseline(phone) -> dict[str, str]:
    """{"namespace:key": value} of the phone right now ("null" for a key that is not set)."""
    lines = phone.shell(read_command()).splitlines()
    if END not in lines:
        raise ValueError("the phone's answer ended early")
    lines = lines[:lines.index(END)]
    if len(lines) < len(BASELINE_SETTINGS):
        raise ValueError(f"the phone answered {len(lines)} of {len(BASELINE_SETTINGS)} settings")
    return {s.name: line.strip() for s, line in zip(BASELINE_SETTINGS, lines)}


def restore_command(name: str, value: str) -> str:
    """The one command that sets a baseline setting back to `value`."""
    setting = _BY_NAME.get(name)
    if setting is None:
        raise ValueError(f"{name!r} is not a baseline setting")
    fixed = dict(setting.commands).get(value)
    if fixed:
        return fixed
    if value == MISSING:
        return f"settings delete {setting.namespace} {setting.key}"
    return f"settings put {setting.namespace} {setting.key} {shlex.quote(value)}"


def restore_baseline(phone, baseline: dict[str, str]) -> tuple[list[str], list[str]]:
    """Put back every baseline setting that differs now. Returns (commands run, errors)."""
    current = read_baseline(phone)
    commands, errors = [], []
    for name, value in baseline.items():
        if name not in _BY_NAME or not isinstance(value, str) or current.get(name) == value:
            continue  # a setting dropped from the list since it was recorded is left alone
        command = restore_command(name, value)
        commands.append(command)
        code, output = phone.shell_result(command)
        if code != 0 or "Error" in output or "Exception" in output:
            errors.append(f"{command}: {output.strip()[-200:] or f'exit {code}'}")
    return commands, errors
