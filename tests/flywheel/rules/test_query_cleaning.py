import pytest

from flywheel.rules.query_cleaning import classify_intent, clean_query


@pytest.mark.parametrize("text,category", [
    ("", "invalid"), ("ok", "invalid"), ("$$$ 123 456 !!!", "invalid"),
    ("Transfer $500 to my landlord", "sensitive"), ("Delete my account on ShopMart", "sensitive"),
    ("factory reset the phone now", "sensitive"), ("how to hack my neighbour's wifi", "sensitive"),
    ("tell me a joke", "non_executable"), ("What is the capital of France", "non_executable"),
    ("make me a coffee", "non_executable"), ("the weather is nice", "non_executable"),
])
def test_removed_with_a_reason(text, category):
    result = clean_query(text)
    assert not result.keep and result.category == category and result.reason


@pytest.mark.parametrize("text,domain,intent", [
    ("Turn on Bluetooth", "system", "modify"),
    ("Buy the cheapest wireless earbuds and add a coupon", "shopping", "purchase"),
    ("Send the last photo to [NAME] in Chatter", "messaging", "communicate"),
    ("Download the Japanese offline pack in the translator", "translation", "download"),
    ("Search for pizza places nearby", "food_delivery", "search"),
])
def test_kept_and_classified(text, domain, intent):
    result = clean_query(text)
    assert result.keep, result.reason
    assert result.intent["domain"] == domain and result.intent["intent"] == intent


def test_duplicates_are_removed():
    seen = set()
    assert clean_query("Turn on Bluetooth", seen).keep
    assert clean_query("turn on  bluetooth", seen).reason == "duplicate of an earlier query"


def test_cross_app_flag():
    assert classify_intent("Copy the address in Notes and then send it to the group in Chatter")["cross_app"]
