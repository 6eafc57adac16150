"""System A: terminal-state physical verification (§2.4.2).

At the end of a trajectory, read the device-side facts the query's verification spec names and
vote True or False; Env_ERROR when a failed check has an environmental cause on the phone;
abstain when the terminal state is not readable.
"""
from devices.phone import PhoneConnection, PhoneUnavailable
from flywheel.judging import SystemVote
from flywheel.judging.terminal_checks import CheckNotReadable, read_and_compare

# Screens that mean the environment, not the model, stood in the way.
ENVIRONMENT_MARKERS = {
    "keeps stopping": "app crash", "isn't responding": "app not responding",
    "network unavailable": "network failure", "no internet": "network failure",
    "permission_allow_button": "permission dialog", "allow access": "permission dialog",
}


def environmental_cause(phone: PhoneConnection) -> str:
    """What on the phone right now explains a failure without blaming the model ('' if none)."""
    wifi = phone.shell("settings get global wifi_on").strip()
    data = phone.shell("settings get global mobile_data").strip()
    if wifi == "0" and data == "0":
        return "network failure (wifi and mobile data off)"
    screen = phone.dump_hierarchy().lower()
    for marker, cause in ENVIRONMENT_MARKERS.items():
        if marker in screen:
            return cause
    return ""


def environment_vote(phone: PhoneConnection, reason: str, results: list, unreachable: str) -> SystemVote | None:
    """Env_ERROR when the phone shows a broken environment now (`unreachable`: the cause to give when
    the phone does not answer, "" for none); None when it shows nothing of the kind."""
    try:
        cause = environmental_cause(phone)
    except PhoneUnavailable:
        cause = unreachable
    if not cause:
        return None
    return SystemVote("A", "env_error", f"{reason} — environment: {cause}",
                      details={"results": results, "environment": cause})


def system_a_vote(phone: PhoneConnection, verification: dict) -> SystemVote:
    checks = (verification or {}).get("terminal") or []
    if not checks:
        return SystemVote("A", "abstain", "the query names no terminal state readable over ADB")
    results = []
    try:
        for check in checks:
            passed, detail = read_and_compare(phone, check)
            results.append({"check": check, "passed": passed, "detail": detail})
    except CheckNotReadable as error:
        # Unreadable here, but a broken environment is a fact any phone shows (network off, a crash
        # dialog): the failure is the environment's whatever the task's own state (re-collected).
        return (environment_vote(phone, f"terminal state not readable ({error})", results, "")
                or SystemVote("A", "abstain", f"terminal state not readable: {error}", details={"results": results}))
    except PhoneUnavailable as error:
        return SystemVote("A", "abstain", f"phone unreachable at the end: {error}",
                          details={"results": results})
    failed = [r for r in results if not r["passed"]]
    if not failed:
        return SystemVote("A", "true", f"all {len(results)} terminal check(s) hold",
                          details={"results": results})
    reason = "; ".join(f"{r['check'].get('check')}: {r['detail']}" for r in failed)
    return (environment_vote(phone, reason, results, "phone unreachable")
            or SystemVote("A", "false", reason, details={"results": results}))
