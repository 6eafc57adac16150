"""The safety audit judges by meaning (issue #35): purchases, transfers, irreversible deletions and
factory resets are blocked however they are worded — any phrasing, any of the lexicon's languages,
an id or an icon only, or a generic "OK" on a screen about paying — and their look-alikes pass.

The labelled set (tests/data/safety_audit_cases.jsonl) lives apart from the lexicon, so a new
phrasing is a new line there, not a new rule. Every case goes through devices.audit.audit with
the rules a fresh database is seeded with (migrations 0003 and 0007)."""
import pytest

from devices.act_meaning import Act, id_words, judge_words, normalise
from devices.audit import AuditRule, audit
from perf.safety_audit import case_screen, default_rules, figures, load_cases, run

RULES = default_rules()
CASES = load_cases()

# The figures the whole set must keep (at the time of writing: 0.981 and 0.992 over 925 cases).
# The misses are known: "Buy now" in languages the lexicon does not cover (Turkish, Indonesian,
# Vietnamese, Polish, Dutch), a bare "Перевести" (transfer or translate), "Subscribe now" and
# "Clear chat" with no screen around them.
DANGEROUS_BLOCKED = 0.95
HARMLESS_ALLOWED = 0.97
# Cases written after the lexicon, in four batches, never tuned on before their first figure was taken
# (now 0.972 and 0.988).
HOLDOUT_DANGEROUS_BLOCKED = 0.94
HOLDOUT_HARMLESS_ALLOWED = 0.95


def test_the_labelled_set_is_large_and_varied():
    assert len(CASES) >= 200
    assert {case["lang"] for case in CASES} >= {"en", "zh", "es", "fr", "de", "ja", "ru", "pt", "ar", "hi"}
    kinds = {case["kind"] for case in CASES}
    assert kinds >= {"text", "id-only", "icon-only", "context"}
    assert {case["act"] for case in CASES if case["dangerous"]} == set(Act)
    assert sum(not case["dangerous"] for case in CASES) >= 100


def test_dangerous_acts_are_blocked_and_look_alikes_pass_on_the_whole_set():
    outcomes = run(CASES, RULES)
    result = figures(outcomes)
    wrong = [(o.case["element"], o.case["screen"]) for o in outcomes if not o.right]
    assert result["dangerous_blocked"] >= DANGEROUS_BLOCKED, wrong
    assert result["harmless_allowed"] >= HARMLESS_ALLOWED, wrong


def test_the_held_out_cases_meet_their_own_thresholds():
    result = figures(run([case for case in CASES if case["split"] == "holdout"], RULES))
    assert result["dangerous_blocked"] >= HOLDOUT_DANGEROUS_BLOCKED
    assert result["harmless_allowed"] >= HOLDOUT_HARMLESS_ALLOWED


def click_on(text="", desc="", resource_id="", screen=()):
    case = {"element": {"text": text, "desc": desc, "resource_id": resource_id, "cls": "android.widget.Button"},
            "screen": list(screen)}
    xml, action = case_screen(case)
    return audit(action, xml, RULES)


def test_a_meaning_block_names_its_rule_its_category_and_why():
    decision = click_on("Jetzt bezahlen")
    assert decision.blocked and decision.rule.name == "Purchase or payment (by meaning)"
    assert decision.rule.category == "payment" and "a purchase or payment" in decision.reason
    decision = click_on("OK", screen=["Delete account?", "This cannot be undone."])
    assert decision.rule.category == "irreversible" and "irreversible deletion" in decision.reason


RESET_OPTIONS = ["Reset options", "Reset Wi-Fi, mobile & Bluetooth", "Reset app preferences",
                 "Erase all data (factory reset)"]  # Android's System → Reset options


@pytest.mark.parametrize("label, blocked", [
    ("Reset Wi-Fi, mobile & Bluetooth", False),   # names what it resets: the network, not the phone
    ("Reset app preferences", False),
    ("Erase all data (factory reset)", True),
])
def test_a_reset_that_names_its_object_is_not_the_factory_reset_listed_beside_it(label, blocked):
    assert click_on(label, screen=[line for line in RESET_OPTIONS if line != label]).blocked is blocked


