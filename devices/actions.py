"""The action space (report §3.1.2, Table 3): the 14 actions, their JSON shape, validation and
THE one coordinate conversion.

Canonical JSON, one object per action; every action may carry "coords" = "pixel" (default),
"fraction" ([0, 1] of the screen) or "thousandths" ([0, 1000], BlueLM-GUI's public harness):

    click             {"action": "click", "point": [x, y]}
    double_click      {"action": "double_click", "point": [x, y]}
    type              {"action": "type", "text": "...", "point": [x, y]}   point optional: focused field
    system_button     {"action": "system_button", "button": "back"}        see SYSTEM_BUTTONS
    swipe             {"action": "swipe", "start": [x, y], "end": [x, y]}
                      {"action": "swipe", "direction": "up", "point": [x, y], "distance": 0.4}
                      (direction is where the finger moves; point defaults to the screen centre,
                      distance is a fraction of the screen along that axis)
    drag              {"action": "drag", "start": [x, y], "end": [x, y]}
    long_press        {"action": "long_press", "point": [x, y], "duration_ms": 800}
    open              {"action": "open", "app": "a note-taking app"}       a need or an app name
    set_scroll_widget {"action": "set_scroll_widget", "point": [x, y], "value": "07"}
    take_notes        {"action": "take_notes", "text": "..."}
    wait              {"action": "wait", "seconds": 2}
    terminate         {"action": "terminate", "status": "success", "answer": "..."}
    clarify           {"action": "clarify", "question": "...", "choices": ["a", "b"]}
    call_user         {"action": "call_user", "reason": "..."}

swipe, drag and long_press also accept "duration_ms".
"""
from __future__ import annotations

import math
from numbers import Real

TAP_ACTIONS = ("click", "double_click", "type", "system_button")
GESTURE_ACTIONS = ("swipe", "drag", "long_press")
COMPOSITE_ACTIONS = ("open", "set_scroll_widget", "take_notes")
# What the executor adds to an action to record how it ran (open → the package it resolved to);
# not part of what a model emits, so validation of a recorded action leaves them out.
RESOLVED_FIELDS = ("package",)
CONTROL_ACTIONS = ("wait", "terminate", "clarify", "call_user")
ACTIONS = TAP_ACTIONS + GESTURE_ACTIONS + COMPOSITE_ACTIONS + CONTROL_ACTIONS
# Actions that change what is on the screen: each passes the safety audit first.
SCREEN_ACTIONS = TAP_ACTIONS + GESTURE_ACTIONS + ("open", "set_scroll_widget")

SYSTEM_BUTTONS = {  # name -> Android key event
    "back": "KEYCODE_BACK", "home": "KEYCODE_HOME", "menu": "KEYCODE_MENU", "enter": "KEYCODE_ENTER",
    "recents": "KEYCODE_APP_SWITCH", "power": "KEYCODE_POWER", "volume_up": "KEYCODE_VOLUME_UP",
    "volume_down": "KEYCODE_VOLUME_DOWN", "delete": "KEYCODE_DEL", "search": "KEYCODE_SEARCH",
    "screenshot": "KEYCODE_SYSRQ",
}
COORDS = ("pixel", "fraction", "thousandths")
DIRECTIONS = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}
TERMINATE_STATUSES = ("success", "failure")

DEFAULT_SWIPE_DISTANCE = 0.4        # of the screen along the swipe axis
DEFAULT_LONG_PRESS_MS = 800
DURATION_LIMITS_MS = (50, 10_000)
DEFAULT_WAIT_SECONDS = 2.0
MAX_WAIT_SECONDS = 30.0             # a longer wait is clamped: a step must not stall a phone
MAX_TEXT_LENGTH = 2000

# Fields each action may carry besides "action", "coords" and "note" (required ones first).
FIELDS = {
    "click": ("point",), "double_click": ("point",), "type": ("text", "point"),
    "system_button": ("button",), "swipe": ("start", "end", "point", "direction", "distance", "duration_ms"),
    "drag": ("start", "end", "duration_ms"), "long_press": ("point", "duration_ms"), "open": ("app",),
    "set_scroll_widget": ("point", "value"), "take_notes": ("text",), "wait": ("seconds",),
    "terminate": ("status", "answer"), "clarify": ("question", "choices"), "call_user": ("reason",),
}
COMMON_FIELDS = ("action", "coords", "note")

