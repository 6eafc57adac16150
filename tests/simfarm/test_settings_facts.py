"""The Settings app's choices where a real phone's shell reads them (simfarm/system_facts.py,
simfarm/dumpsys_system.py): settings keys, `getprop persist.sys.timezone`, `dumpsys wifi |
bluetooth_manager | role | backup` and junk files on shared storage. Each follows the Settings UI,
a `settings put` / `setprop` reaches the UI, and `pm clear com.android.settings` and a factory reset
put them back. The Settings tasks' terminal checks read only these, so the console's own reader
(flywheel.judging.terminal_checks) judges them on a phone in real-phone mode."""
import json
import re
from pathlib import Path

import pytest

from flywheel.judging.terminal_checks import read_and_compare
from flywheel.rules.device_state import private_state
from simfarm.appspec import load_apps
from simfarm.phone import VirtualPhone
from tests.simfarm import taskrunner as tr
from tests.simfarm.phone_fixtures import new_phone, sh

APPS = load_apps()
FUNCTIONS = {node["id"]: node for node in APPS["com.android.settings"].functions}
TASKS = Path(__file__).resolve().parents[2] / "simfarm" / "tasks" / "tasks.jsonl"
RECORDS = {record["key"]: record for record in map(json.loads, TASKS.read_text(encoding="utf-8").splitlines())}
# The tasks whose checks read the Settings app's choices (once through content://com.android.settings).
SETTINGS_TASKS = ["settings-pair-jbl", "settings-connect-office-if-saved", "settings-shanghai-timezone",
                  "settings-battery-correction", "settings-forget-office-l1", "settings-forget-old-buds",
                  "settings-hotspot-for-trip", "settings-eye-comfort-coding", "settings-lte-network",
                  "settings-ringtone-crackle-l1", "settings-talkback-l1", "settings-firefox-default",
                  "settings-storage-junk", "settings-backup-off"]
JUNK = "/sdcard/DCIM/.thumbnails/.thumbdata4--1967290299"
GUARDS = {"low_power"}   # settings-battery-correction: Battery Saver must stay off (it is, before)
TALKBACK = "com.google.android.marvin.talkback/com.google.android.marvin.talkback.TalkBackService"


@pytest.fixture
def phone():
    return new_phone()


def do(phone, function_id):
    """Run a Settings function's known path (apps/settings.yaml `functions`) from a fresh start."""
    sh(phone, "am force-stop com.android.settings")
    tr.follow(phone, [{"action": "open", "app": "com.android.settings"}] + FUNCTIONS[function_id]["path"])


def get(phone, namespace, key):
    return sh(phone, f"settings get {namespace} {key}").strip()


def bonded(phone):
    """Names in `dumpsys bluetooth_manager`'s Bonded devices section (None: no adapter dump)."""
    text = sh(phone, "dumpsys bluetooth_manager")
    section = re.search(r"^  Bonded devices:\n((?:    .+\n)*)", text, re.M)
    if section is None:
        return None
    return [re.fullmatch(r"    (?:[0-9A-F]{2}:){5}[0-9A-F]{2} \[[ A-Z/]{6}\] (.+)", line).group(1)
            for line in section.group(1).splitlines()]


def saved_networks(phone):
    text = sh(phone, "dumpsys wifi")
    section = re.search(r"^WifiConfigManager - Configured networks Begin ----\n(.*?)^WifiConfigManager - "
                        r"Configured networks End", text, re.M | re.S).group(1)
    return re.findall(r'^(?:\* )?ID: \d+ SSID: "([^"]*)"', section, re.M)


def connected_ssid(phone):
    match = re.search(r'^mWifiInfo SSID: (?:"([^"]*)"|<unknown ssid>),', sh(phone, "dumpsys wifi"), re.M)
    return None if match is None else (match.group(1) or "")


# -- settings keys -------------------------------------------------------------------------------------

@pytest.mark.parametrize("function_id, namespace, key, before, after", [
    ("battery/percentage", "system", "status_bar_show_battery_percent", "0", "1"),
    ("display/eye_comfort", "secure", "night_display_activated", "0", "1"),
    ("system/backup", "secure", "backup_enabled", "1", "0"),
    ("mobile/network_type", "global", "preferred_network_mode", "26", "9"),
    ("location/services/bluetooth_scanning", "global", "ble_scan_always_enabled", "1", "0"),
    ("accessibility/talkback", "secure", "accessibility_enabled", "0", "1"),
    ("accessibility/talkback", "secure", "enabled_accessibility_services", "", TALKBACK),
    ("sound/ringtone", "system", "ringtone", "content://media/internal/audio/media/30?title=Lollipop&canonical=1",
     "content://media/internal/audio/media/22?title=Crackle&canonical=1"),
])
def test_settings_keys_follow_the_settings_ui_and_pm_clear(phone, function_id, namespace, key, before, after):
    assert get(phone, namespace, key) == before
    do(phone, function_id)
    assert get(phone, namespace, key) == after
    assert f"{key}={after}\n" in sh(phone, f"settings list {namespace}")
    sh(phone, "am force-stop com.android.settings")
    assert get(phone, namespace, key) == after             # kept: it is the phone's setting
    sh(phone, "pm clear com.android.settings")
    assert get(phone, namespace, key) == before            # the Settings app's data is its source
    do(phone, function_id)
    phone.factory_reset()
    assert get(phone, namespace, key) == before


