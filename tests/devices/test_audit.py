"""The safety audit (§3.3.1) as a pure function over (action, screen, rules), against small
uiautomator dumps of dangerous and harmless screens, with the default rules of migration 0003."""
import importlib
from pathlib import Path

import pytest

from devices.audit import AuditRule, audit
from devices.sensitive_text import find_card_numbers, find_id_numbers, luhn_valid, secrets_in

SCREENS = Path(__file__).parent / "screens"
DEFAULTS = importlib.import_module("devices.migrations.0003_default_safety_rules").DEFAULT_RULES
RULES = [AuditRule(**{"action_types": [], **rule}) for rule in DEFAULTS]


def screen(name):
    return (SCREENS / f"{name}.xml").read_text()


def click(x, y):
    return {"action": "click", "point": [x, y], "coords": "pixel"}


@pytest.mark.parametrize("name, action, category", [
    ("shop_payment", click(540, 770), "payment"),                     # "Pay now"
    ("cn_payment", click(800, 2260), "payment"),                      # "立即支付"
    ("settings_factory_reset", click(800, 2260), "irreversible"),     # "Erase all data"
    ("wallet_transfer", click(540, 2250), "payment"),                 # "Confirm" on a transfer page
    ("chat_settings", click(540, 670), "irreversible"),               # "Clear all chats"
    ("login_password", {"action": "type", "text": "hunter2"}, "privacy"),  # the focused password field
    ("shop_payment", {"action": "long_press", "point": [540, 770], "duration_ms": 800}, "payment"),
])
def test_dangerous_actions_are_blocked_with_a_reason(name, action, category):
    decision = audit(action, screen(name), RULES)
    assert decision.blocked
    assert decision.rule.category == category
    assert decision.reason and decision.rule.name in decision.reason
    assert decision.element is not None


@pytest.mark.parametrize("name, action", [
    ("shop_payment", click(540, 930)),                     # "Cancel" on the payment page
    ("shop_payment", click(540, 350)),                     # the notice text, not a button
    ("shop_payment", {"action": "swipe", "start": [540, 1500], "end": [540, 600]}),
    ("shop_payment", {"action": "system_button", "button": "back"}),   # leaving is always allowed
    ("cn_payment", click(300, 2260)),                      # "返回"
    ("settings_list", click(540, 760)),                    # Display
    ("settings_list", click(540, 960)),                    # System ("... reset" in its summary)
    ("chat_send", click(930, 2250)),                       # Send a message
    ("chat_send", {"action": "type", "point": [400, 2250], "text": "On my way!"}),
    ("notes_delete_confirm", click(860, 1410)),            # one note to Trash: an ordinary edit
    ("login_password", {"action": "type", "point": [540, 470], "text": "simuser@example.com"}),
    ("chat_settings", click(540, 400)),                    # Notifications row
])
def test_harmless_actions_pass(name, action):
    decision = audit(action, screen(name), RULES)
    assert decision.allowed, decision.reason


def test_typing_a_card_number_anywhere_is_blocked_but_other_digits_are_not():
    card = {"action": "type", "point": [400, 2250], "text": "4111 1111 1111 1111"}
    assert audit(card, screen("chat_send"), RULES).rule.name == "Typing a card number"
    order = {"action": "type", "point": [400, 2250], "text": "order 4111 1111 1111 1112"}  # fails Luhn
    assert audit(order, screen("chat_send"), RULES).allowed


def test_noting_secrets_is_blocked_by_rules_too():
    note = {"action": "take_notes", "text": "Wi-Fi password: sunflower42"}
    decision = audit(note, "", RULES)
    assert decision.blocked and decision.rule.category == "privacy"
    assert audit({"action": "take_notes", "text": "Cheapest: JBL Tune 510BT at $49"}, "", RULES).allowed


def test_rules_are_data_disabled_rules_and_action_types_are_honoured():
    rule = AuditRule(name="No sending", category="prohibited", reason="test", element_patterns=[r"^Send$"],
                     action_types=["click"])
    assert audit(click(930, 2250), screen("chat_send"), [rule]).blocked
    assert audit({"action": "long_press", "point": [930, 2250]}, screen("chat_send"), [rule]).allowed
    rule.enabled = False
    assert audit(click(930, 2250), screen("chat_send"), [rule]).allowed


def test_page_patterns_must_all_match():
    rule = AuditRule(name="Confirm on transfer", category="payment", reason="r", element_patterns=["Confirm"],
                     page_patterns=["Transfer", "Recipient"])
    assert audit(click(540, 2250), screen("wallet_transfer"), [rule]).blocked
    rule.page_patterns = ["Transfer", "Beneficiary"]
    assert audit(click(540, 2250), screen("wallet_transfer"), [rule]).allowed


def test_a_rule_without_conditions_blocks_nothing_and_a_bad_regex_does_not_crash():
    empty = AuditRule(name="empty", category="payment", reason="r")
    broken = AuditRule(name="broken", category="payment", reason="r", element_patterns=["Pay (now"])
    assert audit(click(540, 770), screen("shop_payment"), [empty, broken]).allowed


def test_a_broken_dump_still_audits_typed_text():
    card = {"action": "type", "text": "4111111111111111"}
    assert audit(card, "<not xml", RULES).blocked
    assert audit(click(1, 1), "", RULES).allowed


def test_detectors():
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert find_card_numbers("card 5500-0000-0000-0004 exp 12/27") == ["5500000000000004"]
    assert find_card_numbers("call 555 0100 or order #12345678") == []
    assert find_id_numbers("ID 11010519491231002X") == ["11010519491231002X"]
    assert find_id_numbers("ID 110105194912310021") == []          # wrong check digit
    assert find_id_numbers("SSN 123-45-6789") == ["123-45-6789"]
    assert secrets_in("Your verification code is 482913") == ["it contains a one-time verification code"]
    assert secrets_in("password: hunter2") == ["it contains a password or other credential"]
    assert secrets_in("Milk, eggs, bread; meeting at 10:30") == []


def test_a_swipe_that_starts_on_pay_now_is_blocked_too():
    slide = {"action": "swipe", "start": [540, 770], "end": [545, 772]}
    assert audit(slide, screen("shop_payment"), RULES).rule.name == "Payment confirmation"
