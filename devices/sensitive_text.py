"""Detectors of private data in text: payment card numbers (Luhn), ID numbers (check digits),
one-time codes and written-out credentials. Pure functions, used by the safety audit (typed-text
patterns that start with "@") and by the anonymisation of external queries."""
import re

_CARD_CANDIDATE = re.compile(r"(?<![\d])(?:\d[ -]?){12,18}\d(?![\d])")
_CN_ID = re.compile(r"(?<![\dA-Za-z])\d{17}[\dXx](?![\dA-Za-z])")
_SSN = re.compile(r"(?<!\d)(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?!\d)")
_OTP = re.compile(r"(?i)(otp|one[- ]time|verification|security|confirmation|login|auth\w*|2fa|sms)\s*"
                  r"(code|pin|password|passcode)?\W{0,20}(is\W{0,3})?\d{4,8}(?!\d)|验证码\D{0,10}\d{4,8}")
_SECRET_WORD = r"(password|passwd|pwd|passcode|pin code|secret|api[ _-]?key|token)"
_CREDENTIAL = re.compile(
    rf"(?i)\b{_SECRET_WORD}\b\s*(is|[:=：])\s*\S+"                   # "password: hunter2"
    rf"|\b{_SECRET_WORD}\b\s+(?=[^\s\d]*\d)[^\s,.;]{{4,}}"           # "password sunflower42"
    r"|密码\s*[是:：=]?\s*\S+")


def luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def find_card_numbers(text: str) -> list[str]:
    found = []
    for match in _CARD_CANDIDATE.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and luhn_valid(digits) and len(set(digits)) > 1:
            found.append(digits)
    return found


def _cn_id_valid(number: str) -> bool:
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    total = sum(int(d) * w for d, w in zip(number[:17], weights))
    return "10X98765432"[total % 11] == number[17].upper()


def find_id_numbers(text: str) -> list[str]:
    return [m.group() for m in _CN_ID.finditer(text) if _cn_id_valid(m.group())] + \
        [m.group() for m in _SSN.finditer(text)]


DETECTORS = {
    "@card_number": lambda text: bool(find_card_numbers(text)),
    "@id_number": lambda text: bool(find_id_numbers(text)),
    "@otp": lambda text: bool(_OTP.search(text)),
    "@credential": lambda text: bool(_CREDENTIAL.search(text)),
}


def secrets_in(text: str) -> list[str]:
    """Why this text must never be kept as a note (Table 3: no credentials, no card numbers)."""
    reasons = []
    if find_card_numbers(text):
        reasons.append("it contains a payment card number")
    if find_id_numbers(text):
        reasons.append("it contains an ID number")
    if _OTP.search(text):
        reasons.append("it contains a one-time verification code")
    if _CREDENTIAL.search(text):
        reasons.append("it contains a password or other credential")
    return reasons