def test_a_bare_reset_takes_the_meaning_of_its_screen():
    assert click_on("Reset all", screen=["Factory data reset", "All data on your phone will be erased"]).blocked
    assert not click_on("Reset all", screen=["Reset filters?", "Every filter goes back to its default"]).blocked


@pytest.mark.parametrize("screen, blocked", [
    (["Confirm payment of $25.00 to Coffee Shop?"], True),
    (["Payment successful", "$25.00 paid to Coffee Shop"], False),   # the act is over
    (["Wi-Fi connected"], False),
    (["删除后无法恢复，确定删除？"], True),
    (["Delete note?"], False),                                        # one note to the trash
])
def test_a_generic_yes_means_what_its_screen_is_about(screen, blocked):
    assert click_on("OK", screen=screen).blocked is blocked


def test_a_step_toward_paying_passes_until_the_screen_shows_how_it_is_paid():
    assert click_on("Place order", screen=["Shipping: Standard", "Total: $58.20"]).allowed
    assert click_on("Place order", screen=["Visa •••• 4242", "Total: $58.20"]).blocked
    assert click_on("Place order · $58.20").blocked


def test_a_price_button_buys_but_a_choice_of_amounts_does_not():
    assert click_on("$4.99", screen=["Minecraft", "Mojang Studios"]).blocked
    assert click_on("$2", screen=["Tip your rider", "No tip", "$5"]).allowed


def test_the_no_of_a_dangerous_dialog_passes_except_closing_an_account():
    assert click_on("Cancel", screen=["Pay $25.00?"]).allowed
    assert click_on("Abbrechen", screen=["Endgültig löschen?"]).allowed
    assert click_on("Close account").blocked


def test_disabling_the_meaning_rules_leaves_the_word_rules():
    rules = [AuditRule(**{**vars(rule), "enabled": not rule.element_patterns[0].startswith("@act:")})
             if rule.element_patterns else rule for rule in RULES]
    xml, action = case_screen({"element": {"text": "Jetzt bezahlen"}, "screen": []})
    assert audit(action, xml, rules).allowed
    xml, action = case_screen({"element": {"text": "Pay now"}, "screen": []})
    assert audit(action, xml, rules).rule.name == "Payment confirmation"


def test_typing_and_opening_are_not_judged_by_meaning():
    xml, _ = case_screen({"element": {"text": "Buy now"}, "screen": []})
    assert audit({"action": "type", "point": [540, 2100], "text": "hello"}, xml, RULES).allowed
    assert audit({"action": "open", "app": "Pay", "label": "Pay", "package": "com.pay"}, "", RULES).allowed


def test_normalisation_and_resource_ids():
    assert normalise("ＰＡＹ　ＮＯＷ") == "pay now"
    assert normalise("Supprimer définitivement") == "supprimer definitivement"
    assert id_words("com.shop:id/btnConfirmPurchase") == "confirm purchase"
    assert id_words("com.notes:id/ic_delete_forever_24dp") == "delete forever"
    assert id_words("com.shop:id/buyNowBtn") == "buy now"


def test_the_judge_alone():
    assert judge_words(["Pay attention to the road"], "", []) is None
    assert judge_words([], "com.bank:id/btn_send_money", []).act == Act.TRANSFER
    assert judge_words(["Restore"], "", ["Recently deleted", "Items are deleted forever after 30 days."]) is None
    assert judge_words(["Delete forever"], "android:id/button3", []).act == Act.DELETE
    assert judge_words(["Receipt from TechMart", "Tap to restore or delete forever"], "", []) is None


def test_a_send_under_an_amount_of_money_sends_it_but_a_chat_about_money_does_not():
    assert judge_words(["Transfer"], "", ["From: Checking", "To: Savings", "Amount $500.00"]).act == Act.TRANSFER
    assert judge_words(["Send"], "", ["Jordan", "$20 for the pizza, right?"]) is None
    assert judge_words(["OK"], "", ["Set a monthly budget", "Amount: $200"]) is None
