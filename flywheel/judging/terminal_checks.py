"""Terminal-state checks of a query's verification spec, read from the phone over ADB.

Each check is a typed, read-only device fact (docs/query-format.md, `verification.terminal`): a
settings value, a system property, a content-provider row, a file, the foreground app, or the
final screen. Checks are data, never shell: a command is built only from the fields the published
schema validates, each one quoted. A spec is validated again here, because a stored one may
predate the schema or have been written around the import; one that fails raises SpecInvalid.
"""
import re
import shlex

from devices.phone import PhoneConnection
from flywheel.queries.query_format import terminal_check_problems
from flywheel.rules.device_state import private_state


class CheckNotReadable(Exception):
    """The fact cannot be read on this phone (unknown command, no such provider...)."""


class SpecInvalid(CheckNotReadable):
    """The check itself is malformed (fails docs/query-format.schema.json): the spec is at fault."""


def validated(check) -> dict:
    problems = terminal_check_problems(check)
    if problems:
        field, message = problems[0]
        raise SpecInvalid(f"invalid terminal check: {field}: {message}")
    return check


def check_command(check: dict) -> str:
    """The read-only shell command that reads the fact a (validated) check names."""
    check = validated(check)
    kind, quote = check["check"], shlex.quote
    if kind == "settings":
        return f"settings get {quote(check.get('namespace', 'global'))} {quote(check['key'])}"
    if kind == "getprop":
        return f"getprop {quote(check['key'])}"
    if kind == "content":
        command = f"content query --uri {quote(check['uri'])}"
        if check.get("where"):
            command += f" --where {quote(check['where'])}"
        return command
    if kind == "dumpsys":
        return f"dumpsys {quote(check['service'])}"
    if kind == "file":
        path = quote(check["path"])
        if any(name in check for name in ("contains", "not_contains", "matches", "equals")):
            return f"cat {path}"
        return f"test -e {path} && echo exists || echo missing"
    raise SpecInvalid(f"the {kind} check reads no shell command")


def compare(check: dict, output: str) -> tuple[bool, str]:
    """Apply the check's predicates to the fact read; all must hold."""
    text = output.strip()
    if check.get("check") == "file" and "exists" in check:
        present = text != "missing" and not text.startswith("cat:")
        if present != bool(check["exists"]):
            return False, f"{check['path']} {'exists' if present else 'is missing'}"
    if "equals" in check and text != str(check["equals"]):
        return False, f"read {text[:120]!r}, expected {check['equals']!r}"
    if "contains" in check and str(check["contains"]).lower() not in text.lower():
        return False, f"{check['contains']!r} not in {text[:120]!r}"
    if "not_contains" in check and str(check["not_contains"]).lower() in text.lower():
        return False, f"{check['not_contains']!r} present in {text[:120]!r}"
    if "matches" in check and not re.search(check["matches"], text, re.MULTILINE):
        return False, f"{text[:120]!r} does not match /{check['matches']}/"
    return True, f"read {text[:80]!r}"


def read_and_compare(phone: PhoneConnection, check: dict) -> tuple[bool, str]:
    check = validated(check)
    private = private_state(check)
    if private:  # never asked: no phone lets a shell read it, and the console relies on nothing a farm alone offers
        raise CheckNotReadable(private)
    if check["check"] == "foreground":
        current = phone.foreground()
        if current["package"] != check["package"]:
            return False, f"foreground is {current['package'] or 'nothing'}, expected {check['package']}"
        if check.get("activity") and not current["activity"].endswith(check["activity"]):
            return False, f"activity is {current['activity']}, expected {check['activity']}"
        return True, f"foreground {current['package']}/{current['activity']}"
    if check["check"] == "screen":
        ok, detail = compare(check, phone.dump_hierarchy())
        return ok, detail if not ok else "the final screen matches"
    command = check_command(check)
    code, output = phone.shell_result(command)
    # A missing command or provider means this phone cannot tell; a missing file is a fact.
    if code == 127 or (check["check"] == "content" and code != 0):
        raise CheckNotReadable(f"{command!r}: {output.strip()[:120]}")
    return compare(check, output)
