"""States a real farm meets and cannot inject (§2.3.7): "for anomalous states that cannot be
injected—login-session expiry, CAPTCHAs, payment verification—we collected roughly 5,000 targeted
samples covering 14 classes: the model learns to stop and hand back control where human intervention
is required (e.g., CAPTCHAs), and to close or bypass safely skippable pages (ads, non-critical popups)."
Xiaomi-GUI-0 (App. B.1) likewise folds such causes into fourteen handoff semantics.

The fourteen classes here, the class a screen shows (read by the level-1 attribution markers, so
one place says what each state looks like), and the right behaviour on it: hand back (call_user,
with why the user must act) or close the skippable page (a tap on its own dismiss control).
Pure: the stored screen in, the class and the step a sample teaches out.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from devices.uitree import UiNode, all_nodes
from flywheel.rules.attribution_environment import screen_interference


class Behaviour(StrEnum):
    HAND_BACK = "hand_back"     # stop and hand control to the user (call_user)
    BYPASS = "bypass"           # close or skip the page, then go on with the task


@dataclass(frozen=True)
class HandbackClass:
    key: str                    # the attribution marker's type (attribution_environment.MARKERS)
    label: str
    behaviour: Behaviour
    why: str                    # what the user must do (hand back) or why the page can go (bypass)


HAND_BACK, BYPASS = Behaviour.HAND_BACK, Behaviour.BYPASS
CLASSES = (
    HandbackClass("login_expired", "Login session expired", HAND_BACK, "the login session expired and only the user can log in again"),
    HandbackClass("captcha", "CAPTCHA", HAND_BACK, "a CAPTCHA must be solved by the user"),
    HandbackClass("payment_authentication", "Payment verification", HAND_BACK, "the payment needs the user's payment password"),
    HandbackClass("risk_control", "Risk-control interception", HAND_BACK, "the app blocked the operation until the user verifies it with an SMS code"),
    HandbackClass("forced_update", "Forced update", HAND_BACK, "the app must be updated before it can be used, which the user decides"),
    HandbackClass("region_wall", "Region restriction", HAND_BACK, "the service is not available in this region"),
    HandbackClass("identity_verification", "Identity verification", HAND_BACK, "the app asks for the user's identity documents"),
    HandbackClass("account_restricted", "Account restricted", HAND_BACK, "the account is restricted and only the user can contact support"),
    HandbackClass("device_conflict", "Signed in elsewhere", HAND_BACK, "the account was signed in on another device and the user must sign in again"),
    HandbackClass("age_verification", "Age verification", HAND_BACK, "the content needs the user to confirm their age"),
    HandbackClass("service_maintenance", "Service under maintenance", HAND_BACK, "the service is under maintenance and cannot be used now"),
    HandbackClass("ad_popup", "Advertisement", BYPASS, "the advertisement can be closed safely"),
    HandbackClass("update_prompt", "Optional update prompt", BYPASS, "the update is optional and can be put off"),
    HandbackClass("rating_prompt", "Rating prompt", BYPASS, "the rating prompt can be dismissed safely"),
)
BY_KEY = {c.key: c for c in CLASSES}
# A dismiss control's words, the most specific first (a "Cancel" on a hand-back page is no bypass).
DISMISS_CONTROLS = ("close", "not now", "later", "skip", "no thanks", "dismiss", "cancel")


def state_on_screen(roots: list[UiNode]) -> tuple[HandbackClass, UiNode] | None:
    """The class the screen shows and the element that shows it; a hand-back state wins over a
    skippable page shown with it (the page can wait, the user cannot be skipped)."""
    found = []
    for _cause, (kind, nodes) in screen_interference(roots).items():
        klass = BY_KEY.get(kind)
        if klass is not None and nodes:
            found.append((klass.behaviour != HAND_BACK, klass, nodes[0]))
    if not found:
        return None
    found.sort(key=lambda item: item[0])
    return found[0][1], found[0][2]


def dismiss_control(roots: list[UiNode], package: str = "") -> UiNode | None:
    """The clickable element that closes a skippable page (in its package when given): by the
    first of DISMISS_CONTROLS its text or description says, exactly."""
    candidates = [n for n in all_nodes(roots) if n.clickable and n.enabled and n.area
                  and (not package or n.package == package)]
    for word in DISMISS_CONTROLS:
        for node in candidates:
            if word in (node.text.strip().lower(), node.desc.strip().lower()):
                return node
    return None


def right_step(klass: HandbackClass, marker: UiNode, roots: list[UiNode]) -> tuple[dict, dict] | None:
    """(the action, the five tags) the model should give on this screen; None for a skippable page
    without a control to close it (no sample: a guessed tap teaches nothing)."""
    shown = (marker.text or marker.desc or "").strip()[:80]
    # A quote must be on the screen (the consistency gate checks it); an element without words is named.
    observation = f'The screen shows "{shown}" over the app.' if shown else f"The screen shows a {klass.label.lower()} page."
    if klass.behaviour == HAND_BACK:
        reason = klass.why[0].upper() + klass.why[1:] + "."
        return ({"action": "call_user", "reason": reason},
                {"Observation": observation, "Reflection": "",
                 "Plan": f"This needs the user: {klass.why}. I must not act for them, so I stop here.",
                 "Decision": f"Hand control back to the user (call_user): {reason}", "Memory": ""})
    control = dismiss_control(roots, marker.package)
    if control is None:
        return None
    x, y = control.center
    name = (control.text or control.desc).strip()
    return ({"action": "click", "point": [x, y], "coords": "pixel"},
            {"Observation": observation, "Reflection": "",
             "Plan": f"{klass.why[0].upper() + klass.why[1:]}; close it and go on with the task.",
             "Decision": f'Tap "{name}" at ({x}, {y}) to close the {klass.label.lower()}.', "Memory": ""})
