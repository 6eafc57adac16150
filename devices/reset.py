"""Environment reset before a task (report §2.3.3 "physical state reset") and the per-step
system context (§2.3.7 "step-level context disambiguation").

A reset spec is JSON: {"force_stop": [pkgs] | "all", "clear": [pkgs], "home": true,
"clear_anomalies": false}. `reset_phone(phone, apps=[...])` without a spec force-stops and
`pm clear`s those apps, then presses Home. Given the phone's recorded baseline (devices/baseline.py),
every reset also puts its global settings back (airplane mode, Wi-Fi, Do Not Disturb, font size...),
so a task never starts from what the previous task left.
"""
from __future__ import annotations

from devices.anomaly_injection import clear_anomalies
from devices.baseline import restore_baseline

SPEC_KEYS = ("force_stop", "clear", "home", "clear_anomalies")
# System dialogs an earlier task can leave above Home (a permission request stays until it is
# answered, as on Android): Back answers "don't allow" and closes it before the next task starts.
DIALOG_PACKAGES = ("com.android.permissioncontroller", "com.google.android.permissioncontroller")
MAX_DIALOG_BACKS = 3


class ResetError(ValueError):
    pass


def default_spec(apps) -> dict:
    return {"force_stop": list(apps), "clear": list(apps), "home": True}


def validate_spec(spec) -> dict:
    if not isinstance(spec, dict):
        raise ResetError("a reset spec is a JSON object")
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise ResetError(f"unknown reset key {unknown[0]!r}; known: {', '.join(SPEC_KEYS)}")
    out = {"force_stop": spec.get("force_stop", []), "clear": spec.get("clear", []),
           "home": bool(spec.get("home", True)), "clear_anomalies": bool(spec.get("clear_anomalies", False))}
    for key in ("force_stop", "clear"):
        value = out[key]
        if key == "force_stop" and value == "all":
            continue
        if not isinstance(value, list) or not all(isinstance(p, str) and _is_package(p) for p in value):
            raise ResetError(f"{key} is a list of package names" + (" or \"all\"" if key == "force_stop" else ""))
    return out


def _is_package(name: str) -> bool:
    parts = name.split(".")
    return len(parts) >= 2 and all(part and (part[0].isalpha() or part[0] == "_")
                                   and all(c.isalnum() or c == "_" for c in part) for part in parts)


def reset_phone(phone, spec: dict | None = None, apps=None, baseline: dict | None = None) -> dict:
    """Run a reset, then restore `baseline` (Device.baseline) when given.
    Returns {"ok", "commands", "errors"}; a phone that does not answer raises."""
    spec = validate_spec(spec if spec is not None else default_spec(apps or []))
    commands, errors = [], []

    def run(command):
        commands.append(command)
        code, output = phone.shell_result(command)
        if code != 0 or "Error" in output or "Failed" in output:
            errors.append(f"{command}: {output.strip()[-200:] or f'exit {code}'}")

    force_stop = spec["force_stop"]
    if force_stop == "all":  # every third-party app, as the report's "all background processes"
        output = phone.shell("pm list packages -3")
        force_stop = [line.split(":", 1)[1].strip() for line in output.splitlines() if line.startswith("package:")]
    for package in force_stop:
        run(f"am force-stop {package}")
    for package in spec["clear"]:
        run(f"pm clear {package}")
    if spec["clear_anomalies"]:
        errors.extend(clear_anomalies(phone))
    if baseline:
        restored, failed = restore_baseline(phone, baseline)
        commands.extend(restored)
        errors.extend(failed)
    if spec["home"]:
        run("input keyevent KEYCODE_HOME")
        for _ in range(MAX_DIALOG_BACKS):
            shown = phone.dump_hierarchy()
            if not any(f'package="{package}"' in shown for package in DIALOG_PACKAGES):
                break
            run("input keyevent KEYCODE_BACK")
            run("input keyevent KEYCODE_HOME")
    return {"ok": not errors, "commands": commands, "errors": errors}


def step_context(phone) -> dict:
    """{"package", "activity", "activity_stack"} of the phone right now, for the step record."""
    context = phone.foreground()
    return {"package": context.get("package", ""), "activity": context.get("activity", ""),
            "activity_stack": list(context.get("activity_stack", []))}
