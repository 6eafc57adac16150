"""The agent protocol (§3.1.2): one input format, one output format, one action space.

Input at step t: the system prompt P (the 14 actions and the rules), the goal g, the full text
history H_t of earlier steps (reasoning and actions), and only the last K screenshots.
Output: the five-tag structured reasoning of §2.3.6 plus exactly one action as strict JSON:

    [Observation] ...   [Reflection] ...   [Plan] ...   [Decision] ...   [Memory] ...
    <tool_call>{"action": "click", "point": [540, 200], "coords": "thousandths"}</tool_call>

`parse_output` accepts what models really emit (tags in any case, extra whitespace, the JSON in
<tool_call> tags, a code fence or bare, Qwen-style {"name", "arguments"} wrappers, coordinates
as pixels, [0, 1] or [0, 1000]) and rejects everything else with a ProtocolError that says
exactly what is wrong. It never raises anything else.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from devices.actions import ACTIONS, COORDS, FIELDS, SYSTEM_BUTTONS, ActionError, normalize_action
from flywheel.endpoints.frames import user_content
from flywheel.rules.stops import AGENT_STOPS, ASKING_ACTIONS, ENDING_ACTIONS  # noqa: F401 (Table 3, defined once)

TAGS = ("Observation", "Reflection", "Plan", "Decision", "Memory")
REQUIRED_TAGS = ("Observation", "Plan", "Decision")  # Reflection only when a plan failed (§2.3.6)
DEFAULT_K = 5
DEFAULT_COORDS = "thousandths"
POINT_FIELDS = ("point", "start", "end")
# Spellings models use for the canonical fields.
FIELD_ALIASES = {"coordinate": "point", "position": "point", "start_point": "start",
                 "end_point": "end", "coordinate2": "end", "action_type": "action"}
MAX_OUTPUT_CHARS = 50_000


class ProtocolError(ValueError):
    """Model output that does not follow the protocol; the message says what and where."""


@dataclass
class HistoryEntry:
    """One earlier step as text: its reasoning tags and the action that ran."""

    cot: dict
    action: dict
    reply: str = ""      # the user's answer when the action was a clarify


@dataclass
class ParsedOutput:
    cot: dict            # tag -> text, all five keys present ("" when absent)
    action: dict         # canonical action JSON with an explicit "coords"
    notes: list = field(default_factory=list)  # what was tolerated (alias, inferred coords)


# -- input -----------------------------------------------------------------------------------

def action_space_text() -> str:
    lines = [
        "click {\"point\": [x, y]}: tap at a point.",
        "double_click {\"point\": [x, y]}: tap twice quickly (zoom, text selection).",
        "type {\"text\": \"...\", \"point\"?: [x, y]}: enter text into the widget at the point "
        "(or the focused field).",
        f"system_button {{\"button\": one of {', '.join(SYSTEM_BUTTONS)}}}: press a device key.",
        "swipe {\"start\": [x, y], \"end\": [x, y]} or {\"direction\": up|down|left|right, "
        "\"point\"?: [x, y], \"distance\"?: 0-1}: slide to scroll or turn a page "
        "(direction is where the finger moves).",
        "drag {\"start\": [x, y], \"end\": [x, y]}: move an element and release.",
        "long_press {\"point\": [x, y], \"duration_ms\"?: n}: hold for a context menu or editing.",
        "open {\"app\": \"a need or an app name\"}: the device resolves it to an installed app.",
        "set_scroll_widget {\"point\": [x, y], \"value\": \"...\"}: set a wheel picker in one call.",
        "take_notes {\"text\": \"...\"}: save screen content to memory (never credentials or card "
        "numbers).",
        "wait {\"seconds\"?: n}: skip one step while a page loads.",
        "terminate {\"status\": success|failure, \"answer\"?: \"...\"}: end the task.",
        "clarify {\"question\": \"...\", \"choices\"?: [\"...\"]}: ask the user when the "
        "instruction is ambiguous.",
        "call_user {\"reason\": \"...\"}: hand control back at a payment, deletion, login or "
        "CAPTCHA the user must decide.",
    ]
    assert len(lines) == len(ACTIONS)
    return "\n".join(f"- {line}" for line in lines)


def system_prompt(coords: str = DEFAULT_COORDS, known_path: dict | None = None) -> str:
    units = {"pixel": "screen pixels", "fraction": "fractions of the screen in [0, 1]",
             "thousandths": "thousandths of the screen in [0, 1000]"}[coords]
    prompt = (
        "You are a mobile GUI agent operating an Android phone for the user.\n"
        "At each step you see the goal, the history of your earlier steps and the latest "
        "screenshots; you reply with your reasoning and exactly one action.\n\n"
        f"Actions (JSON; coordinates are {units}, (0, 0) is the top-left corner):\n"
        f"{action_space_text()}\n\n"
        "Reply in exactly this format, the five tags in this order, then one JSON action:\n"
        "[Observation] what the current screen shows\n"
        "[Reflection] only when the screen contradicts your previous plan: what went wrong\n"
        "[Plan] the next steps toward the goal\n"
        "[Decision] the one concrete action, in words\n"
        "[Memory] facts to carry to later steps (or nothing)\n"
        "<tool_call>{\"action\": \"...\", ...}</tool_call>\n\n"
        "Rules: one action per step; the [Decision] must describe exactly the action you emit; "
        "close unrelated pop-ups; if the same action left the screen unchanged twice, change "
        "approach; ask (clarify) when the instruction has several readings; hand over "
        "(call_user) before payments, deletions, logins and CAPTCHAs; terminate when done."
    )
    if known_path and known_path.get("summary"):
        # Schema-guided mode (§2.3.4): the known path is injected so the model follows it.
        prompt += f"\n\nKnown operation path ({known_path.get('mode', 'tap')} mode): {known_path['summary']}"
    return prompt


def history_text(history: list[HistoryEntry]) -> str:
    if not history:
        return "No earlier steps."
    return "\n".join(f"Step {i}: {format_output(entry.cot, entry.action, compact=True)}"
                     + (f" The user answered: {entry.reply}" if entry.reply else "")
                     for i, entry in enumerate(history, start=1))


def build_messages(goal: str, history: list[HistoryEntry], screenshots: list[bytes],
                   k: int = DEFAULT_K, coords: str = DEFAULT_COORDS, known_path: dict | None = None,
                   context: dict | None = None) -> list[dict]:
    """OpenAI chat messages: all past text, the last `k` screenshots as base64 data URLs."""
    recent = screenshots[-k:] if k > 0 else []
    text = f"Goal: {goal}\n\nHistory:\n{history_text(history)}"
    if context:
        # Step-level context disambiguation (§2.3.7): the foreground app and activity.
        text += "\n\nDevice: " + ", ".join(f"{key}={value}" for key, value in context.items() if value)
    text += f"\n\nThe last {len(recent)} screenshot(s) follow, oldest first; the last is the current screen."
    return [{"role": "system", "content": system_prompt(coords, known_path)},
            {"role": "user", "content": user_content(text, recent)}]


# -- output ------------------------------------------------------------------------------------

def format_output(cot: dict, action: dict, compact: bool = False) -> str:
    """The canonical output text (what models are trained to emit; SFT targets use it)."""
    sep = " " if compact else "\n"
    parts = [f"[{tag}] {str(cot.get(tag, '') or '').strip()}" for tag in TAGS]
    return sep.join(parts) + sep + "<tool_call>" + json.dumps(action, ensure_ascii=False) + "</tool_call>"


_TAG_RE = re.compile(r"\[\s*(" + "|".join(TAGS) + r")\s*\]:?", re.IGNORECASE)  # "[Plan]:" too
_TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.IGNORECASE | re.DOTALL)
_FENCE_RE = re.compile(r"```[ \t]*(?:json)?[ \t]*\n?(.*?)```", re.IGNORECASE | re.DOTALL)


def parse_output(text, screen: tuple[int, int] | None = None,
                 default_coords: str = DEFAULT_COORDS) -> ParsedOutput:
    """Model output → ParsedOutput, or ProtocolError naming what is wrong. Nothing else escapes."""
    try:
        return _parse(text, screen, default_coords)
    except ProtocolError:
        raise
    except Exception as error:  # a bug here must not take a collection run down with it
        raise ProtocolError(f"unparseable output ({type(error).__name__}: {error})") from error


def _parse(text, screen, default_coords) -> ParsedOutput:
    if not isinstance(text, str):
        raise ProtocolError(f"output must be text, not {type(text).__name__}")
    if len(text) > MAX_OUTPUT_CHARS:
        raise ProtocolError(f"output is {len(text)} characters; the limit is {MAX_OUTPUT_CHARS}")
    raw_json, rest = _extract_action_json(text)
    cot = _extract_tags(rest)
    notes = []
    action = _decode_action(raw_json, notes)
    action = _resolve_coords(action, screen, default_coords, notes)
    width, height = screen or (1000, 1000)
    try:  # the action space's own validation (devices/actions.py): one rule set for all
        normalize_action(action, width, height)
    except ActionError as error:
        raise ProtocolError(f"invalid {action.get('action')} action: {error}") from None
    return ParsedOutput(cot=cot, action=action, notes=notes)


def _extract_action_json(text: str) -> tuple[str, str]:
    """(the action's JSON text, the output without it). Exactly one action is allowed."""
    for pattern, where in ((_TOOL_CALL_RE, "<tool_call> blocks"), (_FENCE_RE, "code fences")):
        found = pattern.findall(text)
        if len(found) > 1:
            raise ProtocolError(f"exactly one action expected, found {len(found)} {where}")
        if found:
            return found[0].strip(), pattern.sub(" ", text, count=1)
    if re.search(r"<tool_call>", text, re.IGNORECASE):
        raise ProtocolError("<tool_call> is opened but never closed with </tool_call>")
    objects = _bare_json_objects(text)
    if not objects:
        raise ProtocolError("no action found: expected one JSON object with an \"action\" field")
    if len(objects) > 1:
        raise ProtocolError(f"exactly one action expected, found {len(objects)} JSON objects")
    start, end = objects[0]
    return text[start:end], text[:start] + " " + text[end:]


def _bare_json_objects(text: str) -> list[tuple[int, int]]:
    decoder, spans, position = json.JSONDecoder(), [], 0
    while (start := text.find("{", position)) != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            position = start + 1
            continue
        if isinstance(value, dict):
            spans.append((start, end))
        position = end
    return spans


def _extract_tags(text: str) -> dict:
    matches = list(_TAG_RE.finditer(text))
    cot, seen = dict.fromkeys(TAGS, ""), set()
    for i, match in enumerate(matches):
        tag = next(t for t in TAGS if t.lower() == match.group(1).lower())
        if tag in seen:
            raise ProtocolError(f"tag [{tag}] appears more than once")
        seen.add(tag)
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        cot[tag] = " ".join(text[match.end():end].split())
    missing = [tag for tag in REQUIRED_TAGS if not cot[tag]]
    if missing:
        raise ProtocolError("missing or empty tag(s): " + ", ".join(f"[{tag}]" for tag in missing))
    return cot


def _decode_action(raw: str, notes: list) -> dict:
    try:
        value = json.loads(raw)
    except ValueError as error:
        raise ProtocolError(f"the action is not valid JSON: {error}") from None
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, dict):
        raise ProtocolError(f"the action must be a JSON object, not {type(value).__name__}")
    if "action" not in value and isinstance(value.get("arguments"), dict):
        notes.append(f"unwrapped tool call {value.get('name')!r}")  # {"name": .., "arguments": {..}}
        value = value["arguments"]
    action = {}
    for key, item in value.items():
        canonical = FIELD_ALIASES.get(key, key)
        if canonical != key:
            notes.append(f"read {key!r} as {canonical!r}")
        if canonical in action:
            raise ProtocolError(f"field {canonical!r} is given twice")
        action[canonical] = item
    name = action.get("action")
    if not isinstance(name, str):
        raise ProtocolError("the action object needs an \"action\" field naming one of the 14 actions")
    action["action"] = name.strip().lower()
    if action["action"] not in ACTIONS:
        raise ProtocolError(f"unknown action {name!r}; the 14 actions are: {', '.join(ACTIONS)}")
    unknown = sorted(set(action) - set(FIELDS[action["action"]]) - {"action", "coords", "note"})
    if unknown:
        raise ProtocolError(f"{action['action']} has no field {unknown[0]!r}; "
                            f"it takes {', '.join(FIELDS[action['action']])}")
    for key in POINT_FIELDS:
        if key in action:
            action[key] = _point(action[key], key)
    return action


