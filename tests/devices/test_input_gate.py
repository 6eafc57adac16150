"""No input reaches a phone without the safety audit, judged on the screen just before it.

The phone's I/O (PhoneConnection: shell, shell_result, exec_out, dump_hierarchy) and the pure
audit function are wrapped by spies that call through; every one of the 14 actions and both
composites then run on the virtual farm over ADB. Each input command sent must come after an
allowed audit decision for that very input, judged on a UI dump read after the previous input and
less than a second before this one, or on the phone's last dump when its page-flip counter, read
after the previous input, had not moved since that dump (devices/screen_signal.py): the same screen.
"""
from __future__ import annotations

import importlib
import re
import time

import pytest

from devices import audit as audit_module
from devices import composite, screen_signal
from devices.actions import ACTIONS, SYSTEM_BUTTONS
from devices.audit import AuditRule
from devices.executor import ActionExecutor
from devices.gate import FRESH_S
from devices.phone import PhoneConnection
from tests.devices.conftest import find, texts

DEFAULTS = importlib.import_module("devices.migrations.0003_default_safety_rules").DEFAULT_RULES
RULES = [AuditRule(**{"action_types": [], **rule}) for rule in DEFAULTS]
INPUT = re.compile(r"^(input |monkey |am start|am broadcast)")


class Spy:
    """Events in order: ("dump", xml, t), ("flips", count, t), ("audit", action, xml, decision, t),
    ("input", command, t, by_the_executor). Everything is recorded: a test's own setup input also
    makes older dumps stale."""

    def __init__(self):
        self.events = []
        self.recording = False  # True while the executor runs

    def inputs(self):
        return [event for event in self.events if event[0] == "input" and event[3]]


@pytest.fixture
def spy(monkeypatch):
    spy = Spy()
    originals = {name: getattr(PhoneConnection, name) for name in ("shell", "shell_result", "exec_out")}

    def sending(name):
        def wrapper(self, command, *args, **kwargs):
            # One shell line may carry several inputs (a double tap, a stroke): one event.
            if any(INPUT.match(part.strip()) for part in re.split(r"[;&|]+", command)):
                spy.events.append(("input", command, time.monotonic(), spy.recording))
            return originals[name](self, command, *args, **kwargs)
        return wrapper

    for name in originals:
        monkeypatch.setattr(PhoneConnection, name, sending(name))
    original_dump = PhoneConnection.dump_hierarchy

    def dump(self):
        xml = original_dump(self)
        spy.events.append(("dump", xml, time.monotonic()))
        return xml

    monkeypatch.setattr(PhoneConnection, "dump_hierarchy", dump)
    original_flips = screen_signal.page_flips

    def flips(phone):
        count = original_flips(phone)
        spy.events.append(("flips", count, time.monotonic()))
        return count

    monkeypatch.setattr(screen_signal, "page_flips", flips)
    original_audit = audit_module.audit

    def audited(action, hierarchy_xml, rules):
        decision = original_audit(action, hierarchy_xml, rules)
        spy.events.append(("audit", dict(action), hierarchy_xml, decision, time.monotonic()))
        return decision

    monkeypatch.setattr(audit_module, "audit", audited)
    return spy


def carries_out(action: dict, command: str) -> bool:
    """Is `command` the input that `action` (as audited) describes?"""
    name = action["action"]
    numbers = [int(n) for n in re.findall(r"-?\d+", command.split(";")[0])]
    if command.startswith("input tap "):
        taps = re.findall(r"input tap (\d+) (\d+)", command)
        if len(taps) == 2:
            return name == "double_click" and all([int(x), int(y)] == action["point"] for x, y in taps)
        return name in ("click", "type") and numbers == action.get("point")
    if command.startswith(("input text ", "am broadcast -a ADB_INPUT_B64")):
        return name == "type"
    if command.startswith("input keyevent "):
        key = command.split()[-1]
        return (name == "system_button" and SYSTEM_BUTTONS[action["button"]] == key) or (
            name == "type" and key == "KEYCODE_ENTER")
    if command.startswith("input motionevent DOWN"):
        down = numbers[:2]
        return name in ("swipe", "drag", "long_press", "set_scroll_widget") and down == (
            action.get("start") or action.get("point"))
    if command.startswith(("input swipe ", "input draganddrop ")):
        return name in ("swipe", "drag", "long_press") and numbers[:2] == (action.get("start") or action.get("point"))
    if command.startswith("monkey -p "):
        return name == "open" and command.split()[2] == action.get("package")
    return False


