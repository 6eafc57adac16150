"""Anonymisation on a corpus of PII examples: the personal data never survives."""
import pytest

from flywheel.rules.anonymize import anonymize

CORPUS = [
    ("Send my card number 4111 1111 1111 1111 to the shop", ["4111", "1111 1111"], "CARD"),
    ("Pay with 5500-0000-0000-0004 please", ["5500", "0004"], "CARD"),
    ("Email the receipt to jane.doe@example.com", ["jane.doe", "example.com"], "EMAIL"),
    ("Call me back at +1 (415) 555-2671 tonight", ["555-2671", "415"], "PHONE"),
    ("Text 13812345678 that I'm late", ["13812345678"], "PHONE"),
    ("My number is 020 7946 0958, save it", ["7946", "0958"], "PHONE"),
    ("Ship it to 1600 Amphitheatre Parkway Way, Mountain View, CA 94043", ["1600", "94043", "Amphitheatre"], "ADDRESS"),
    ("Deliver to 221B Baker Street, London", ["221B", "Baker"], "ADDRESS"),
    ("把外卖送到上海市浦东新区世纪大道100号", ["世纪大道100号"], "ADDRESS"),
    ("My ID is 11010519491231002X, fill it in", ["11010519491231002X"], "ID"),
    ("SSN 078-05-1120 goes in the form", ["078-05-1120"], "ID"),
    ("Send a message to Alice Johnson saying I'm running late", ["Alice", "Johnson"], "NAME"),
    ("Remind Bob about the meeting", ["Bob"], "NAME"),
    ("invite Priya to the group chat", ["Priya"], "NAME"),
    ("给王小明发消息说我晚点到", ["王小明"], "NAME"),
    ("把照片发给小王", ["小王"], "NAME"),
]


@pytest.mark.parametrize("text,secrets,kind", CORPUS)
def test_no_personal_data_survives(text, secrets, kind):
    result = anonymize(text)
    for secret in secrets:
        assert secret not in result.text, (text, result.text)
    assert f"[{kind}]" in result.text and result.findings.get(kind)


@pytest.mark.parametrize("text", [
    "Turn on Bluetooth in Settings",
    "Download the English offline pack in the translator",
    "Set the alarm for 7:30 tomorrow",
    "Buy 2 bags of coffee under $20",
    "Send the photo to my family group",
    "Open WLAN settings and show the MAC address",
])
def test_ordinary_queries_are_left_alone(text):
    assert anonymize(text).text == text
