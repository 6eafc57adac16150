"""Reset spec, step context and anomaly injection on the farm, all over ordinary ADB."""
import random

import pytest

from devices.anomaly_injection import (
    ANY_PHONE,
    KINDS,
    WHERE_IT_WORKS,
    AnomalyError,
    anomaly_command,
    clear_anomalies,
    inject_anomaly,
    maybe_inject,
)
from devices.reset import ResetError, reset_phone, step_context, validate_spec
from tests.devices.conftest import find, texts


def note_count(phone):
    return phone.shell("content query --uri content://com.sim.notes/notes").count("Row:")


def test_step_context_names_package_activity_and_stack(phone):
    phone.shell("monkey -p com.sim.notes -c android.intent.category.LAUNCHER 1")
    phone.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    context = step_context(phone)
    assert context["package"] == "com.android.settings" and context["activity"] == ".Settings"
    assert context["activity_stack"][0] == "com.android.settings/.Settings"
    assert "com.sim.notes/.NotesListActivity" in context["activity_stack"]


def test_reset_force_stops_clears_and_goes_home(phone):
    before = note_count(phone)
    phone.shell("am start -n com.sim.notes/.EditorActivity")
    phone.shell("input tap 540 363; input text Temporary")
    phone.shell(f"input tap 540 {find(phone, text='Save').center[1]}")
    assert note_count(phone) == before + 1

    record = reset_phone(phone, apps=["com.sim.notes"])

    assert record["ok"] and record["commands"] == [
        "am force-stop com.sim.notes", "pm clear com.sim.notes", "input keyevent KEYCODE_HOME"]
    assert note_count(phone) == before
    assert "launcher" in step_context(phone)["package"]
    assert "com.sim.notes" not in "".join(step_context(phone)["activity_stack"])


def test_a_permission_dialog_an_earlier_task_left_is_answered_before_the_next_task(phone):
    """A dialog of another app than the task's stays above Home (as on Android); the reset closes it."""
    phone.shell("am start -n com.sim.translator/.MainActivity")
    phone.shell("am broadcast -a com.sim.ANOMALY --es kind permission_dialog --es package com.sim.translator")
    phone.shell("input keyevent KEYCODE_HOME")
    assert 'package="com.android.permissioncontroller"' in phone.dump_hierarchy()  # still up after Home

    record = reset_phone(phone, apps=["com.sim.notes"])

    assert record["ok"] and "input keyevent KEYCODE_BACK" in record["commands"]
    assert "permissioncontroller" not in phone.dump_hierarchy() and "launcher" in step_context(phone)["package"]
    phone.shell("am force-stop com.sim.translator")


def test_reset_spec_options_and_errors(phone):
    phone.shell("monkey -p com.sim.shop -c android.intent.category.LAUNCHER 1; svc wifi disable; svc data disable")
    record = reset_phone(phone, {"force_stop": "all", "home": False, "clear_anomalies": True})
    assert "am force-stop com.sim.shop" in record["commands"] and "pm clear com.sim.shop" not in record["commands"]
    assert phone.shell("settings get global wifi_on").strip() == "1"
    bad = reset_phone(phone, {"clear": ["com.sim.nothing"], "home": False})
    assert not bad["ok"] and "com.sim.nothing" in bad["errors"][0]
    for spec in ({"reboot": True}, {"clear": "com.sim.notes"}, {"force_stop": ["not a package"]}, []):
        with pytest.raises(ResetError):
            validate_spec(spec)


# kind -> (app to open first or None, text that shows the anomaly on screen)
SHOWS_AS = {
    "notification": (None, "Shell notification: "),
    "low_battery": (None, "Battery may run out soon"),
    "permission_dialog": ("com.sim.notes", "Allow Notes to "),
    "network_off": ("com.sim.shop", "Network unavailable, please retry"),
    "airplane_mode": ("com.sim.shop", "Network unavailable, please retry"),
    "slow_network": ("com.sim.shop", "Loading…"),
    "ad_popup": ("com.sim.shop", "Advertisement"),
    "storage_full": (None, "Storage space running out"),
    "app_crash": ("com.sim.notes", "Notes keeps stopping"),
    "app_not_responding": ("com.sim.notes", "Notes isn't responding"),
    "update_prompt": ("com.sim.shop", "New version available"),
}


def test_every_kind_has_a_screen_check():
    assert set(SHOWS_AS) == set(KINDS)


@pytest.mark.parametrize("kind", sorted(SHOWS_AS))
def test_each_injected_anomaly_shows_on_the_screen_and_clears(phone, kind):
    app, shows = SHOWS_AS[kind]
    if app:
        phone.shell(f"monkey -p {app} -c android.intent.category.LAUNCHER 1")
    record = inject_anomaly(phone, kind, random.Random(0))
    assert record["kind"] == kind and record["command"] and record["at"].endswith("+00:00")
    assert record["via"] in ("adb", "farm")
    screen = "\n".join(texts(phone))
    assert shows in screen, screen
    clear_anomalies(phone)
    if kind != "notification":  # a heads-up stays in the shade, as on a phone
        assert shows not in "\n".join(texts(phone))


