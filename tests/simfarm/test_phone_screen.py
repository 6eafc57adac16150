"""Screens: uiautomator XML, pixels that match bounds, taps, typing, scrolling and system keys."""
import re

import pytest

from simfarm import ui
from tests.simfarm.phone_fixtures import bounds, focus, new_phone, node, screen, sh, tap, texts, xml_root

NODE_ATTRIBUTES = ["index", "text", "resource-id", "class", "package", "content-desc", "checkable", "checked",
                   "clickable", "enabled", "focusable", "focused", "scrollable", "long-clickable", "password",
                   "selected", "bounds"]


@pytest.fixture
def phone():
    return new_phone()


@pytest.fixture
def settings(phone):
    sh(phone, "monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    return phone


def test_dump_is_uiautomator_shaped(settings):
    xml = settings.dump_hierarchy()
    assert xml.startswith("<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\"><node ")
    for element in xml_root(settings).iter("node"):
        assert list(element.attrib) == NODE_ATTRIBUTES
        assert re.fullmatch(r"\[\d+,\d+\]\[\d+,\d+\]", element.attrib["bounds"])
    wlan = node(settings, text="WLAN")
    assert wlan.attrib["resource-id"] == "android:id/title"
    assert wlan.attrib["package"] == "com.android.settings"


def test_bounds_match_pixels(settings):
    image = screen(settings)
    x1, y1, x2, y2 = bounds(settings, resource_id="com.android.settings:id/search_bar")
    mid = (y1 + y2) // 2
    # The button's outline lies on its bounds: just inside differs from just outside.
    assert image.getpixel((x1 + 1, mid)) != image.getpixel((x1 - 3, mid))
    assert image.getpixel((x1 - 3, mid)) == ui.BACKGROUND
    # Every text in the dump is drawn inside its own bounds.
    for element in xml_root(settings).iter("node"):
        if element.attrib["text"] and element.attrib["class"] == "android.widget.TextView":
            x1, y1, x2, y2 = map(int, re.findall(r"\d+", element.attrib["bounds"]))
            colors = image.crop((x1, y1, x2, y2)).getcolors(maxcolors=100000)
            assert len(colors) > 2, element.attrib["text"]


def test_switch_pixels_follow_checked_state(settings):
    tap(settings, text="Bluetooth")
    switch = node(settings, resource_id="android:id/switch_widget")
    x1, y1, x2, y2 = bounds(settings, resource_id="android:id/switch_widget")
    off_color = screen(settings).getpixel((x1 + 4, (y1 + y2) // 2))
    assert switch.attrib["checked"] == "false"
    tap(settings, resource_id="com.android.settings:id/bluetooth_switch")
    assert node(settings, resource_id="android:id/switch_widget").attrib["checked"] == "true"
    assert screen(settings).getpixel((x1 + 4, (y1 + y2) // 2)) != off_color
    assert sh(settings, "settings get global bluetooth_on") == "1\n"


def test_tap_changes_page_and_back_returns(settings):
    tap(settings, text="WLAN")
    assert focus(settings)[1][1] == ".WifiSettingsActivity"
    assert "SimLab-Guest" in texts(settings)
    tap(settings, content_desc="Navigate up")
    assert "WLAN" in texts(settings) and "SimLab-Guest" not in texts(settings)
    tap(settings, text="WLAN")
    sh(settings, "input keyevent KEYCODE_BACK")
    assert focus(settings)[1][1] == ".Settings"


def test_type_into_a_field_and_search(settings):
    tap(settings, resource_id="com.android.settings:id/search_bar")
    field = node(settings, resource_id="com.android.settings:id/search_src_text")
    assert field.attrib["focused"] == "true" and field.attrib["class"] == "android.widget.EditText"
    sh(settings, "input text Bluetooth")
    results = [n.attrib["text"] for n in xml_root(settings).iter("node")
               if n.attrib["resource-id"] == "android:id/title"]
    assert results[:3] == ["Bluetooth", "Bluetooth scanning", "Bluetooth device name"]
    sh(settings, "input keyevent KEYCODE_DEL")
    assert node(settings, resource_id="com.android.settings:id/search_src_text").attrib["text"] == "Bluetoot"


def test_keyboard_shows_for_a_focused_field_and_its_keys_type(settings):
    tap(settings, resource_id="com.android.settings:id/search_bar")
    image = screen(settings)
    assert image.getpixel((540, 2400 - 64 - 10)) == (232, 234, 237)  # keyboard background
    keyboard = next(w for w in settings.engine.screen().children if w.window == "InputMethod")
    key_w = next(k for k in keyboard.children if k.text == "w")
    x1, y1, x2, y2 = key_w.bounds
    sh(settings, f"input tap {(x1 + x2) // 2} {(y1 + y2) // 2}")
    assert settings.engine.foreground.top.params["query"] == "w"
    sh(settings, "input keyevent BACK")  # Back first hides the keyboard
    assert settings.engine.foreground.top.page_id == "search"
    assert screen(settings).getpixel((540, 2400 - 64 - 10)) != (232, 234, 237)


def test_scrolling_a_list(settings):
    assert "About phone" not in texts(settings)
    recycler = node(settings, resource_id="com.android.settings:id/recycler_view")
    assert recycler.attrib["scrollable"] == "true"
    sh(settings, "input swipe 540 1800 540 600 300")
    sh(settings, "input swipe 540 1800 540 600 300")
    assert "About phone" in texts(settings)
    assert "WLAN" not in texts(settings)
    sh(settings, "input swipe 540 600 540 2000 300")
    sh(settings, "input swipe 540 600 540 2000 300")
    assert "WLAN" in texts(settings)


def test_home_recents_and_switching_tasks(phone):
    sh(phone, "monkey -p com.android.settings 1")
    tap(phone, text="WLAN")
    sh(phone, "input keyevent KEYCODE_HOME")
    assert focus(phone)[0] == "com.google.android.apps.nexuslauncher"
    tap(phone, content_desc="Translator")
    assert focus(phone)[0] == "com.sim.translator"
    sh(phone, "input keyevent KEYCODE_APP_SWITCH")
    cards = [n.attrib["content-desc"] for n in xml_root(phone).iter("node")
             if n.attrib["resource-id"].endswith(":id/snapshot")]
    assert cards == ["Translator", "Settings"]
    tap(phone, content_desc="Settings")
    assert focus(phone)[1][1] == ".WifiSettingsActivity"  # the task kept its page stack


def test_back_on_root_page_keeps_the_task_in_recents(phone):
    sh(phone, "monkey -p com.android.settings 1")
    sh(phone, "input keyevent 4")
    assert focus(phone)[0] == "com.google.android.apps.nexuslauncher"
    assert [t.package for t in phone.engine.tasks] == ["com.android.settings"]


def test_notification_shade_swipe_and_quick_settings(phone):
    sh(phone, "cmd notification post -t 'Build done' build_tag 'All tests passed'")
    sh(phone, "input swipe 540 10 540 1500 300")
    assert focus(phone)[0] == "com.android.systemui"
    assert "All tests passed" in texts(phone)
    wifi_tile = node(phone, content_desc="Internet")
    assert wifi_tile.attrib["checked"] == "true"
    tap(phone, content_desc="Internet")
    assert sh(phone, "settings get global wifi_on") == "0\n"
    sh(phone, "input keyevent BACK")
    assert focus(phone)[0] == "com.google.android.apps.nexuslauncher"


def test_share_sheet_and_clipboard_cross_app(phone):
    sh(phone, "monkey -p com.sim.translator 1")
    tap(phone, resource_id="com.sim.translator:id/input_text")
    sh(phone, "input text thanks")
    tap(phone, text="Translate")
    tap(phone, resource_id="com.sim.translator:id/copy_result")
    assert sh(phone, "content query --uri content://sim/clipboard") == "Row: 0 text=[Chinese (Simplified)] thanks\n"
    tap(phone, resource_id="com.sim.translator:id/share_result")
    assert focus(phone)[0] == "com.android.intentresolver"
    assert "[Chinese (Simplified)] thanks" in texts(phone)
    sh(phone, "input keyevent BACK")
    assert focus(phone)[0] == "com.sim.translator"


def test_wheel_picker_sets_the_time(phone):
    sh(phone, "am start -a android.settings.DATE_SETTINGS")
    tap(phone, text="Set time automatically")
    tap(phone, text="Time")
    x1, y1, x2, y2 = bounds(phone, resource_id="com.android.settings:id/hour_picker")
    item = (y2 - y1) // 3
    sh(phone, f"input swipe {(x1 + x2) // 2} {(y1 + y2) // 2} {(x1 + x2) // 2} {(y1 + y2) // 2 - 2 * item} 300")
    assert node(phone, resource_id="com.android.settings:id/hour_picker").find("node[@resource-id='android:id/numberpicker_input']") is not None
    tap(phone, text="OK")
    assert sh(phone, "date +%H") == "11\n"


def test_long_press_is_a_same_point_swipe(phone):
    sh(phone, "monkey -p com.sim.translator 1")
    tap(phone, text="Voice translation")
    x1, y1, x2, y2 = bounds(phone, resource_id="com.sim.translator:id/mic_button")
    sh(phone, f"input swipe {(x1 + x2) // 2} {(y1 + y2) // 2} {(x1 + x2) // 2} {(y1 + y2) // 2} 800")
    assert phone.app_state("com.sim.translator")["voice_text"] == "Where is the nearest subway station?"


def test_motionevents_make_a_tap(settings):
    x1, y1, x2, y2 = bounds(settings, text="WLAN")
    sh(settings, f"input motionevent DOWN {x1 + 5} {y1 + 5}")
    sh(settings, f"input motionevent UP {x1 + 5} {y1 + 5}")
    assert focus(settings)[1][1] == ".WifiSettingsActivity"


@pytest.mark.parametrize("index", [2, 4, 6])
def test_other_resolutions_scale_and_agree(index):
    phone = new_phone(index=index)
    sh(phone, "monkey -p com.android.settings 1")
    width, height = screen(phone).size
    assert sh(phone, "wm size") == f"Physical size: {width}x{height}\n"
    x1, y1, x2, y2 = bounds(phone, text="WLAN")
    assert 0 <= x1 < x2 <= width and 0 <= y1 < y2 <= height
    tap(phone, text="WLAN")
    assert focus(phone)[1][1] == ".WifiSettingsActivity"


def test_long_press_a_field_to_paste_the_clipboard(phone):
    sh(phone, "cmd clipboard set bonjour")
    sh(phone, "monkey -p com.sim.translator 1")
    x1, y1, x2, y2 = bounds(phone, resource_id="com.sim.translator:id/input_text")
    sh(phone, f"input swipe {(x1 + x2) // 2} {(y1 + y2) // 2} {(x1 + x2) // 2} {(y1 + y2) // 2} 700")
    tap(phone, text="Paste")
    assert phone.app_state("com.sim.translator")["input_text"] == "bonjour"
    assert "Paste" not in texts(phone)


def test_band_png_encoder_round_trips_and_reuses_bands():
    import io
    import random
    import zlib

    from PIL import Image

    from simfarm import png

    assert png.adler32_combine(zlib.adler32(b"hello "), zlib.adler32(b"world"), 5) == zlib.adler32(b"hello world")
    rng = random.Random(4)
    noise = Image.frombytes("RGB", (101, 70), bytes(rng.randrange(256) for _ in range(101 * 70 * 3)))
    encoder = png.BandEncoder(band_rows=16)
    for image in (noise, Image.new("RGB", (101, 70), (10, 20, 30)), noise):
        decoded = Image.open(io.BytesIO(encoder.encode(image)))
        assert decoded.convert("RGB").tobytes() == image.tobytes()
    assert encoder.reused >= 5  # the second noise frame reused every band


def test_power_key_sleeps_the_screen(settings):
    sh(settings, "input keyevent KEYCODE_POWER")
    assert "mHoldingDisplaySuspendBlocker=false" in sh(settings, "dumpsys power")
    assert screen(settings).getextrema() == ((0, 0), (0, 0), (0, 0))
    sh(settings, "input tap 540 700")  # ignored while asleep
    assert focus(settings)[1][1] == ".Settings"
    sh(settings, "input keyevent WAKEUP")
    assert screen(settings).getpixel((540, 1200)) != (0, 0, 0)


def test_long_press_a_launcher_icon_for_app_info(phone):
    x1, y1, x2, y2 = bounds(phone, content_desc="Translator")
    sh(phone, f"input swipe {(x1 + x2) // 2} {(y1 + y2) // 2} {(x1 + x2) // 2} {(y1 + y2) // 2} 700")
    tap(phone, text="App info")
    assert focus(phone)[1][1] == ".InstalledAppDetailsActivity"
    assert "Translator" in texts(phone) and "version 6.2.0" in texts(phone)


def test_wm_size_override_changes_the_screen(phone):
    sh(phone, "wm size 720x1600")
    assert sh(phone, "wm size") == "Physical size: 1080x2400\nOverride size: 720x1600\n"
    assert screen(phone).size == (720, 1600)
    sh(phone, "monkey -p com.android.settings 1")
    tap(phone, text="WLAN")
    assert focus(phone)[1][1] == ".WifiSettingsActivity"
    sh(phone, "wm size reset")
    assert screen(phone).size == (1080, 2400)


def test_recents_shows_snapshots_and_a_swipe_closes_a_task(phone):
    sh(phone, "monkey -p com.android.settings 1; monkey -p com.sim.translator 1; input keyevent KEYCODE_APP_SWITCH")
    x1, y1, x2, y2 = bounds(phone, content_desc="Translator")
    image = screen(phone)
    assert len(image.crop((x1, y1 + (y2 - y1) // 4, x2, y2)).getcolors(maxcolors=1 << 16)) > 5  # a real snapshot
    sh(phone, f"input swipe {(x1 + x2) // 2} {(y1 + y2) // 2} {(x1 + x2) // 2} {y1 - 400} 200")
    assert [t.package for t in phone.engine.tasks] == ["com.android.settings"]
    tap(phone, text="Clear all")
    assert phone.engine.tasks == [] and focus(phone)[0] == "com.google.android.apps.nexuslauncher"
