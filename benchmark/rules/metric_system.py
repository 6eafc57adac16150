"""The quantified metric system (report §4.1, Table 4): three axes, ten dimensions, discrete values.

A benchmark is a set of quotas over this space, so the space is data: the quota tables, the
generation constraints, the review form, the imports and the score breakdowns all read it here.
`dimension_values` turns a query's stored labels (the query format's nested `labels`, with the
farm's and imports' synonyms) plus its plain fields into one value per dimension.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Dimension:
    key: str
    axis: str
    label: str
    values: tuple          # () for functional intent: its values are the apps' function entry points
    tests: str             # "what it tests", Table 4's last column


AXES = {
    "scenario": "Scenario",
    "complexity": "Complexity",
    "interaction": "Interaction & risk",
}
# The 12 app categories (the catalog's App.Category values; "system" is the system-tools category).
CATEGORIES = ("system", "social", "shopping", "food", "travel", "navigation", "video", "music", "news",
              "productivity", "photo", "life")

DIMENSIONS = (
    Dimension("ownership", "scenario", "App ownership", ("system", "third-party"),
              "On-device experience; fair comparison across models"),
    Dimension("category", "scenario", "App category", CATEGORIES, "Generalization across scenarios"),
    Dimension("functional_intent", "scenario", "Functional intent", (), "Reachability of deep functions"),
    Dimension("path_complexity", "complexity", "Path complexity", ("simple", "moderate", "complex"),
              "Long-horizon execution and progress tracking"),
    Dimension("intent_dependency", "complexity", "Intent dependency", ("single", "independent", "dependent"),
              "Task decomposition and passing results across steps"),
    Dimension("app_scope", "complexity", "App scope", ("single-app", "cross-app"), "Cross-app state transfer"),
    Dimension("operation", "complexity", "Operation type", ("tap-level", "gesture-level"), "Fine-grained gestures"),
    Dimension("explicitness", "interaction", "Explicitness", ("explicit", "implicit", "underspecified"),
              "Intent understanding and commonsense completion"),
    Dimension("instruction_type", "interaction", "Instruction type",
              ("agent-executable", "agent-user-interactive"), "When to ask instead of deciding for the user"),
    Dimension("refusal_safety", "interaction", "Refusal and safety",
              ("none", "unsupported", "beyond-scope", "non-gui", "high-sensitivity"),
              "Capability-boundary awareness and risk avoidance"),
)
BY_KEY = {d.key: d for d in DIMENSIONS}
# Dimensions a quota can be written over: every one with a fixed set of values.
QUOTA_DIMENSIONS = tuple(d.key for d in DIMENSIONS if d.values)
VALUE_LABELS = {
    "simple": "simple ≤5 steps", "moderate": "moderate 6–10 steps", "complex": "complex >10 steps",
    "independent": "independent (A+B)", "dependent": "dependent (A→B)", "none": "no refusal expected",
}

# Synonyms seen in stored labels (the farm's task set, imports, generated drafts) → Table 4 values.
CATEGORY_SYNONYMS = {
    "messaging": "social", "social_communication": "social", "communication": "social",
    "food_delivery": "food", "delivery": "food", "tools": "productivity", "utilities": "productivity",
    "notes": "productivity", "gallery": "photo", "maps": "navigation", "reading": "news",
    "audio": "music", "life_services": "life", "system_tools": "system",
}
VALUE_SYNONYMS = {
    "intent_dependency": {"a+b": "independent", "a->b": "dependent", "a→b": "dependent", "parallel": "independent"},
    "app_scope": {"single": "single-app", "cross": "cross-app"},
    "operation": {"tap": "tap-level", "gesture": "gesture-level"},
    "instruction_type": {"agent-user interactive": "agent-user-interactive", "interactive": "agent-user-interactive",
                         "executable": "agent-executable"},
    "refusal_safety": {"beyond_scope": "beyond-scope", "non_gui": "non-gui", "high_sensitivity": "high-sensitivity",
                       "commonsense": "beyond-scope", "": "none"},
}
GESTURES = {"swipe", "drag", "long_press", "double_click", "set_scroll_widget"}


def path_complexity(steps: int) -> str:
    """§4.1.2: simple ≤ 5, moderate 6–10, complex > 10 GUI steps."""
    return "simple" if steps <= 5 else "moderate" if steps <= 10 else "complex"


def normalise(dimension: str, value):
    """A stored value in Table 4's words, or None when it is not one of the dimension's values."""
    if value is None:
        return None
    text = str(value).strip().lower().replace(" ", "-") if dimension != "functional_intent" else str(value)
    if dimension == "category":
        text = CATEGORY_SYNONYMS.get(text.replace("-", "_"), text)
    text = VALUE_SYNONYMS.get(dimension, {}).get(text, VALUE_SYNONYMS.get(dimension, {}).get(
        text.replace("-", " "), text))
    allowed = BY_KEY[dimension].values
    return text if not allowed or text in allowed else None


def _nested(labels: dict, axis: str, key: str):
    section = labels.get(axis)
    return section.get(key) if isinstance(section, dict) else None


def dimension_values(labels: dict | None, *, apps: list[dict] | None = None, functions: list[str] | None = None,
                     subclass: str = "", tier: str = "", known_path: dict | None = None,
                     expected_interaction: str = "") -> dict:
    """One value per dimension for a query (missing where nothing says; never a guess against a label).

    `labels` is the query's `labels` (nested by axis as in the query format, or flat by dimension);
    `apps` are [{"package", "category", "is_system"}] in order; the rest fill what labels leave out.
    """
    labels = labels or {}
    flat = {key: labels.get(key) for key in BY_KEY if not isinstance(labels.get(key), dict)}
    raw = {
        "ownership": _nested(labels, "scenario", "ownership") or flat.get("ownership"),
        "category": ((_nested(labels, "scenario", "categories") or [None])[0]
                     if isinstance(_nested(labels, "scenario", "categories"), list)
                     else _nested(labels, "scenario", "category") or flat.get("category")),
        "functional_intent": flat.get("functional_intent"),
        "path_complexity": _nested(labels, "complexity", "path") or flat.get("path_complexity"),
        "intent_dependency": _nested(labels, "complexity", "intent_dependency") or flat.get("intent_dependency"),
        "app_scope": _nested(labels, "complexity", "app_scope") or flat.get("app_scope"),
        "operation": _nested(labels, "complexity", "operation") or flat.get("operation"),
        "explicitness": _nested(labels, "interaction", "explicitness") or flat.get("explicitness"),
        "instruction_type": _nested(labels, "interaction", "instruction_type") or flat.get("instruction_type"),
        "refusal_safety": _nested(labels, "risk", "refusal_safety") or _nested(labels, "interaction", "refusal_safety")
        or flat.get("refusal_safety"),
    }
    values = {key: normalise(key, value) for key, value in raw.items()}
    apps = apps or []
    if values["ownership"] is None and apps:
        values["ownership"] = "system" if all(a.get("is_system") for a in apps) else "third-party"
    if values["category"] is None and apps:
        values["category"] = normalise("category", apps[0].get("category") or "")
    if values["functional_intent"] is None and functions:
        values["functional_intent"] = functions[0]
    if values["app_scope"] is None and apps:
        values["app_scope"] = "cross-app" if len({a["package"] for a in apps}) > 1 else "single-app"
    path_steps = [s for s in (known_path or {}).get("steps") or [] if s.get("action") != "terminate"]
    steps = _nested(labels, "complexity", "steps") or labels.get("step_depth")
    if values["path_complexity"] is None and (steps or path_steps):
        values["path_complexity"] = path_complexity(int(steps or len(path_steps)))
    if values["operation"] is None and path_steps:
        values["operation"] = "gesture-level" if any(s.get("action") in GESTURES for s in path_steps) else "tap-level"
    if values["intent_dependency"] is None and subclass:
        values["intent_dependency"] = {"dependent_operation": "dependent", "parallel_operation": "independent"}.get(
            subclass, "single")
    if values["explicitness"] is None and tier:
        values["explicitness"] = {"L1": "explicit", "L2": "implicit", "L3": "underspecified"}.get(tier)
    if values["instruction_type"] is None and expected_interaction:
        values["instruction_type"] = ("agent-user-interactive" if expected_interaction in ("clarify", "call_user")
                                      else "agent-executable")
    if values["refusal_safety"] is None and expected_interaction:
        values["refusal_safety"] = "none" if expected_interaction != "refuse" else "unsupported"
    return values


def validate_labels(values: dict) -> list[str]:
    """Each problem with a {dimension: value} mapping, named ([] when every field is valid)."""
    problems = []
    for key, value in values.items():
        if key not in BY_KEY:
            problems.append(f"unknown dimension {key!r}")
        elif value is not None and BY_KEY[key].values and value not in BY_KEY[key].values:
            problems.append(f"{key}: {value!r} is not one of {', '.join(BY_KEY[key].values)}")
    return problems


def as_table() -> list[dict]:
    """Table 4 as rows, for the metric-system page and the API."""
    return [{"axis": AXES[d.axis], "dimension": d.label, "key": d.key,
             "values": [VALUE_LABELS.get(v, v) for v in d.values] or ["varying across apps"],
             "tests": d.tests} for d in DIMENSIONS]