def assert_every_input_was_audited_on_a_fresh_dump(events):
    last_input_at = -1
    checked = 0
    for index, event in enumerate(events):
        if event[0] != "input":
            continue
        command, sent_at, by_the_executor = event[1:]
        if not by_the_executor:  # the test's own setup: not audited, but what was read before is stale
            last_input_at = index
            continue
        since_last_input = events[last_input_at + 1:index]
        audits = [e for e in since_last_input if e[0] == "audit"]
        assert audits, f"`{command}` was sent with no audit since the previous input"
        _, action, judged_xml, decision, audited_at = audits[-1]
        assert decision.allowed, f"`{command}` was sent although the audit blocked it: {decision.reason}"
        assert carries_out(action, command), f"the audit judged {action}, but `{command}` was sent"
        assert_judged_on_the_screen_as_it_was(events, last_input_at, index, audited_at, judged_xml, sent_at, command)
        last_input_at = index
        checked += 1
    return checked


def assert_judged_on_the_screen_as_it_was(events, last_input_at, index, audited_at, judged_xml, sent_at, command):
    """The audit's screen is the latest dump, read after the previous input less than FRESH_S
    before this one, or confirmed since by an unmoved page-flip counter."""
    dump_at = max((i for i, e in enumerate(events[:index]) if e[0] == "dump" and e[2] <= audited_at), default=None)
    assert dump_at is not None, f"`{command}` was audited with no dump at all"
    assert judged_xml == events[dump_at][1], f"`{command}` was audited on another screen than the latest dump"
    if dump_at > last_input_at and sent_at - events[dump_at][2] < FRESH_S:
        return
    flips_then = [e for e in events[:dump_at] if e[0] == "flips"]
    flips_now = [e for e in events[max(dump_at, last_input_at) + 1:index] if e[0] == "flips" and e[2] <= audited_at]
    assert flips_now, f"`{command}` was audited on a screen read before the previous input, not confirmed since"
    assert flips_then and flips_then[-1][1] == flips_now[-1][1] is not None, \
        f"`{command}` was audited on an old dump although the screen had changed"


def centre(phone, text=None, resource_id=None):
    node = find(phone, text=text, resource_id=resource_id)
    assert node is not None, f"{text or resource_id} is not on the screen: {texts(phone)}"
    return list(node.center)


