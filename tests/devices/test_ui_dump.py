"""The UI dump in one shell round trip (`uiautomator dump F && cat F`), read as adbutils reads it."""
import pytest

from devices.phone import PhoneUnavailable, ui_dump_from_output

XML = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\"></hierarchy>"


def test_the_xml_follows_uiautomators_dumped_to_line():
    assert ui_dump_from_output(0, f"UI hierchary dumped to: /data/local/tmp/uidump.xml\n{XML}") == XML


@pytest.mark.parametrize("code, output", [
    (0, f"ERROR: could not get idle state.\n{XML}"),   # a stale file is never read as this screen
    (1, "ERROR: null root node returned by UiTestAutomationBridge."),
    (137, ""),
    (0, "UI hierchary dumped to: /data/local/tmp/uidump.xml\n"),
])
def test_a_failed_dump_gives_no_xml(code, output):
    assert ui_dump_from_output(code, output) is None


def test_the_one_connection_dump_is_adbutils_dump(phone):
    phone.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    assert phone.dump_hierarchy() == phone.adb.dump_hierarchy()
    assert phone.recent_dump(5) == phone.dump_hierarchy()


def test_a_phone_that_cannot_dump_is_unavailable(phone, monkeypatch):
    monkeypatch.setattr(phone, "shell_result", lambda command, timeout=20: (1, "ERROR: could not get idle state."))
    with pytest.raises(PhoneUnavailable, match="uiautomator dump failed"):
        phone.dump_hierarchy()


def test_the_screen_size_is_read_once_per_connection_until_a_wm_command_changes_it(phone, monkeypatch):
    """Every observation asks for the screen size: one `wm size` round trip per connection (and per
    WINDOW_SIZE_TTL_S), read again after a `wm` command that may have changed it."""
    sent = []
    shell_result = phone.shell_result
    monkeypatch.setattr(phone, "shell_result", lambda command, timeout=20: sent.append(command) or
                        shell_result(command, timeout))
    size = phone.window_size()
    assert phone.window_size() == phone.window_size() == size and sent.count("wm size") == 1
    phone.shell("wm density")                       # a read keeps it
    assert phone.window_size() == size and sent.count("wm size") == 1
    phone.shell("wm size reset")                    # a change forgets it
    assert phone.window_size() == size and sent.count("wm size") == 2
    monkeypatch.setattr("devices.phone.WINDOW_SIZE_TTL_S", 0.0)   # and time does
    phone.window_size()
    assert sent.count("wm size") == 3
