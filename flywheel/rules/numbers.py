"""Whole numbers typed by people: query strings, form fields, launch settings.

`str.isdigit()` is no check for `int()`: '²' and '٣' are digits to Python but `int('²')` raises, so a
page that checked then converted answered 500. Parse instead: ASCII digits only, within bounds, else None.
"""
ROW_ID_MAX = 2**63 - 1  # PostgreSQL bigint: no row has a larger id, no count is meant to be larger


def whole_number(value, minimum: int = 0, maximum: int = ROW_ID_MAX) -> int | None:
    """The int `value` spells (an int, or ASCII digits with an optional leading '-', spaces around
    allowed) when it lies in [minimum, maximum]; None for anything else ('', '1e3', '²', True, 2.0)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text.startswith("-") else text
        # The length cap keeps int() off strings it would refuse (or take long over) past 4300 digits.
        if not (digits.isascii() and digits.isdigit()) or len(digits) > len(str(max(abs(minimum), abs(maximum)))):
            return None
        number = int(text)
    else:
        return None
    return number if minimum <= number <= maximum else None


def row_id(value) -> int | None:
    """A primary key named in a request (`?run=12`), or None when the value names no possible row."""
    return whole_number(value, minimum=1)