def _point(value, key):
    if isinstance(value, str):  # "(540, 200)" or "540,200"
        numbers = re.fullmatch(r"\s*[\[(]?\s*(-?[\d.]+)\s*,\s*(-?[\d.]+)\s*[\])]?\s*", value)
        if not numbers:
            raise ProtocolError(f"{key} must be [x, y], not {value!r}")
        try:
            value = [float(numbers.group(1)), float(numbers.group(2))]
        except ValueError:
            raise ProtocolError(f"{key} must be [x, y], not {value!r}") from None
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise ProtocolError(f"{key} must be [x, y] with two numbers, not {value!r}")
    if not all(math.isfinite(v) for v in value):
        raise ProtocolError(f"{key} has a non-finite coordinate: {value!r}")
    if any(v < 0 for v in value):
        raise ProtocolError(f"{key} has a negative coordinate: {list(value)}")
    return [int(v) if float(v).is_integer() and not (0 < abs(v) < 1) else v for v in value]


def _resolve_coords(action: dict, screen, default_coords: str, notes: list) -> dict:
    """Make the coordinate system explicit: as declared, else inferred from the values."""
    values = [v for key in POINT_FIELDS if key in action for v in action[key]]
    if not values:
        if "coords" in action and action["coords"] not in COORDS:
            raise ProtocolError(f"unknown coords {action['coords']!r}; use one of {', '.join(COORDS)}")
        return action
    coords = action.get("coords")
    if coords is None:
        if all(v <= 1 for v in values) and any(isinstance(v, float) for v in values):
            coords = "fraction"
        elif max(values) <= 1000 and default_coords != "pixel":
            coords = default_coords
        else:
            coords = "pixel"
        notes.append(f"coordinates read as {coords}")
    elif coords not in COORDS:
        raise ProtocolError(f"unknown coords {coords!r}; use one of {', '.join(COORDS)}")
    limits = {"fraction": (1, 1), "thousandths": (1000, 1000)}.get(coords) or screen
    if limits:
        for key in POINT_FIELDS:
            if key in action and (action[key][0] > limits[0] or action[key][1] > limits[1]):
                what = {"fraction": "[0, 1]", "thousandths": "[0, 1000]"}.get(
                    coords, f"the {limits[0]}x{limits[1]} screen")
                raise ProtocolError(f"{key} {action[key]} is outside {what} ({coords} coordinates)")
    return {**action, "coords": coords}


