"""Periodic environment teardown (ClawGUI §3.2.1: environments are "periodically restarted to
prevent state accumulation and maintain environment fidelity across long training runs").

A task's reset puts back what the task touched; what accumulates across tasks does not come back
with it: notifications, app data of apps no task clears, files, accounts. A phone that has run
TEARDOWN_EVERY_TASKS tasks since its last teardown, or shows drift (more notifications, a fuller
disk, an account its baseline did not hold), is restored to its recorded baseline between two of
its own tasks — the other phones go on, so no run waits. Everything goes through what any phone
answers over ADB: `pm`, `am`, `df`, `dumpsys`, the notification shade's own "Clear all" (tapped
through the audited executor) and the baseline's settings. An account a shell cannot remove is
left, said, and the phone quarantined until a person removes it.
"""
from __future__ import annotations

import re

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from devices import health
from devices.baseline import restore_baseline
from devices.executor import ActionExecutor
from devices.models import Device
from devices.phone import PhoneUnavailable
from devices.registry import read_accounts
from devices.uitree import all_nodes, parse_hierarchy

CLEAR_ALL = ("clear all", "clear all notifications")


def teardown_reasons(tasks_since: int, drift: dict, every: int, max_notifications: int,
                     max_storage_pct: int) -> list[str]:
    """Why a phone is due for teardown now (empty: it is not). Pure."""
    reasons = []
    if every and tasks_since >= every:
        reasons.append(f"{tasks_since} tasks since the last teardown")
    if drift.get("notifications") is not None and drift["notifications"] > max_notifications:
        reasons.append(f"{drift['notifications']} notifications")
    if drift.get("storage_used_pct") is not None and drift["storage_used_pct"] > max_storage_pct:
        reasons.append(f"storage {drift['storage_used_pct']}% used")
    if drift.get("extra_accounts"):
        reasons.append(f"accounts its baseline did not hold: {', '.join(drift['extra_accounts'])}")
    return reasons


def read_drift(phone, device: Device) -> dict:
    """What accumulated: {"notifications", "storage_used_pct" (None: unreadable), "extra_accounts"}."""
    notifications = phone.shell("dumpsys notification").count("NotificationRecord(")
    used = re.search(r"(\d+)%\s+/data\s*$", phone.shell("df /data"), re.MULTILINE)
    extra = sorted(set(read_accounts(phone)) - set(device.baseline_accounts or [])) if device.baseline_accounts else []
    return {"notifications": notifications, "storage_used_pct": int(used.group(1)) if used else None,
            "extra_accounts": extra}


def due(phone, device: Device) -> list[str]:
    return teardown_reasons(device.tasks_since_teardown, read_drift(phone, device), settings.TEARDOWN_EVERY_TASKS,
                            settings.TEARDOWN_MAX_NOTIFICATIONS, settings.TEARDOWN_MAX_STORAGE_PCT)


def _clear_notifications(phone, device, run) -> None:
    """The shade's own "Clear all", as a person would (a shell cannot dismiss other apps' notifications)."""
    run("cmd statusbar expand-notifications")
    shown = phone.dump_hierarchy()
    button = next((n for n in all_nodes(parse_hierarchy(shown)) if n.clickable
                   and (n.text or n.desc).strip().lower() in CLEAR_ALL), None)
    if button is not None:
        result = ActionExecutor(phone, holder=f"teardown:{device.pk}", device=device).execute(
            {"action": "click", "point": list(button.center), "coords": "pixel"}, hierarchy_xml=shown)
        if not result.ok:
            raise RuntimeError(f"clear all: {result.reason or result.error}")
    run("cmd statusbar collapse")


def tear_down(phone, device: Device, reasons: list[str]) -> dict:
    """Restore the phone to its recorded baseline; returns the record kept on the phone."""
    commands, problems = [], []

    def run(command):
        commands.append(command)
        code, output = phone.shell_result(command)
        if code != 0 or output.lstrip().startswith("Error"):
            problems.append(f"{command}: {output.strip()[-200:] or f'exit {code}'}")

    third_party = [line.split(":", 1)[1].strip() for line in phone.shell("pm list packages -3").splitlines()
                   if line.startswith("package:")]
    for package in third_party:   # their data as at the baseline: installed, never opened
        run(f"pm clear {package}")
    try:
        _clear_notifications(phone, device, run)
    except RuntimeError as error:
        problems.append(str(error))
    if device.baseline:
        restored, failed = restore_baseline(phone, device.baseline)
        commands += restored
        problems += failed
    run("input keyevent KEYCODE_HOME")
    after = read_drift(phone, device)
    if after["extra_accounts"]:
        problems.append(f"accounts a shell cannot remove: {', '.join(after['extra_accounts'])}")
    record = {"at": timezone.now().isoformat(), "reasons": reasons, "commands": commands, "problems": problems,
              "after": after}
    Device.objects.filter(pk=device.pk).update(tasks_since_teardown=0, last_teardown=record)
    device.tasks_since_teardown, device.last_teardown = 0, record
    if after["extra_accounts"]:
        # Not "auto": a passing health check must not re-admit it; a person removes the account first.
        health.quarantine(device, by="teardown", reason=f"teardown: {problems[-1]}; a person must remove them"[:300])
    return record


def maybe_tear_down(phone, device: Device) -> dict | None:
    """Between two of its tasks: tear the phone down when it is due (None when it is not)."""
    try:
        reasons = due(phone, device)
        return tear_down(phone, device, reasons) if reasons else None
    except PhoneUnavailable:
        return None   # the task that follows finds it lost; the health check deals with it


def count_task(device: Device) -> None:
    Device.objects.filter(pk=device.pk).update(tasks_since_teardown=F("tasks_since_teardown") + 1)
    device.tasks_since_teardown += 1
