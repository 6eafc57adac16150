"""Phone state: apps, pm clear / force-stop, settings, content providers, dumpsys, determinism."""
import re

import pytest

from simfarm.farm import Farm
from tests.simfarm.phone_fixtures import focus, new_phone, sh, tap, texts

# The regexes adbutils' app_current() uses (adbutils/shell.py).
FOCUSED_RE = re.compile(r"mCurrentFocus=Window{.*\s+(?P<package>[^\s]+)/(?P<activity>[^\s]+)\}")
RESUMED_RE = re.compile(r"mResumedActivity: ActivityRecord\{.*?\s+(?P<package>[^\s]+)/(?P<activity>[^\s]+)\s.*?\}")
TOP_RE = re.compile(r"ACTIVITY (?P<package>[^\s]+)/(?P<activity>[^/\s]+) \w+ pid=(?P<pid>\d+)")


@pytest.fixture
def phone():
    return new_phone()


def test_farm_phones_are_distinct_and_deterministic():
    farm = Farm(devices=5, seed=3)
    serials = list(farm.phones)
    assert serials == ["sim-0001", "sim-0002", "sim-0003", "sim-0004", "sim-0005"]
    phones = list(farm.phones.values())
    assert [p.transport_id for p in phones] == [1, 2, 3, 4, 5]
    assert {"shell_v2", "cmd", "stat_v2"} <= set(phones[0].features)
    assert phones[0].model == "Pixel_7" and phones[2].model == "SM-A546B"
    assert sh(phones[4], "wm size") == "Physical size: 720x1600\n"
    assert all("com.android.settings" in p.engine.apps for p in phones)
    assert set(phones[0].engine.apps) == set(farm.apps)  # sim-0001 has every app
    again = Farm(devices=5, seed=3)
    assert [sorted(p.engine.apps) for p in again.phones.values()] == [sorted(p.engine.apps) for p in phones]


def test_same_seed_and_commands_give_identical_bytes():
    commands = ["monkey -p com.android.settings 1", "input tap 540 700", "input swipe 540 1800 540 900 300",
                "screencap -p", "uiautomator dump /dev/tty"]
    outputs = []
    for _ in range(2):
        phone = Farm(devices=1, seed=11).phones["sim-0001"]
        outputs.append([phone.run(c).stdout for c in commands])
    assert outputs[0] == outputs[1]
    other = Farm(devices=2, seed=11).phones["sim-0002"]
    assert [other.run(c).stdout for c in commands][3] != outputs[0][3]  # another phone looks different


def test_app_current_formats(phone):
    sh(phone, "am start -n com.android.settings/.Settings")
    windows = sh(phone, "dumpsys window windows")
    match = FOCUSED_RE.search(windows)
    assert match.group("package") == "com.android.settings"
    assert match.group("activity") == "com.android.settings.Settings"
    assert "mFocusedApp=ActivityRecord{" in windows and "u0 com.android.settings/.Settings t" in windows
    activities = sh(phone, "dumpsys activity activities")
    assert RESUMED_RE.search(activities).group("package") == "com.android.settings"
    assert "ResumedActivity: ActivityRecord{" in activities
    top = TOP_RE.search(sh(phone, "dumpsys activity top"))
    assert top.group("package") == "com.android.settings" and int(top.group("pid")) > 0


def test_am_start_variants(phone):
    assert "Status: ok" in sh(phone, "am start -W -n com.android.settings/.WifiSettingsActivity")
    assert focus(phone)[1][1] == ".WifiSettingsActivity"
    sh(phone, "am start -a android.settings.BLUETOOTH_SETTINGS")
    assert focus(phone)[1][1] == ".BluetoothSettingsActivity"
    result = phone.run("am start -n com.nope/.Main")
    assert result.exit_code != 0 and b"does not exist" in result.stderr
    assert phone.run("monkey -p com.nope -c android.intent.category.LAUNCHER 1").exit_code == 252


def test_force_stop_resets_page_stack_but_keeps_data(phone):
    sh(phone, "monkey -p com.android.settings 1")
    tap(phone, text="Bluetooth")
    tap(phone, resource_id="com.android.settings:id/bluetooth_switch")
    tap(phone, text="Pair new device")
    tap(phone, text="JBL Flip 5")
    sh(phone, "am force-stop com.android.settings")
    assert focus(phone)[0] == "com.google.android.apps.nexuslauncher"
    sh(phone, "monkey -p com.android.settings 1")
    assert focus(phone)[1][1] == ".Settings"
    assert "JBL Flip 5" in sh(phone, "content query --uri content://com.android.settings/paired_devices")


def test_pm_clear_resets_app_data(phone):
    sh(phone, "monkey -p com.sim.translator 1")
    tap(phone, resource_id="com.sim.translator:id/input_text")
    sh(phone, "input text bonjour")
    tap(phone, text="Translate")
    assert "bonjour" in sh(phone, "content query --uri content://com.sim.translator/history")
    assert sh(phone, "pm clear com.sim.translator") == "Success\n"
    assert sh(phone, "content query --uri content://com.sim.translator/history") == "No result found.\n"
    assert focus(phone)[0] != "com.sim.translator"
    assert phone.run("pm clear com.nope").exit_code == 1


def test_content_query_projection_where_and_insert(phone):
    rows = sh(phone, "content query --uri content://com.sim.translator/packs --projection language:status "
                     "--where \"status='available' AND language LIKE 'Ja%'\"")
    assert rows == "Row: 0 language=Japanese, status=available\n"
    sh(phone, "content update --uri content://com.sim.translator/packs --bind status:s:downloaded --where \"code='ja'\"")
    assert sh(phone, "content query --uri content://com.sim.translator/packs/3 --projection status") == "Row: 0 status=downloaded\n"
    settings_rows = sh(phone, "content query --uri content://settings/global --where \"name='wifi_on'\"")
    assert re.fullmatch(r"Row: 0 _id=\d+, name=wifi_on, value=1\n", settings_rows)
    result = phone.run("content query --uri content://com.nope/x")
    assert result.exit_code != 0 and b"Unknown URI" in result.stderr