def test_ordinary_adb_commands_are_used_where_android_has_them():
    rng = random.Random(0)
    assert anomaly_command("notification", rng)[0].startswith("cmd notification post -t ")
    assert anomaly_command("low_battery", rng)[0].startswith("dumpsys battery unplug")
    assert anomaly_command("network_off", rng) == ("svc wifi disable; svc data disable", "adb")
    assert anomaly_command("airplane_mode", rng) == ("cmd connectivity airplane-mode enable", "adb")
    with pytest.raises(AnomalyError):
        anomaly_command("meteor_strike", rng)


def test_in_app_anomalies_need_an_app(phone):
    with pytest.raises(AnomalyError, match="needs an app"):
        inject_anomaly(phone, "ad_popup", random.Random(0))


def test_maybe_inject_is_seeded(phone):
    assert maybe_inject(phone, {"notification": 0.0, "low_battery": 0.0}, random.Random(1)) is None
    first = maybe_inject(phone, {"notification": 0.5, "storage_full": 0.5}, random.Random(3))
    clear_anomalies(phone)
    second = maybe_inject(phone, {"notification": 0.5, "storage_full": 0.5}, random.Random(3))
    assert (first or {}).get("kind") == (second or {}).get("kind")
    always = maybe_inject(phone, {"low_battery": 1.0}, random.Random(0))
    assert always["kind"] == "low_battery" and "Battery may run out soon" in texts(phone)
    with pytest.raises(AnomalyError):
        maybe_inject(phone, {"meteor_strike": 1.0}, random.Random(0))


# -- the phone's baseline (global settings restored on every reset) ----------------------------------

def test_reset_restores_the_recorded_baseline(phone):
    from devices.baseline import read_baseline

    baseline = read_baseline(phone)
    assert baseline["global:airplane_mode_on"] == "0" and baseline["system:system_locales"] == "en-US"
    # What earlier tasks leave behind: airplane mode, Do Not Disturb, big letters, German, dim screen.
    phone.shell("cmd connectivity airplane-mode enable; settings put global zen_mode 1; "
                "settings put system font_scale 1.3; setprop persist.sys.locale de-DE; "
                "settings put system screen_brightness 12; svc wifi disable")
    assert phone.shell("getprop persist.sys.locale").strip() == "de-DE"

    record = reset_phone(phone, apps=["com.android.settings"], baseline=baseline)

    assert record["ok"], record["errors"]
    assert read_baseline(phone) == baseline
    assert phone.shell("getprop persist.sys.locale").strip() == "en-US"
    assert "cmd connectivity airplane-mode disable" in record["commands"]
    assert "settings put system font_scale 1.0" in record["commands"]
    assert record["commands"][-1] == "input keyevent KEYCODE_HOME"
    # Nothing differs any more: a second reset restores nothing.
    again = reset_phone(phone, apps=["com.android.settings"], baseline=baseline)
    assert again["commands"] == ["am force-stop com.android.settings", "pm clear com.android.settings",
                                 "input keyevent KEYCODE_HOME"]


def test_baseline_values_are_quoted_and_keys_are_only_the_listed_ones():
    from devices.baseline import BASELINE_SETTINGS, restore_command

    names = {s.name for s in BASELINE_SETTINGS}
    for wanted in ("global:airplane_mode_on", "global:wifi_on", "global:mobile_data", "global:zen_mode",
                   "system:screen_brightness", "system:font_scale", "system:system_locales",
                   "global:auto_time_zone"):
        assert wanted in names
    assert restore_command("system:font_scale", "1.0; reboot") == "settings put system font_scale '1.0; reboot'"
    assert restore_command("global:wifi_on", "0") == "svc wifi disable"
    assert restore_command("system:font_scale", "null") == "settings delete system font_scale"
    with pytest.raises(ValueError):
        restore_command("global:adb_enabled; reboot", "1")


@pytest.fixture(scope="module")
def real_phone():
    """A phone of the farm's real-phone mode: it answers only what a real Android phone answers."""
    from devices.phone import PhoneConnection
    from simfarm.farm import Farm
    from simfarm.serve import ServerThread

    farm = Farm(devices=1, seed=0, real_phone=True)
    with ServerThread(farm) as server:
        yield PhoneConnection(f"127.0.0.1:{server.port}", next(iter(farm)).serial)


@pytest.mark.parametrize("kind", sorted(SHOWS_AS))
def test_where_each_kind_works_is_said_truly(real_phone, kind):
    """'Any phone' kinds show on a real phone (ordinary ADB alone); the farm's own do not."""
    app, shows = SHOWS_AS[kind]
    real_phone.shell("input keyevent KEYCODE_HOME")
    if app:
        real_phone.shell(f"monkey -p {app} -c android.intent.category.LAUNCHER 1")
    try:
        if WHERE_IT_WORKS[kind] == ANY_PHONE:
            assert inject_anomaly(real_phone, kind, random.Random(0))["via"] == "adb"
        else:  # nothing on a real phone answers the farm's broadcast: not recorded as injected
            with pytest.raises(AnomalyError, match="only on the virtual farm"):
                inject_anomaly(real_phone, kind, random.Random(0))
        assert (shows in "\n".join(texts(real_phone))) == (WHERE_IT_WORKS[kind] == ANY_PHONE), kind
    finally:
        clear_anomalies(real_phone)
