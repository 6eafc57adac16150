"""Step-level correction's fallback (§2.5.2): "cases with low Teacher confidence or hard scenarios
(risk control, complex account states, or severe UI deformation) are routed to human repair."

Pure functions over what the stored step shows; the words are those of the report.
"""
from __future__ import annotations

import re

MIN_UI_NODES = 3  # a dump with fewer nodes than this shows no usable page (severe UI deformation)

RISK_CONTROL = re.compile(
    r"\b(unusual activity|risk control|security (check|verification)|verify (it'?s you|your identity)|"
    r"(operation|account) (is )?restricted|too many attempts|suspicious)\b", re.I)
ACCOUNT_STATE = re.compile(
    r"\b(login expired|session (has )?expired|log ?in again|sign ?in (again|to continue)|captcha|"
    r"verification code|sms code|one-time (password|code)|payment password|pay password|"
    r"account (locked|suspended|frozen)|enter (your |the )?password)\b", re.I)
# Anomaly kinds recorded on a step that need a person, whatever the screen's words.
RISK_KINDS = ("risk_control",)
ACCOUNT_KINDS = ("login_expired", "captcha", "payment_authentication")


def hard_scenario(has_screenshot: bool, node_count: int, screen_text: str, anomaly_kind: str = "") -> str:
    """Why this step is a hard scenario for the Teacher ('' when it is not).

    Severe UI deformation: no screenshot, or a UI dump that is empty, broken or nearly empty.
    Risk control: the app restricted or is checking the account. Complex account states: a login
    that expired, a captcha, a code or a password to enter.
    """
    if not has_screenshot:
        return "severe UI deformation: the step has no screenshot"
    if node_count < MIN_UI_NODES:
        return f"severe UI deformation: the UI dump is empty or broken ({node_count} nodes)"
    if anomaly_kind in RISK_KINDS or RISK_CONTROL.search(screen_text or ""):
        found = RISK_CONTROL.search(screen_text or "")
        return f"risk control: {found.group(0)!r} on screen" if found else f"risk control: {anomaly_kind}"
    if anomaly_kind in ACCOUNT_KINDS or ACCOUNT_STATE.search(screen_text or ""):
        found = ACCOUNT_STATE.search(screen_text or "")
        return f"complex account state: {found.group(0)!r} on screen" if found else f"complex account state: {anomaly_kind}"
    return ""


def low_teacher_confidence(confidence: float | None, min_confidence: float) -> str:
    """Why the Teacher's correction is not trusted on its own ('' when it is)."""
    if confidence is None:
        return "low Teacher confidence: the Teacher gave none"
    if confidence < min_confidence:
        return f"low Teacher confidence ({confidence:.2f} < {min_confidence:.2f})"
    return ""


def route_to_human_repair(confidence: float | None, min_confidence: float, hard: str) -> str:
    """The report's fallback: a hard scenario, else low confidence, sends the step to a person."""
    return hard or low_teacher_confidence(confidence, min_confidence)
