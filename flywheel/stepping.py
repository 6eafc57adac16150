"""What every collection line does per step: observe the phone, build the policy's state from the
trajectory so far, and measure how far a person's verified action was from the proposal."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from devices.actions import ActionError, to_pixels
from devices.phone import PhoneConnection
from devices.uitree import page_text, parse_hierarchy

from .agent_protocol import TAGS, HistoryEntry
from .blobs import read_blob, store_blob
from .policies.base import PolicyState

TEXT_FIELDS = ("text", "app", "button", "direction", "value", "status", "answer", "question", "reason")
POINT_FIELDS = ("point", "start", "end")


@dataclass
class Observation:
    png: bytes
    hierarchy_xml: str
    width: int
    height: int
    foreground: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)

    @property
    def screen_text(self) -> str:
        return page_text(parse_hierarchy(self.hierarchy_xml))


def observe(phone: PhoneConnection) -> Observation:
    """Screenshot, UI dump, screen size and foreground app/activity stack (§2.3.7 context)."""
    started = time.monotonic()
    png = phone.screencap_png()
    shot_ms = _ms(started)
    xml = phone.dump_hierarchy()
    dump_ms = _ms(started) - shot_ms
    width, height = phone.window_size()
    foreground = phone.foreground()
    return Observation(png=png, hierarchy_xml=xml, width=width, height=height, foreground=foreground,
                       timings={"screencap_ms": shot_ms, "dump_ms": dump_ms, "observe_ms": _ms(started)})


def store_observation(step, observation: Observation) -> None:
    """Fill a Step's observation fields with content-addressed blobs (not saved here)."""
    step.screenshot.name = store_blob(observation.png, "png")
    step.hierarchy.name = store_blob(observation.hierarchy_xml.encode("utf-8"), "xml")
    step.foreground_package = observation.foreground.get("package", "")
    step.activity_stack = observation.foreground.get("activity_stack", [])


def executed_history(trajectory) -> list:
    return list(trajectory.steps.filter(executed_action__isnull=False).order_by("index"))


def policy_state(trajectory, observation: Observation, k: int = 5) -> PolicyState:
    """The protocol's input: all earlier text, the last K screenshots (the current one last)."""
    done = executed_history(trajectory)
    history = [HistoryEntry(cot=step.cot or {}, action=step.executed_action) for step in done]
    earlier = [read_blob(step.screenshot.name) for step in done[-(k - 1):] if step.screenshot] if k > 1 else []
    query = trajectory.query
    return PolicyState(goal=query.text, history=history, screenshots=earlier + [observation.png],
                       hierarchy_xml=observation.hierarchy_xml,
                       screen_size=(observation.width, observation.height),
                       foreground=observation.foreground, known_path=query.known_path,
                       apps=query.app_packages)


def _pixels(action: dict, key: str, width: int, height: int):
    value = action.get(key)
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None
    try:
        return to_pixels(value, action.get("coords", "pixel"), width, height)
    except ActionError:
        return None


def measure_edit(proposed: dict | None, verified: dict, proposed_cot: dict | None, verified_cot: dict,
                 width: int, height: int, by_hand: bool = False) -> dict:
    """How far the verified action and reasoning were from the proposal: the edit is data."""
    proposed = proposed or {}
    proposed_cot = proposed_cot or {}
    type_changed = proposed.get("action") != verified.get("action")
    distances = []
    for key in POINT_FIELDS:
        before, after = _pixels(proposed, key, width, height), _pixels(verified, key, width, height)
        if before and after:
            distances.append(math.dist(before, after))
    fields_changed = sorted(key for key in TEXT_FIELDS
                            if str(proposed.get(key) or "") != str(verified.get(key) or "")
                            and (key in proposed or key in verified))
    points_added = sorted(key for key in POINT_FIELDS if (key in proposed) != (key in verified))
    cot_changed = [tag for tag in TAGS if (proposed_cot.get(tag) or "").strip() != (verified_cot.get(tag) or "").strip()]
    pixel_distance = round(max(distances), 1) if distances else None
    action_unchanged = (not type_changed and not fields_changed and not points_added
                        and (pixel_distance or 0) < 1 and not by_hand)
    return {
        "type_changed": type_changed,
        "from_type": proposed.get("action"), "to_type": verified.get("action"),
        "pixel_distance": pixel_distance,
        "fields_changed": fields_changed + points_added,
        "text_changed": "text" in fields_changed,
        "cot_changed": cot_changed,
        "by_hand": by_hand,
        "action_unchanged": action_unchanged,
        "accepted_unchanged": action_unchanged and not cot_changed,
    }


def _ms(since: float) -> int:
    return round((time.monotonic() - since) * 1000)
