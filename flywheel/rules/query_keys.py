"""What a query key may be: it names the query in URLs, file names, exports and CSV cells.

Letters, digits and - _ . : only, starting with a letter or a digit (so no key reads as a
spreadsheet formula or a hidden file), at most QUERY_KEY_MAX_LENGTH characters (Query.key's
max_length). Every key the console makes fits: gen-3-14, derived-5-1-0, rqa-7-s2, vbench-12.
"""
import re

QUERY_KEY_MAX_LENGTH = 200
QUERY_KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
QUERY_KEY_CHARACTERS = "letters, digits, '-', '_', '.' and ':' (starting with a letter or digit)"


def query_key_problem(key) -> str:
    """Why `key` cannot be a query key, naming it; "" when it can."""
    if not isinstance(key, str) or not key:
        return "a query key must be a non-empty string"
    if len(key) > QUERY_KEY_MAX_LENGTH:
        return f"query key {key[:40]!r}... is {len(key)} characters long; at most {QUERY_KEY_MAX_LENGTH} are allowed"
    if not QUERY_KEY_PATTERN.fullmatch(key):
        return f"query key {key!r} may hold only {QUERY_KEY_CHARACTERS}"
    return ""