@pytest.mark.django_db
def test_no_input_reaches_a_phone_without_an_audit_of_it_on_a_fresh_screen(phone, spy):
    executor = ActionExecutor(phone, rules=RULES, seed=0)
    width, height = phone.window_size()
    composite.forget_labels(phone)  # `open` reads the launcher, tapping ClipTube to learn its package
    ran = set()

    def run(action, observe_first=False, **kwargs):
        if observe_first:  # the automatic line: a dump read just before, which the audit may reuse
            phone.dump_hierarchy()
        spy.recording = True
        try:
            result = executor.execute(action, **kwargs)
        finally:
            spy.recording = False
        assert result.ok, f"{action} failed: {result.error or result.reason}"
        ran.add(action["action"])
        return result

    phone.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    run({"action": "click", "point": centre(phone, "Display & brightness")}, observe_first=True)
    run({"action": "system_button", "button": "back"})
    run({"action": "double_click", "point": centre(phone, "Search settings")})
    run({"action": "system_button", "button": "back"})
    run({"action": "swipe", "start": [width // 2, height * 3 // 4], "end": [width // 2, height // 4]})
    # A stored dump minutes old (another screen) is what the caller decided on: never what is judged.
    stale = phone.dump_hierarchy()
    phone.shell("am start -n com.android.settings/.DisplaySettingsActivity")
    slider = find(phone, resource_id="id/brightness")
    x1, y1, x2, y2 = slider.bounds
    run({"action": "drag", "start": [x1 + (x2 - x1) // 2, (y1 + y2) // 2], "end": [x2 - 2, (y1 + y2) // 2]},
        hierarchy_xml=stale)
    phone.shell("am start -n com.sim.notes/.EditorActivity")
    run({"action": "type", "point": centre(phone, resource_id="note_title"), "text": "two\nlines"})
    run({"action": "type", "text": " café ☕"})
    phone.dump_hierarchy()
    time.sleep(FRESH_S + 0.2)  # a dump this old is read again
    run({"action": "system_button", "button": "back"}, observe_first=False)
    phone.shell("monkey -p com.sim.notes -c android.intent.category.LAUNCHER 1")
    run({"action": "long_press", "point": centre(phone, "Gift ideas"), "duration_ms": 900})
    run({"action": "system_button", "button": "back"})
    result = run({"action": "open", "app": "Settings"})
    assert result.action["package"] == "com.android.settings" and result.element["package"] == "com.android.settings"
    assert any("input tap" in c for c in result.commands), "the launcher was read (ClipTube identified by a tap)"
    phone.shell("settings put global auto_time 0; am start -a android.settings.DATE_SETTINGS")
    phone.shell(f"input tap {' '.join(map(str, centre(phone, 'Time')))}")
    hour = find(phone, resource_id="id/hour_picker")
    target = str((int(hour.children[1].text) + 3) % 24)
    run({"action": "set_scroll_widget", "point": list(hour.center), "value": target}, observe_first=True)
    assert find(phone, resource_id="id/hour_picker").children[1].text == target.zfill(2)
    phone.shell("settings put global auto_time 1")
    for control in ({"action": "take_notes", "text": "nothing to see"}, {"action": "wait", "seconds": 0.2},
                    {"action": "terminate", "status": "success"}, {"action": "clarify", "question": "Which?"},
                    {"action": "call_user", "reason": "done"}):
        run(control)

    assert ran == set(ACTIONS)
    checked = assert_every_input_was_audited_on_a_fresh_dump(spy.events)
    assert checked == len(spy.inputs()) >= 15
    commands = [event[1] for event in spy.inputs()]
    assert any(c.startswith("monkey -p com.android.settings") for c in commands)
    assert sum(c.startswith("input motionevent DOWN") for c in commands) >= 4  # strokes and wheel turns
    phone.shell("pm clear com.sim.notes")


@pytest.mark.django_db
def test_open_is_audited_with_the_app_it_resolved_to(phone):
    from devices.models import AuditEvent

    rules = RULES + [AuditRule(name="no notes today", category="privacy", reason="notes are private",
                               action_types=["open"], element_patterns=[r"^com\.sim\.notes$"])]
    executor = ActionExecutor(phone, rules=rules, holder="tester")
    result = executor.execute({"action": "open", "app": "a note-taking app"})
    assert result.blocked and "notes are private" in result.reason
    assert result.element == {"label": "Notes", "package": "com.sim.notes"}
    assert phone.foreground()["package"] != "com.sim.notes"
    assert not any(c.startswith("monkey") for c in result.commands)
    event = AuditEvent.objects.get()
    assert event.holder == "tester" and event.element["package"] == "com.sim.notes"
    assert executor.execute({"action": "open", "app": "Settings"}).ok  # other apps still open


@pytest.mark.django_db
def test_the_tap_that_identifies_an_app_is_audited(phone):
    from devices.models import AuditEvent

    composite.forget_labels(phone)
    rules = RULES + [AuditRule(name="no video", category="prohibited", reason="no video apps",
                               action_types=["click"], element_patterns=["^ClipTube$"])]
    result = ActionExecutor(phone, rules=rules).execute({"action": "open", "app": "Notes"})
    assert result.ok and phone.foreground()["package"] == "com.sim.notes"
    event = AuditEvent.objects.get()
    assert event.action["action"] == "click" and "ClipTube" in event.element["text"]
    # the blocked tap was not sent (other icons whose labels name no package, TicketBox for
    # com.sim.tickets, are still identified by a tap)
    x1, y1, x2, y2 = event.element["bounds"]
    assert f"input tap {(x1 + x2) // 2} {(y1 + y2) // 2}" not in result.commands
    composite.forget_labels(phone)


@pytest.mark.django_db
def test_a_released_lease_sends_nothing(phone):
    from devices import leases
    from devices.models import Device

    device = Device.objects.create(serial=phone.serial, adb_server=phone.address)
    lease = leases.acquire(device, holder="collector")
    leases.release(lease)
    phone.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    executor = ActionExecutor(phone, rules=RULES, holder="collector", lease=lease)
    result = executor.execute({"action": "click", "point": centre(phone, "Display & brightness")})
    assert not result.ok and result.lease_lost and "lease lost" in result.error
    assert result.commands == [] and phone.foreground()["activity"] == ".Settings"
