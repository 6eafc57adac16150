"""The audit's screen without a dump per input: the last dump is reused while the phone's page-flip
counter has not moved, and read again as soon as it has."""
import pytest

from devices import screen_signal
from devices.gate import InputGate
from devices.phone import PhoneConnection


@pytest.fixture
def dumps(monkeypatch):
    """Counts real UI dumps."""
    count = []
    original = PhoneConnection.dump_hierarchy

    def dump(self):
        count.append(self.serial)
        return original(self)

    monkeypatch.setattr(PhoneConnection, "dump_hierarchy", dump)
    return count


def test_page_flip_counts_are_parsed_and_refusals_are_not_counts():
    assert screen_signal.parse_page_flips("Result: Parcel(000003e8    '....')") == 1000
    assert screen_signal.parse_page_flips("Result: Parcel(ffffffb6    '....')") is None  # -74
    assert screen_signal.parse_page_flips("service: command not found") is None


def test_an_unchanged_screen_is_not_dumped_again(phone, dumps):
    screen_signal.forget(phone)
    first = screen_signal.current_dump(phone)
    again = screen_signal.current_dump(PhoneConnection(phone.address, phone.serial))  # another connection
    assert again == first and len(dumps) == 1
    phone.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    changed = screen_signal.current_dump(phone)
    assert changed != first and len(dumps) == 2 and "com.android.settings" in changed


def test_the_gate_judges_the_screen_as_it_is_now(phone, dumps, db):
    """Input after input on a screen that changes: every audit sees the screen it acts on."""
    screen_signal.forget(phone)
    gate = InputGate(phone, rules=[])
    assert "com.android.settings" not in gate.screen()
    phone.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    assert "com.android.settings" in InputGate(phone, rules=[]).screen()
    count = len(dumps)
    InputGate(phone, rules=[]).screen()  # nothing changed since: no dump
    assert len(dumps) == count


def test_a_phone_that_cannot_tell_gets_a_fresh_dump_every_time(phone, dumps, monkeypatch):
    screen_signal.forget(phone)
    monkeypatch.setattr(screen_signal, "page_flips", lambda connection: None)
    screen_signal.current_dump(phone)
    screen_signal.current_dump(phone)
    assert len(dumps) == 2
