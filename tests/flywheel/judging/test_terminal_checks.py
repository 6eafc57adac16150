"""Terminal checks are typed data read over ADB: never shell, quoted, validated again when read."""
import time

import pytest

from devices.phone import PhoneConnection
from flywheel.judging.system_a import system_a_vote
from flywheel.judging.terminal_checks import SpecInvalid, check_command, read_and_compare

PWNED = "/sdcard/Download/pwned.txt"
INJECTIONS = [
    {"check": "settings", "namespace": f"global; echo x > {PWNED}; true", "key": "wifi_on"},
    {"check": "settings", "key": f"wifi_on; echo x > {PWNED}"},
    {"check": "getprop", "key": f"ro.product.model$(echo x > {PWNED})"},
    {"check": "content", "uri": f"content://com.sim.notes/notes; echo x > {PWNED}"},
    {"check": "shell", "cmd": f"echo x > {PWNED}"},
]


@pytest.fixture
def phone(virtual_farm):
    phone = PhoneConnection(virtual_farm.address, virtual_farm.serials[0])
    phone.shell(f"rm -f {PWNED}")
    yield phone
    phone.shell(f"rm -f {PWNED}; setprop persist.sys.locale en-US; input keyevent KEYCODE_HOME")


@pytest.mark.parametrize("check", INJECTIONS, ids=["namespace", "settings-key", "getprop-key", "uri", "shell"])
def test_a_stored_check_that_smuggles_a_command_runs_nothing(phone, check):
    vote = system_a_vote(phone, {"terminal": [check]})
    assert vote.vote == "abstain" and "invalid terminal check" in vote.rationale, vote.rationale
    assert phone.shell(f"test -e {PWNED} && echo yes || echo no").strip() == "no"
    with pytest.raises(SpecInvalid):
        read_and_compare(phone, check)


def test_an_invalid_stored_check_names_its_field():
    with pytest.raises(SpecInvalid, match=r"invalid terminal check: check: must be one of \['settings', 'getprop'"):
        check_command({"check": "shell", "cmd": "getprop persist.sys.locale"})
    with pytest.raises(SpecInvalid, match="namespace: must be one of"):
        check_command({"check": "settings", "namespace": "global;id", "key": "wifi_on"})


def test_commands_are_built_from_quoted_fields_only():
    where = "title = 'milk' OR 1=1"
    assert check_command({"check": "content", "uri": "content://com.sim.notes/notes", "where": where}) == \
        "content query --uri content://com.sim.notes/notes --where 'title = '\"'\"'milk'\"'\"' OR 1=1'"
    assert check_command({"check": "file", "path": "/sdcard/My Notes/a.txt", "contains": "x"}) == \
        "cat '/sdcard/My Notes/a.txt'"
    assert check_command({"check": "getprop", "key": "persist.sys.locale"}) == "getprop persist.sys.locale"


def test_getprop_and_screen_are_their_own_read_only_kinds(phone):
    locale = {"check": "getprop", "key": "persist.sys.locale", "matches": "^de"}
    phone.shell("setprop persist.sys.locale en-US")
    assert read_and_compare(phone, locale)[0] is False
    phone.shell("setprop persist.sys.locale de-DE")
    assert read_and_compare(phone, locale) == (True, "read 'de-DE'")
    # A fresh start: a Settings task another test left on a deeper page would come back where it was.
    phone.shell("am force-stop com.android.settings; am start -n com.android.settings/.Settings")
    # The activity starts asynchronously (once, under load, the first dump came before it): a few reads.
    for _ in range(25):
        ok, detail = read_and_compare(phone, {"check": "screen", "contains": "Bluetooth"})
        if ok:
            break
        time.sleep(0.2)
    assert ok is True, detail
    assert read_and_compare(phone, {"check": "screen", "not_contains": "Bluetooth"})[0] is False


def test_dumpsys_is_a_read_only_kind_of_its_own(phone):
    assert check_command({"check": "dumpsys", "service": "bluetooth_manager"}) == "dumpsys bluetooth_manager"
    assert read_and_compare(phone, {"check": "dumpsys", "service": "battery", "matches": r"level: \d+"})[0] is True
    with pytest.raises(SpecInvalid, match="service: must be a service name"):
        check_command({"check": "dumpsys", "service": "battery; id"})


def test_an_apps_own_state_is_never_asked_and_system_a_abstains():
    """What no phone lets a shell read (an app's provider, its private files) is not read on any phone:
    on a phone in real-phone mode not one request reaches what only the farm answers."""
    from simfarm.farm import Farm
    from simfarm.serve import ServerThread

    farm = Farm(devices=1, real_phone=True)
    with ServerThread(farm) as server:
        phone = PhoneConnection(f"127.0.0.1:{server.port}", next(iter(farm)).serial)
        for check in ({"check": "content", "uri": "content://com.sim.notes/notes", "contains": "milk"},
                      {"check": "content", "uri": "content://com.android.settings/paired_devices", "contains": "JBL"},
                      {"check": "file", "path": "/data/data/com.sim.notes/databases/notes.db", "exists": True}):
            vote = system_a_vote(phone, {"terminal": [check]})
            assert vote.vote == "abstain" and "no phone lets a shell read it" in vote.rationale, vote.rationale
        # Android's own providers are read as ever
        wifi = {"check": "content", "uri": "content://settings/global", "where": "name='wifi_on'", "contains": "value=1"}
        assert system_a_vote(phone, {"terminal": [wifi]}).vote == "true"
        assert next(iter(farm.phones.values())).farm_only_count == 0