def test_offline_pack_download_changes_provider_state(phone):
    sh(phone, "monkey -p com.sim.translator 1")
    tap(phone, content_desc="Offline packs")
    tap(phone, resource_id="com.sim.translator:id/download_button")
    assert "English pack downloaded" in phone.engine.toast_text
    assert sh(phone, "content query --uri content://com.sim.translator/packs --where \"language='English'\" "
                     "--projection status") == "Row: 0 status=downloaded\n"


def test_settings_toggles_are_real_settings(phone):
    sh(phone, "am start -a android.settings.DISPLAY_SETTINGS")
    tap(phone, text="Dark theme")
    assert sh(phone, "settings get secure ui_night_mode") == "2\n"
    sh(phone, "settings put global wifi_on 0")
    sh(phone, "input keyevent BACK")
    assert "Off" in texts(phone)  # the WLAN row's summary follows the setting
    sh(phone, "svc wifi enable")
    assert sh(phone, "settings get global wifi_on") == "1\n"


def test_irreversible_reset_needs_confirmation(phone):
    sh(phone, "settings put global bluetooth_on 1")
    sh(phone, "am start -n com.android.settings/.ResetDashboardActivity")
    tap(phone, text="Reset Wi-Fi, mobile & Bluetooth")
    assert "You can't undo this action" in " ".join(texts(phone))
    tap(phone, text="Cancel")
    assert sh(phone, "settings get global bluetooth_on") == "1\n"
    tap(phone, text="Reset Wi-Fi, mobile & Bluetooth")
    tap(phone, text="Reset settings")
    assert sh(phone, "settings get global bluetooth_on") == "0\n"
    assert "network_reset_count=1" in sh(phone, "content query --uri content://com.android.settings/state")


def test_battery_packages_and_props(phone):
    battery = sh(phone, "dumpsys battery")
    assert re.search(r"^  level: \d+$", battery, re.M) and "USB powered: true" in battery
    sh(phone, "dumpsys battery set level 42")
    assert "level: 42" in sh(phone, "dumpsys battery")
    package = sh(phone, "dumpsys package com.sim.translator")
    assert "versionName=6.2.0" in package and "versionCode=620" in package
    assert sh(phone, "pm path com.sim.translator").startswith("package:/data/app/")
    assert "package:com.android.settings" not in sh(phone, "pm list packages -3")
    assert "orientation=0" in sh(phone, "dumpsys display")


def test_clock_moves_with_inputs_and_shows_in_status_bar(phone):
    start = phone.now()
    sh(phone, "input keyevent HOME")
    assert phone.now() == start + 1
    sh(phone, "sleep 120")
    assert sh(phone, "date +%H:%M") == "09:02\n"


def test_determinism_holds_across_processes_with_different_hash_seeds(own_processes):
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import hashlib\n"
        "from simfarm.farm import Farm\n"
        "p = Farm(devices=3, seed=5).phones['sim-0003']\n"
        "out = b''\n"
        "for c in ['monkey -p com.android.settings 1', 'input tap 540 900', 'screencap -p', 'uiautomator dump /dev/tty',\n"
        "          'dumpsys package com.android.settings', 'dumpsys window windows', 'pm list packages -f',\n"
        "          'am broadcast -a com.sim.ANOMALY --es kind low_battery', 'screencap -p']:\n"
        "    out += p.run(c).stdout\n"
        "print(hashlib.sha256(out).hexdigest())\n")
    root = Path(__file__).resolve().parents[2]
    digests = set()
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=str(root))
        digests.add(subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True,
                                   text=True, check=True).stdout.strip())
    assert len(digests) == 1


def test_factory_reset_over_the_shell_restores_the_first_state():
    fresh = new_phone()
    first = fresh.run("screencap -p").stdout
    phone = new_phone()
    sh(phone, "settings put global wifi_on 0; echo x > /sdcard/Download/x.txt; monkey -p com.android.settings 1")
    sh(phone, "am broadcast -a com.sim.ANOMALY --es kind low_battery")
    sh(phone, "am broadcast -a com.sim.FACTORY_RESET")
    assert sh(phone, "settings get global wifi_on") == "1\n"
    assert phone.run("ls /sdcard/Download/x.txt").exit_code == 1
    assert phone.run("screencap -p").stdout == first
    sh(phone, "am broadcast -a com.sim.RESET")  # the lighter reset: stop apps, clear anomalies, Home
    assert focus(phone)[0] == "com.google.android.apps.nexuslauncher"


def test_translator_offline_needs_the_target_pack(phone):
    sh(phone, "monkey -p com.sim.translator 1")
    sh(phone, "svc wifi disable; svc data disable")
    tap(phone, resource_id="com.sim.translator:id/input_text")
    sh(phone, "input text hello")
    tap(phone, text="Translate")
    assert "No internet connection" in phone.engine.toast_text
    assert sh(phone, "content query --uri content://com.sim.translator/history") == "No result found.\n"
    sh(phone, "svc wifi enable")
    tap(phone, content_desc="Offline packs")
    tap(phone, resource_id="com.sim.translator:id/download_button", index=1)  # Chinese (Simplified)
    sh(phone, "input keyevent BACK; svc wifi disable")
    tap(phone, text="Translate")
    assert "Row: 0 text=hello" in sh(phone, "content query --uri content://com.sim.translator/history")
