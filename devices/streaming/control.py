"""Who may steer a phone from the console, and how viewer input becomes executor actions.

Input is allowed only to the user whose console lease is the phone's open lease (admins take it
on the phone's page). Input goes through the same executor and safety audit as everything else.
"""
import logging
from datetime import timedelta

from accounts.roles import ADMIN, has_role
from devices import leases
from devices.executor import ActionExecutor
from devices.phone import PhoneConnection, PhoneUnavailable

log = logging.getLogger(__name__)

CONSOLE_LEASE_TTL = timedelta(minutes=10)  # renewed while the holder's screen socket is open
SYSTEM_BUTTONS = ("back", "home", "recents", "enter")


class InputRefused(Exception):
    """Input that must not run; `code` tells the page why (no_lease, stale_frame, bad_message)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def console_holder(user) -> str:
    return f"console:{user.username}"


def controller_lease(device, user):
    """The open lease when `user` took it from the console, else None."""
    lease = leases.current_lease(device)
    if lease and lease.holder == console_holder(user) and lease.user_id == user.pk:
        return lease
    return None


def can_control(device, user) -> bool:
    return has_role(user, ADMIN) and controller_lease(device, user) is not None


def take_control(device, user, force=False):
    """An admin takes the phone's lease (`force` ends whoever held it). LeaseRefused if held."""
    current = leases.current_lease(device)
    if current and current.holder == console_holder(user):
        leases.heartbeat(current, CONSOLE_LEASE_TTL)
        return current
    lease = leases.acquire(device, console_holder(user), user=user, ttl=CONSOLE_LEASE_TTL,
                           purpose="live control from the console", force=force)
    log.info("%s took the lease of %s%s", user.username, device, " (forced)" if force else "")
    return lease


def give_up_control(device, user) -> bool:
    lease = controller_lease(device, user)
    if lease is None:
        return False
    leases.release(lease)
    log.info("%s released the lease of %s", user.username, device)
    return True


def keep_control_alive(device, user) -> bool:
    lease = controller_lease(device, user)
    return bool(lease) and leases.heartbeat(lease, CONSOLE_LEASE_TTL)


# viewer input -> canonical action ---------------------------------------------------------------
def _number(message, name):
    value = message.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputRefused("bad_message", f"'{name}' must be a number")
    return value


def to_phone_point(message, prefix, frame_size, phone_size):
    """Canvas pixels of the frame the viewer acted on -> the phone's pixels (scaled by THAT frame)."""
    x, y = _number(message, prefix + "x"), _number(message, prefix + "y")
    frame_w, frame_h = frame_size
    if not (0 <= x <= frame_w and 0 <= y <= frame_h):
        raise InputRefused("bad_message", f"point ({x}, {y}) is outside the {frame_w}x{frame_h} frame")
    phone_w, phone_h = phone_size
    return [min(phone_w - 1, round(x * phone_w / frame_w)), min(phone_h - 1, round(y * phone_h / frame_h))]


def canonical_action(message, frame_size=None, phone_size=None) -> dict:
    """The executor's action for a viewer's input message; InputRefused('bad_message') if malformed."""
    kind = message.get("action")
    if kind in ("tap", "long_press", "swipe"):
        if frame_size is None:
            raise InputRefused("bad_message", f"'{kind}' needs the frame it was computed on")
        if kind == "tap":
            return {"action": "click", "point": to_phone_point(message, "", frame_size, phone_size)}
        if kind == "long_press":
            return {"action": "long_press", "point": to_phone_point(message, "", frame_size, phone_size)}
        return {"action": "swipe", "start": to_phone_point(message, "start_", frame_size, phone_size),
                "end": to_phone_point(message, "end_", frame_size, phone_size)}
    if kind == "text":
        text = message.get("text")
        if not isinstance(text, str) or not text or len(text) > 2000:
            raise InputRefused("bad_message", "'text' must be a non-empty string (at most 2000 characters)")
        return {"action": "type", "text": text}
    if kind == "key":
        button = message.get("key")
        if button not in SYSTEM_BUTTONS:
            raise InputRefused("bad_message", f"'key' must be one of {', '.join(SYSTEM_BUTTONS)}")
        return {"action": "system_button", "button": button}
    raise InputRefused("bad_message", "'action' must be tap, long_press, swipe, text or key")


def execute(device, action: dict, holder: str) -> dict:
    """Run the action through the executor (and its safety audit) while `holder` holds the phone's
    lease (confirmed before each input); a plain dict for the page."""
    lease = leases.current_lease(device)
    if lease is None or lease.holder != holder:
        return {"ok": False, "blocked": False, "error": "no_lease", "reason": "you no longer hold this phone's lease",
                "timings": {}}
    phone = PhoneConnection.for_device(device)
    result = ActionExecutor(phone, holder=holder, device=device, lease=lease,
                            lease_ttl=CONSOLE_LEASE_TTL).execute(action)
    if result.ok:
        error = ""
    elif result.lease_lost:
        error = "no_lease"
    elif result.blocked:
        error = "blocked"
    elif _phone_gone(phone):  # the executor folds PhoneUnavailable into its error text
        error = "phone_unavailable"
    else:
        error = "failed"
    return {"ok": bool(result.ok), "blocked": result.blocked, "error": error,
            "reason": result.reason or result.error, "timings": result.timings}


def _phone_gone(phone) -> bool:
    try:
        phone.shell("true", timeout=3)
    except PhoneUnavailable:
        return True
    return False
