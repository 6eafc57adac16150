"""What the benchmark pages and the API accept as input, checked before a service sees it.

Each function returns clean values or raises `InputError` with a sentence a person can act on, so a
page can show it next to the form and the API can answer 400 with it.
"""
import copy
import json

from benchmark.infer import DEFAULT_INFER
from benchmark.presets import PRESETS
from flywheel.rules.numbers import whole_number

# Bounds of the evaluation settings a person may choose (the rest of the config is pinned).
INFER_BOUNDS = {"max_steps": (1, 500), "timeout_s": (10, 86_400), "screenshots_k": (1, 20), "seed": (0, 2**31 - 1),
                "phones": (1, 256), "recollect_limit": (0, 20)}
SPLITS = ("all", "open", "held_out")
NAME_MAX, VERSION_MAX = 200, 40


class InputError(ValueError):
    """Input a form or a request sent that cannot be used as it is."""


def json_object(text: str, what: str) -> dict:
    """Pasted JSON that must be an object; the error names the line and column."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{what} is not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})")
    if not isinstance(value, dict):
        raise InputError(f"{what} must be a JSON object ({{…}}), not {type(value).__name__}")
    return value


def quota_table_from(preset: str, pasted: str) -> dict:
    """The quota table of a new version: the pasted JSON when there is one, else the preset's."""
    if (pasted or "").strip():
        return json_object(pasted, "the quota table")
    if preset:
        if preset not in PRESETS:
            raise InputError(f"unknown preset {preset!r} (one of {', '.join(PRESETS)})")
        return copy.deepcopy(PRESETS[preset])
    return {}


def name_and_version(name: str, version: str) -> tuple[str, str]:
    name, version = (name or "").strip(), (version or "").strip()
    if not name or not version:
        raise InputError("a version needs a name and a version label (e.g. MobileGUI-VBench, v2)")
    if len(name) > NAME_MAX or len(version) > VERSION_MAX:
        raise InputError(f"the name has at most {NAME_MAX} characters and the version at most {VERSION_MAX}")
    return name, version


def shifts_from(value) -> dict:
    """Quota shifts {dimension: {value: ±share}} (pasted text or an already parsed object)."""
    shifts = json_object(value, "the shifts") if isinstance(value, str) else value
    if not isinstance(shifts, dict):
        raise InputError("the shifts are a JSON object {dimension: {value: ±share}}")
    for dimension, moves in shifts.items():
        if not isinstance(moves, dict) or not moves:
            raise InputError(f"shifts.{dimension}: a mapping of value → ±share, e.g. "
                             '{"intent_dependency": {"dependent": 0.2, "single": -0.2}}')
        for value, delta in moves.items():
            if isinstance(delta, bool) or not isinstance(delta, int | float) or not -1 <= delta <= 1:
                raise InputError(f"shifts.{dimension}.{value}: a share between -1 and 1")
    return shifts


def infer_settings(raw: dict) -> dict:
    """Evaluation settings a person chose: known names, whole numbers within bounds; blanks left out."""
    if not isinstance(raw, dict):
        raise InputError("the evaluation settings are a JSON object")
    unknown = sorted(set(raw) - set(DEFAULT_INFER))
    if unknown:
        raise InputError(f"unknown evaluation setting(s): {', '.join(map(str, unknown))} "
                         f"(known: {', '.join(sorted(DEFAULT_INFER))})")
    clean = {}
    for name, value in raw.items():
        if value in (None, ""):
            continue
        low, high = INFER_BOUNDS.get(name, (0, 10**6))
        number = whole_number(value, minimum=-(10**18), maximum=10**18)
        if number is None:
            raise InputError(f"{name}: a whole number")
        if not low <= number <= high:
            raise InputError(f"{name}: between {low} and {high}")
        clean[name] = number
    return clean


def split_from(value: str) -> str:
    value = value or "all"
    if value not in SPLITS:
        raise InputError(f"split is one of {', '.join(SPLITS)}")
    return value