# Table 3's words, with the JSON to emit: what a system prompt lists as the action space.
DESCRIPTIONS = {
    "click": ("Tap at coordinate (x, y).", {"action": "click", "point": [540, 1200]}),
    "double_click": ("Tap twice quickly, for zooming or text selection.", {"action": "double_click", "point": [540, 1200]}),
    "type": ("Enter text into the widget at a given coordinate (or the focused one).",
             {"action": "type", "point": [540, 300], "text": "milk"}),
    "system_button": (f"Press a device key: {', '.join(SYSTEM_BUTTONS)}.", {"action": "system_button", "button": "back"}),
    "swipe": ("Slide between two coordinates to scroll or turn a page (or give a direction).",
              {"action": "swipe", "start": [540, 1800], "end": [540, 600]}),
    "drag": ("Move an element to a target coordinate and release.", {"action": "drag", "start": [200, 900], "end": [800, 900]}),
    "long_press": ("Hold to open a context menu or enter an editing state.", {"action": "long_press", "point": [540, 1200]}),
    "open": ("Declare a functional need and let the device resolve it to an installed app.",
             {"action": "open", "app": "a note-taking app"}),
    "set_scroll_widget": ("Set a wheel picker to a target value in one call.",
                          {"action": "set_scroll_widget", "point": [540, 1400], "value": "07"}),
    "take_notes": ("Save useful screen content to memory; credentials and card numbers are not allowed.",
                   {"action": "take_notes", "text": "Cheapest: JBL Tune 510BT, $49"}),
    "wait": ("Skip one step while a page loads.", {"action": "wait", "seconds": 2}),
    "terminate": ("End the trajectory with success or failure.", {"action": "terminate", "status": "success", "answer": ""}),
    "clarify": ("Ask a question or confirmation, with optional choices.",
                {"action": "clarify", "question": "Which Sam?", "choices": ["Sam Lee", "Sam Wu"]}),
    "call_user": ("Pause and hand over control, with a reason.", {"action": "call_user", "reason": "Payment needs you"}),
}


