"""Readiness profiles and the work requirements they satisfy."""

RESOLUTION_CLASSES = [("hd", 720), ("fhd", 1080), ("qhd", 10_000)]
RISK_ORDER = {"low": 0, "medium": 1, "high": 2}


def resolution_class(resolution: str) -> str:
    """hd / fhd / qhd by the screen's short side, e.g. '1080x2400' → 'fhd'."""
    try:
        short_side = min(int(side) for side in resolution.lower().split("x"))
    except ValueError:
        return ""
    for name, limit in RESOLUTION_CLASSES:
        if short_side <= limit:
            return name
    return ""


def unmet_requirements(profile: dict, requirements: dict) -> list[str]:
    """What a phone's readiness profile lacks for some work; empty when it satisfies it."""
    missing = []
    apps = set(profile.get("installed_apps") or [])
    for app in requirements.get("apps") or []:
        if app not in apps:
            missing.append(f"app {app}")
    accounts = {str(a).lower() for a in profile.get("accounts") or []}
    for account in requirements.get("accounts") or []:
        if not any(str(account).lower() in have for have in accounts):
            missing.append(f"account {account}")
    wanted = requirements.get("resolution")
    if wanted:
        have = profile.get("resolution", "")
        if wanted != have and wanted != resolution_class(have):
            missing.append(f"resolution {wanted}")
    if requirements.get("device_type") and requirements["device_type"] != profile.get("device_type"):
        missing.append(f"device type {requirements['device_type']}")
    max_risk = requirements.get("max_risk_level")
    if max_risk and RISK_ORDER.get(profile.get("risk_level"), 0) > RISK_ORDER.get(max_risk, 0):
        missing.append(f"risk level ≤ {max_risk}")
    return missing


def satisfies(profile: dict, requirements: dict) -> bool:
    return not unmet_requirements(profile, requirements or {})