def describe_action(action: dict, label: str | None = None) -> str:
    """A [Decision] sentence that says exactly what `action` does (the gate checks this)."""
    name = action.get("action")
    target = f" \"{label}\"" if label else ""
    at = (f" at ({action['point'][0]:g}, {action['point'][1]:g})"
          if isinstance(action.get("point"), list) and len(action["point"]) == 2 else "")
    if name == "click":
        return f"Tap{target}{at}"
    if name == "double_click":
        return f"Double-tap{target}{at}"
    if name == "long_press":
        return f"Long press{target}{at}"
    if name == "type":
        return f"Type \"{action.get('text', '')}\"" + (f" into{target}" if label else "") + at
    if name == "system_button":
        return f"Press the {action.get('button')} button"
    if name in ("swipe", "drag"):
        verb = "Swipe" if name == "swipe" else "Drag"
        if action.get("direction"):
            return f"{verb} {action['direction']}{' on' + target if label else ''} to scroll"
        start, end = action.get("start") or [0, 0], action.get("end") or [0, 0]
        return f"{verb} from ({start[0]:g}, {start[1]:g}) to ({end[0]:g}, {end[1]:g})"
    if name == "open":
        return f"Open the app for \"{action.get('app')}\""
    if name == "set_scroll_widget":
        return f"Set the picker{target}{at} to \"{action.get('value')}\""
    if name == "take_notes":
        return f"Take a note: \"{action.get('text')}\""
    if name == "wait":
        return f"Wait {action.get('seconds', 2):g} s for the page to load"
    if name == "terminate":
        outcome = "complete" if action.get("status") == "success" else "failed; stop"
        answer = f": {action['answer']}" if action.get("answer") else ""
        return f"Finish: the task is {outcome}{answer}"
    if name == "clarify":
        return f"Ask the user to clarify: {action.get('question')}"
    if name == "call_user":
        return f"Hand control to the user: {action.get('reason')}"
    return str(name)
