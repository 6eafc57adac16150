"""Terminal-state checks of a query's verification spec, read from the phone over ADB.

Each check names a device-side fact (docs/query-format.md, `verification.terminal`): a settings
value, a content-provider row, a file, the foreground app, or any shell command's output.
"""
import re
import shlex

from devices.phone import PhoneConnection


class CheckNotReadable(Exception):
    """The fact cannot be read on this phone (unknown command, no such provider...)."""


def check_command(check: dict) -> str:
    kind = check.get("check")
    if kind == "settings":
        return f"settings get {check.get('namespace', 'global')} {check['key']}"
    if kind == "content":
        command = f"content query --uri {shlex.quote(check['uri'])}"
        if check.get("where"):
            command += f" --where {shlex.quote(check['where'])}"
        return command
    if kind == "file":
        path = shlex.quote(check["path"])
        if check.get("contains") is not None or check.get("matches") is not None:
            return f"cat {path}"
        return f"test -e {path} && echo exists || echo missing"
    if kind == "shell":
        return check["cmd"]
    raise CheckNotReadable(f"unknown check kind {kind!r}")


def compare(check: dict, output: str) -> tuple[bool, str]:
    """Apply the check's predicates to the fact read; all must hold."""
    text = output.strip()
    if check.get("check") == "file" and "exists" in check:
        present = text != "missing" and not text.startswith("cat:")
        if present != bool(check["exists"]):
            return False, f"{check['path']} {'exists' if present else 'is missing'}"
    if "equals" in check and text != str(check["equals"]):
        return False, f"read {text!r}, expected {check['equals']!r}"
    if "contains" in check and str(check["contains"]).lower() not in text.lower():
        return False, f"{check['contains']!r} not in {text[:120]!r}"
    if "not_contains" in check and str(check["not_contains"]).lower() in text.lower():
        return False, f"{check['not_contains']!r} present in {text[:120]!r}"
    if "matches" in check and not re.search(check["matches"], text, re.MULTILINE):
        return False, f"{text[:120]!r} does not match /{check['matches']}/"
    return True, f"read {text[:80]!r}"


def read_and_compare(phone: PhoneConnection, check: dict) -> tuple[bool, str]:
    if check.get("check") == "foreground":
        current = phone.foreground()
        if current["package"] != check.get("package"):
            return False, f"foreground is {current['package'] or 'nothing'}, expected {check.get('package')}"
        if check.get("activity") and not current["activity"].endswith(check["activity"]):
            return False, f"activity is {current['activity']}, expected {check['activity']}"
        return True, f"foreground {current['package']}/{current['activity']}"
    command = check_command(check)
    code, output = phone.shell_result(command)
    # A missing command or provider means this phone cannot tell; a missing file is a fact.
    if code == 127 or (check["check"] == "content" and code != 0):
        raise CheckNotReadable(f"{command!r}: {output.strip()[:120]}")
    return compare(check, output)
