"""System A reads terminal facts from a virtual phone over ADB."""
import pytest

from devices.phone import PhoneConnection
from flywheel.judging.system_a import system_a_vote


@pytest.fixture
def phone(virtual_farm):
    phone = PhoneConnection(virtual_farm.address, virtual_farm.serials[0])
    yield phone
    phone.shell("svc wifi enable; svc data enable; settings delete global flywheel_probe; "
                "rm -f /sdcard/Download/proof.txt")


def test_true_false_and_abstain(phone):
    spec = {"terminal": [{"check": "settings", "namespace": "global", "key": "flywheel_probe",
                          "equals": "1"},
                         {"check": "file", "path": "/sdcard/Download/proof.txt", "contains": "done"}]}
    before = system_a_vote(phone, spec)
    assert before.vote == "false" and "expected '1'" in before.rationale
    phone.shell("settings put global flywheel_probe 1; echo done > /sdcard/Download/proof.txt")
    after = system_a_vote(phone, spec)
    assert after.vote == "true", after.rationale
    assert system_a_vote(phone, {"milestones": []}).vote == "abstain"
    unreadable = {"terminal": [{"check": "content", "uri": "content://com.nothing/rows", "contains": "x"}]}
    assert system_a_vote(phone, unreadable).vote == "abstain"


def test_a_failure_with_the_network_down_is_env_error(phone):
    spec = {"terminal": [{"check": "settings", "namespace": "global", "key": "flywheel_probe",
                          "equals": "1"}]}
    phone.shell("svc wifi disable; svc data disable")
    vote = system_a_vote(phone, spec)
    assert vote.vote == "env_error" and "network" in vote.rationale


def test_foreground_check(phone):
    phone.shell("input keyevent KEYCODE_HOME")
    current = phone.foreground()
    spec = {"terminal": [{"check": "foreground", "package": "com.sim.nothing"}]}
    vote = system_a_vote(phone, spec)
    assert vote.vote == "false" and (current["package"] or "nothing") in vote.rationale
