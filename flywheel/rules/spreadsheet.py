"""Cells of the CSV files the console writes, made safe to open in a spreadsheet.

A cell that begins with =, +, -, @, a tab or a carriage return is read by Excel, LibreOffice and
Google Sheets as a formula, so a query key or text chosen by someone else could run one on the
reader's machine (OWASP "CSV Injection"). Such a cell gets a leading single quote, which the
spreadsheet shows as text. Numbers the console computed are left as they are: they hold no formula.
"""
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value):
    """The cell as written: a string that a spreadsheet would run as a formula gets a leading quote."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def spreadsheet_safe_row(row: dict) -> dict:
    """Every cell of a csv.DictWriter row made safe (None is written as an empty cell)."""
    return {column: "" if value is None else spreadsheet_safe(value) for column, value in row.items()}
