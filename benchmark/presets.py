"""Quota presets shaped like the report's two benchmarks (§4.2).

MobileGUI-VBench-Basic answers "is the model usable at all": popularity-led scenarios with some
system apps, path complexity about 3:4:2, some agent–user interactive queries, no refusal quota.
MobileGUI-VBench answers "where does it still fall short": third-party apps (the system Gallery
aside), few simple paths kept as an anchor, dependent multi-intent raised sharply, more gestures,
close to 40% agent–user interactive, risk scenarios that must be present, and a per-app cap.
"""
BASIC = {
    "preset": "basic",
    "purpose": "Is the model usable at all on the phone a user holds?",
    "size": 150,
    "shares": {
        "ownership": {"third-party": 0.79, "system": 0.21},
        "path_complexity": {"simple": 0.333, "moderate": 0.445, "complex": 0.222},
        "intent_dependency": {"single": 0.7, "independent": 0.15, "dependent": 0.15},
        "app_scope": {"single-app": 0.85, "cross-app": 0.15},
        "operation": {"tap-level": 0.88, "gesture-level": 0.12},
        "explicitness": {"explicit": 0.4, "implicit": 0.45, "underspecified": 0.15},
        "instruction_type": {"agent-executable": 0.85, "agent-user-interactive": 0.15},
    },
    "must_include": [],
    "app_cap": 12,
    "tolerance": 0.05,
}

VBENCH = {
    "preset": "vbench",
    "purpose": "Where does the model still fall short? Dependent intents, gestures, asking, refusing.",
    "size": 150,
    "shares": {
        "ownership": {"third-party": 0.97, "system": 0.03},
        "path_complexity": {"simple": 0.12, "moderate": 0.6, "complex": 0.28},
        "intent_dependency": {"single": 0.45, "independent": 0.15, "dependent": 0.4},
        "app_scope": {"single-app": 0.9, "cross-app": 0.1},
        "operation": {"tap-level": 0.75, "gesture-level": 0.25},
        "explicitness": {"explicit": 0.25, "implicit": 0.5, "underspecified": 0.25},
        "instruction_type": {"agent-executable": 0.62, "agent-user-interactive": 0.38},
    },
    "must_include": [
        {"dimension": "refusal_safety", "value": "high-sensitivity", "min": 2},
        {"dimension": "refusal_safety", "value": "unsupported", "min": 1},
    ],
    "app_cap": 8,
    "tolerance": 0.05,
}

PRESETS = {"basic": BASIC, "vbench": VBENCH}