def test_settings_put_reaches_the_settings_ui(phone):
    sh(phone, "settings put secure night_display_activated 1")
    sh(phone, "settings put system status_bar_show_battery_percent 1")
    sh(phone, "settings put global preferred_network_mode 1")
    sh(phone, "settings put system ringtone 'content://media/internal/audio/media/25?title=Hey%20hey&canonical=1'")
    sh(phone, f"settings put secure enabled_accessibility_services com.example/.Reader:{TALKBACK}")
    state = sh(phone, "content query --uri content://com.android.settings/state")
    for fact in ("night_light=True", "show_battery_percent=True", "preferred_network=2G", "ringtone=Hey hey",
                 "talkback=True"):
        assert fact.lower() in state.lower(), (fact, state)
    assert get(phone, "system", "ringtone") == "content://media/internal/audio/media/25?title=Hey%20hey&canonical=1"
    sh(phone, "am start -n com.android.settings/.TalkBackActivity")
    tr.run_step(phone, {"action": "click", "target": {"text": "Use TalkBack"}}, 0)   # off again in the UI
    assert get(phone, "secure", "enabled_accessibility_services") == "com.example/.Reader"   # others stay
    sh(phone, f"settings put secure enabled_accessibility_services {TALKBACK}")
    sh(phone, "settings put secure accessibility_enabled 0")                  # turning accessibility off stops it
    assert get(phone, "secure", "enabled_accessibility_services") == ""
    sh(phone, "settings put global preferred_network_mode 11")                # a mode the UI does not offer
    assert get(phone, "global", "preferred_network_mode") == "1"


# -- properties ------------------------------------------------------------------------------------------

def test_time_zone_property_follows_the_settings_ui(phone):
    assert sh(phone, "getprop persist.sys.timezone") == "Etc/UTC\n"
    assert "[persist.sys.timezone]: [Etc/UTC]" in sh(phone, "getprop")
    do(phone, "system/date_time/time_zone")
    assert sh(phone, "getprop persist.sys.timezone") == "Asia/Shanghai\n"
    sh(phone, "setprop persist.sys.timezone Asia/Tokyo")
    assert "time_zone=GMT+09:00 Japan Standard Time" in sh(phone, "content query --uri content://com.android.settings/state")
    sh(phone, "pm clear com.android.settings")
    assert sh(phone, "getprop persist.sys.timezone") == "Etc/UTC\n"


# -- dumpsys ------------------------------------------------------------------------------------------------

def test_dumpsys_lists_the_new_services(phone):
    services = sh(phone, "dumpsys -l").split()
    assert {"wifi", "bluetooth_manager", "role", "backup"} <= set(services)


def test_dumpsys_bluetooth_manager_lists_bonded_devices(phone):
    assert bonded(phone) == ["Galaxy Buds2"]              # off, but BLE scanning keeps the adapter up
    assert "  state: BLE_ON\n" in sh(phone, "dumpsys bluetooth_manager")
    do(phone, "bluetooth/pair")
    text = sh(phone, "dumpsys bluetooth_manager")
    assert "  enabled: true\n  state: ON\n" in text
    assert bonded(phone) == ["Galaxy Buds2", "JBL Flip 5"]
    assert "Pixel Buds Pro" not in text                   # seen nearby, never paired
    sh(phone, "settings put global bluetooth_on 0")       # the forget path switches Bluetooth on first
    do(phone, "bluetooth/forget")
    assert bonded(phone) == ["JBL Flip 5"]
    sh(phone, "pm clear com.android.settings")
    assert bonded(phone) == ["Galaxy Buds2"]
    sh(phone, "settings put global bluetooth_on 0")
    sh(phone, "settings put global ble_scan_always_enabled 0")
    text = sh(phone, "dumpsys bluetooth_manager")
    assert bonded(phone) is None and text.rstrip().endswith("Bluetooth Service not connected")
    assert "  state: OFF\n" in text


