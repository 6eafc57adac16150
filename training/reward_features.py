"""What the step reward model sees of one step: one feature row, the same for training and scoring.

    row = step_features(StepInput(goal, history, before, after, screen, apps, package, next_package,
                                  action, previous_action, blocked, position))

The action is read against the screen it was taken on with the compact policy's own featuriser
(flywheel/policies/compact_features.py: the goal, the history text and the UI dump; its candidate
that is the action gives its row, with how it ranks among the screen's candidates by similarity to
the goal); then what the step did: the screen it led to against the one before (unchanged, words
kept, foreground app changed, a task app or the launcher in front, the task's apps left), the goal's
words on screen before and after, a repeat of the previous action, an action the audit blocked,
and the step's place in the trajectory. Numpy only (the web app has no torch).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devices.actions import to_pixels
from devices.uitree import all_nodes, parse_hierarchy
from flywheel.policies.compact_features import (
    EMBED,
    KINDS,
    SCALARS,
    action_kind,
    featurize,
    screen_text,
    stems,
    target_index,
)
from flywheel.rules.app_names import agent_may_open
from flywheel.rules.repetition import same_action

SYSTEM_UI = "com.android.systemui"     # its clock and notifications change every screen
POINT_FIELDS = ("point", "start", "end")
DEFAULT_SCREEN = (1080, 2400)
FEATURES = SCALARS + 1 + 3 + (len(KINDS) + 1) + 2 + 7 + 2 + 4


@dataclass(frozen=True)
class StepInput:
    goal: str
    history: str                   # the protocol's history text of the executed steps before it
    before: str                    # the UI dump the action was taken on
    after: str | None              # the dump of the screen it led to; None when none was recorded
    screen: tuple[int, int]
    apps: tuple[str, ...]          # the query's apps
    package: str                   # the foreground app before
    next_package: str              # the foreground app after ("" when unknown)
    action: dict                   # the action, points in thousandths of the screen
    previous_action: dict | None   # the executed action of the step before
    blocked: bool = False          # the safety audit blocked it
    position: int = 0              # its number among the trajectory's policy steps


def in_thousandths(action: dict, screen: tuple[int, int]) -> dict:
    """The action with its points in thousandths of the screen (the featuriser's unit)."""
    action = dict(action or {})
    coords = action.get("coords", "pixel")
    if coords == "thousandths":
        return action
    width, height = screen
    for name in POINT_FIELDS:
        point = action.get(name)
        if isinstance(point, list | tuple) and len(point) == 2:
            try:
                x, y = to_pixels(point, coords, width, height)
            except (ValueError, TypeError):   # ActionError is a ValueError: the point stays out
                action.pop(name)
                continue
            action[name] = [min(1000, max(0, round(x * 1000 / max(width, 1)))),
                            min(1000, max(0, round(y * 1000 / max(height, 1))))]
    action["coords"] = "thousandths"
    return action


def recorded_size(recorded) -> tuple[int, int] | None:
    """A step's recorded screen size (timings["screen"]), or None when it is not a usable one."""
    try:
        width, height = (int(v) for v in recorded)
    except (TypeError, ValueError):
        return None
    return (width, height) if width > 0 and height > 0 else None


def screen_size(recorded, hierarchy_xml: str) -> tuple[int, int]:
    """The step's recorded screen size, else the dump's widest bounds, else a phone's usual one."""
    if recorded_size(recorded):
        return recorded_size(recorded)
    right = bottom = 0
    for node in all_nodes(parse_hierarchy(hierarchy_xml or "")):
        right, bottom = max(right, node.bounds[2]), max(bottom, node.bounds[3])
    return (right, bottom) if right > 0 and bottom > 0 else DEFAULT_SCREEN


def screen_signature(hierarchy_xml: str) -> tuple:
    """The elements a screen shows, the system UI left out: equal signatures are the same screen."""
    return tuple((n.cls, n.resource_id, n.text, n.desc, n.package, n.bounds)
                 for n in all_nodes(parse_hierarchy(hierarchy_xml or "")) if not n.package.startswith(SYSTEM_UI))


def screen_words(hierarchy_xml: str) -> set[str]:
    return stems(screen_text(parse_hierarchy(hierarchy_xml or "")))


def _share(part: set, whole: set) -> float:
    return len(part & whole) / len(whole) if whole else 0.0


def action_block(step: StepInput, embed=EMBED) -> np.ndarray:
    """The featuriser's row of the candidate that is the action, whether one is, and how that
    candidate ranks among the screen's by similarity to the goal and to the goal's clauses."""
    found, rows = featurize(step.goal, step.history, step.before, step.screen, list(step.apps), step.package,
                            embed=embed)
    block = np.zeros(SCALARS + 4, np.float32)
    index = target_index(found, step.action, step.screen) if found else None
    if index is None:
        return block
    chosen = rows[index]
    block[:SCALARS] = chosen
    block[SCALARS] = 1.0
    block[SCALARS + 1] = chosen[0] - rows[:, 0].max()      # 0 when it is the goal's closest candidate
    block[SCALARS + 2] = chosen[12] - rows[:, 12].max()    # the same, by the goal's closest clause
    block[SCALARS + 3] = float(np.mean(rows[:, 0] > chosen[0]))
    return block


def outcome_block(step: StepInput) -> list[float]:
    """What the step did to the screen and the foreground app."""
    after_known = step.after is not None
    before_words, goal = screen_words(step.before), stems(step.goal)
    after_words = screen_words(step.after) if after_known else before_words
    unchanged = after_known and screen_signature(step.before) == screen_signature(step.after)
    union = before_words | after_words
    kept = len(before_words & after_words) / len(union) if union else 1.0
    after_package = step.next_package if after_known else ""
    moved = bool(after_package) and after_package != step.package
    left = (moved and bool(step.apps) and after_package not in step.apps and agent_may_open(after_package)
            and after_package != "android")
    goal_after, goal_before = _share(goal, after_words), _share(goal, before_words)
    return [float(after_known), float(unchanged), kept, float(moved), float(after_package in step.apps),
            float(bool(after_package) and not agent_may_open(after_package)), float(left),
            goal_after, goal_after - goal_before]


def step_features(step: StepInput, embed=EMBED) -> np.ndarray:
    """The step's feature row (float32, [FEATURES])."""
    kind = action_kind(step.action)
    kinds = [float(kind == k) for k in KINDS] + [float(kind not in KINDS)]
    name, status = step.action.get("action"), step.action.get("status")
    ending = [float(name == "terminate" and status == "success"), float(name == "terminate" and status == "failure")]
    outcome = outcome_block(step)
    repeated = step.previous_action is not None and same_action(step.previous_action, step.action)
    tail = [float(repeated), float(repeated and outcome[1] == 1.0), float(step.blocked),
            min(step.position, 20) / 10]
    row = np.concatenate([action_block(step, embed), np.array(kinds + ending + outcome + tail, np.float32)])
    if row.shape != (FEATURES,):
        raise AssertionError(f"a step row has {row.shape[0]} features, not {FEATURES}")
    return row.astype(np.float32)