class ActionError(ValueError):
    """An action that cannot be executed as given; `field` names the culprit."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def to_pixels(point, coords: str, width: int, height: int) -> tuple[int, int]:
    """THE coordinate conversion: a point in `coords` units → integer pixels (not clamped)."""
    x, y = _pair(point, "point")
    if coords == "pixel":
        scale_x, scale_y = 1.0, 1.0
    elif coords == "fraction":
        scale_x, scale_y = float(width), float(height)
    elif coords == "thousandths":
        scale_x, scale_y = width / 1000.0, height / 1000.0
    else:
        raise ActionError("coords", f"unknown coordinate system {coords!r}; use one of {', '.join(COORDS)}")
    x, y = x * scale_x, y * scale_y
    if not (math.isfinite(x) and math.isfinite(y)):  # e.g. 1e308 of the screen's width
        raise ActionError("point", f"point [{point[0]}, {point[1]}] in {coords} is too large to be on any screen")
    return int(round(x)), int(round(y))


def normalize_action(action, width: int, height: int) -> dict:
    """A validated copy of `action` with every point in on-screen pixels and "coords": "pixel".

    Points outside the screen are clamped to its edge and the copy gets a "note" saying so.
    Raises ActionError(field, message) for anything that cannot be executed.
    """
    if not isinstance(action, dict):
        raise ActionError("action", f"an action is a JSON object, not {type(action).__name__}")
    name = action.get("action")
    if name not in ACTIONS:
        raise ActionError("action", f"unknown action {name!r}; the 14 actions are: {', '.join(ACTIONS)}")
    allowed = set(FIELDS[name]) | set(COMMON_FIELDS)
    unknown = sorted(set(action) - allowed)
    if unknown:
        raise ActionError(unknown[0], f"{name} has no field {unknown[0]!r}; it takes {', '.join(FIELDS[name])}")
    coords = action.get("coords", "pixel")
    if coords not in COORDS:
        raise ActionError("coords", f"unknown coordinate system {coords!r}; use one of {', '.join(COORDS)}")
    if width <= 0 or height <= 0:
        raise ActionError("screen", f"bad screen size {width}x{height}")

    out = {"action": name}
    notes = []

    def point(field, required=True, default=None):
        if action.get(field) is None:
            if required:
                raise ActionError(field, f"{name} needs {field} as [x, y]")
            return default
        x, y = to_pixels(_pair(action[field], field), coords, width, height)
        clamped = (min(max(x, 0), width - 1), min(max(y, 0), height - 1))
        if clamped != (x, y):
            notes.append(f"{field} [{x}, {y}] was off the {width}x{height} screen; clamped to "
                         f"[{clamped[0]}, {clamped[1]}]")
        return list(clamped)

    if name in ("click", "double_click", "long_press", "set_scroll_widget"):
        out["point"] = point("point")
    if name == "type":
        out["text"] = _text(action, "text", allow_empty=False)
        if action.get("point") is not None:
            out["point"] = point("point")
    elif name == "system_button":
        button = action.get("button")
        button = button.strip().lower() if isinstance(button, str) else button
        if button not in SYSTEM_BUTTONS:
            raise ActionError("button", f"unknown button {action.get('button')!r}; "
                                        f"use one of {', '.join(SYSTEM_BUTTONS)}")
        out["button"] = button
    elif name == "swipe":
        _swipe(action, out, point, width, height)
    elif name == "drag":
        out["start"], out["end"] = point("start"), point("end")
    elif name == "open":
        out["app"] = _text(action, "app", allow_empty=False)
    elif name == "set_scroll_widget":
        value = action.get("value")
        if isinstance(value, bool) or not isinstance(value, (str, Real)) or str(value).strip() == "":
            raise ActionError("value", "set_scroll_widget needs the target value as text or a number")
        out["value"] = str(value).strip()
    elif name == "take_notes":
        out["text"] = _text(action, "text", allow_empty=False)
    elif name == "wait":
        seconds = action.get("seconds", DEFAULT_WAIT_SECONDS)
        if not _is_number(seconds) or seconds < 0:
            raise ActionError("seconds", f"wait needs a number of seconds >= 0, not {seconds!r}")
        if seconds > MAX_WAIT_SECONDS:
            notes.append(f"wait of {seconds} s clamped to {MAX_WAIT_SECONDS:g} s")
            seconds = MAX_WAIT_SECONDS
        out["seconds"] = float(seconds)
    elif name == "terminate":
        status = action.get("status")
        if status not in TERMINATE_STATUSES:
            raise ActionError("status", f"terminate needs status 'success' or 'failure', not {status!r}")
        out["status"] = status
        if action.get("answer") is not None:
            out["answer"] = _text(action, "answer", allow_empty=True)
    elif name == "clarify":
        out["question"] = _text(action, "question", allow_empty=False)
        choices = action.get("choices")
        if choices is not None:
            if not isinstance(choices, list) or not all(isinstance(c, str) and c.strip() for c in choices):
                raise ActionError("choices", "choices is a list of non-empty strings")
            out["choices"] = list(choices)
    elif name == "call_user":
        out["reason"] = _text(action, "reason", allow_empty=False)

    if name in ("swipe", "drag", "long_press"):
        default = DEFAULT_LONG_PRESS_MS if name == "long_press" else None
        duration = action.get("duration_ms", default)
        if duration is not None:
            low, high = DURATION_LIMITS_MS
            if not _is_number(duration) or not low <= duration <= high:
                raise ActionError("duration_ms", f"duration_ms is a number of milliseconds in [{low}, {high}]")
            out["duration_ms"] = int(duration)
    if name in SCREEN_ACTIONS and any(key in out for key in ("point", "start", "end")):
        out["coords"] = "pixel"
    if notes:
        out["note"] = "; ".join(notes)
    return out


def _swipe(action, out, point, width, height):
    direction = action.get("direction")
    has_ends = action.get("start") is not None or action.get("end") is not None
    if has_ends and direction is not None:
        raise ActionError("direction", "give either start and end, or a direction, not both")
    if has_ends:
        out["start"], out["end"] = point("start"), point("end")
        return
    if direction is None:
        raise ActionError("start", "swipe needs start and end, or a direction (up, down, left, right)")
    direction = direction.strip().lower() if isinstance(direction, str) else direction
    if direction not in DIRECTIONS:
        raise ActionError("direction", f"unknown direction {action['direction']!r}; use up, down, left or right")
    distance = action.get("distance", DEFAULT_SWIPE_DISTANCE)
    if not _is_number(distance) or not 0 < distance <= 1:
        raise ActionError("distance", f"distance is a fraction of the screen in (0, 1], not {distance!r}")
    start = point("point", required=False, default=[width // 2, height // 2])
    dx, dy = DIRECTIONS[direction]
    end = [start[0] + round(dx * distance * width), start[1] + round(dy * distance * height)]
    end = [min(max(end[0], 0), width - 1), min(max(end[1], 0), height - 1)]
    out["start"], out["end"], out["direction"] = start, end, direction


def _pair(value, field):
    if (isinstance(value, (list, tuple)) and len(value) == 2 and all(_is_number(v) for v in value)):
        return float(value[0]), float(value[1])
    raise ActionError(field, f"{field} must be [x, y] with two numbers, not {value!r}")


def _is_number(value) -> bool:
    if not isinstance(value, Real) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float (JSON allows 1e400 written out)
        return False


def _text(action, field, allow_empty):
    value = action.get(field)
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise ActionError(field, f"{action['action']} needs {field} as a non-empty string")
    if len(value) > MAX_TEXT_LENGTH:
        raise ActionError(field, f"{field} is longer than {MAX_TEXT_LENGTH} characters")
    return value