def test_dumpsys_wifi_shows_the_connection_and_saved_networks(phone):
    assert connected_ssid(phone) == "SimLab-5G"
    assert saved_networks(phone) == ["SimLab-5G", "Office-5G"]
    assert re.search(r'^\* ID: 0 SSID: "SimLab-5G" ', sh(phone, "dumpsys wifi"), re.M)   # * marks the current one
    do(phone, "wlan/connect")
    assert connected_ssid(phone) == "Office-5G"
    do(phone, "wlan/forget")                              # forgets Office-5G, the network in use
    assert saved_networks(phone) == ["SimLab-5G"] and connected_ssid(phone) == ""
    sh(phone, "svc wifi disable")
    text = sh(phone, "dumpsys wifi")
    assert text.startswith("Wi-Fi is disabled\n") and "mWifiInfo" not in text
    assert saved_networks(phone) == ["SimLab-5G"]         # saved networks outlive the radio
    sh(phone, "svc wifi enable")
    sh(phone, "pm clear com.android.settings")
    assert saved_networks(phone) == ["SimLab-5G", "Office-5G"] and connected_ssid(phone) == "SimLab-5G"


def test_dumpsys_wifi_shows_the_hotspot_while_it_is_on(phone):
    assert "SoftApManager" not in sh(phone, "dumpsys wifi")
    do(phone, "connection/hotspot/secure")
    text = sh(phone, "dumpsys wifi")
    assert "\nmApConfig.SoftApConfiguration.SSID: AndroidAP_Trip\n" in text
    assert "\nmApConfig.SoftApConfiguration.securityType: 1\n" in text   # a password was set
    sh(phone, "settings put global hotspot_on 0")
    assert "SoftApManager" not in sh(phone, "dumpsys wifi")


def test_dumpsys_role_and_backup_follow_the_settings_ui(phone):
    def browser():
        return re.search(r"name=android\.app\.role\.BROWSER\n(\s*holders=(\S+)\n)?", sh(phone, "dumpsys role")).group(2)

    assert browser() == "com.android.chrome"
    do(phone, "apps/default_browser")
    assert browser() == "org.mozilla.firefox"
    do(phone, "system/reset/app_preferences")
    assert browser() == "com.android.chrome"
    assert sh(phone, "dumpsys backup").startswith("Backup Manager is enabled / setup complete / not pending init\n")
    do(phone, "system/backup")
    assert sh(phone, "dumpsys backup").startswith("Backup Manager is disabled / setup complete / not pending init\n")
    sh(phone, "pm clear com.android.settings")
    assert sh(phone, "dumpsys backup").startswith("Backup Manager is enabled ")


def test_network_reset_clears_what_the_dumps_show(phone):
    do(phone, "mobile/network_type")
    do(phone, "system/reset/network")
    assert saved_networks(phone) == [] and bonded(phone) == []
    assert get(phone, "global", "preferred_network_mode") == "26"


# -- files -------------------------------------------------------------------------------------------------

def test_free_up_space_deletes_junk_that_pm_clear_and_factory_reset_bring_back(phone):
    assert sh(phone, "ls -a /sdcard/DCIM/.thumbnails").split() == [".", "..", ".thumbdata4--1967290299",
                                                                      "1773562200184.jpg"]
    do(phone, "storage/free_up")
    assert phone.run(f"ls {JUNK}").exit_code != 0
    assert sh(phone, "ls -a /sdcard/DCIM/.thumbnails").split() == [".", ".."]
    sh(phone, "pm clear com.android.settings")
    assert sh(phone, f"test -e {JUNK} && echo exists || echo missing") == "exists\n"
    do(phone, "storage/free_up")
    phone.factory_reset()
    assert phone.run(f"ls {JUNK}").exit_code == 0


# -- the tasks, judged as the console judges them, on a phone in real-phone mode -----------------------

class Console:
    """What flywheel.judging.terminal_checks asks of devices.phone.PhoneConnection for these checks."""

    def __init__(self, phone):
        self.phone = phone

    def shell_result(self, command, timeout=20):
        result = self.phone.run(command)
        return result.exit_code, (result.stdout + result.stderr).decode("utf-8", "replace")


def test_no_task_reads_the_settings_apps_private_provider():
    for record in RECORDS.values():
        for check in record["verification"]["terminal"]:
            assert not check.get("uri", "").startswith("content://com.android.settings"), record["key"]


@pytest.mark.parametrize("key", SETTINGS_TASKS)
def test_the_console_judges_the_settings_task_on_a_real_phone(key):
    record = RECORDS[key]
    phone = VirtualPhone(0, 0, APPS, real_phone=True)
    tr.reset_phone(phone, record["reset"], record["apps"])
    checks = record["verification"]["terminal"]
    for check in checks:
        assert private_state(check) == ""
    for check in checks:                                  # each one fails before the known path...
        if check.get("key") not in GUARDS:                # ...but a guard on what must stay as it is
            assert read_and_compare(Console(phone), check)[0] is False, check
    tr.follow(phone, record["known_path"]["steps"])
    for check in checks:
        passed, detail = read_and_compare(Console(phone), check)
        assert passed, (check, detail)
    assert phone.farm_only_count == 0, phone.farm_only_calls
