"""How far a person's verified action and reasoning were from the policy's proposal (§2.3.2):
the edit is data (it measures the policy and trains it)."""
from __future__ import annotations

import math

from devices.actions import ActionError, to_pixels
from flywheel.policies.protocol import TAGS

TEXT_FIELDS = ("text", "app", "button", "direction", "value", "status", "answer", "question", "reason")
POINT_FIELDS = ("point", "start", "end")


class EditError(ValueError):
    """The verified action carries a point that is not on any screen (Infinity, NaN, 1e400, text)."""


def _pixels(action: dict, key: str, width: int, height: int, strict: bool = False):
    """The point in on-screen pixels (clamped to the screen, as the executor clamps it), or None.

    `strict` (a person's verified action): a point that is there but not two finite numbers is an
    EditError; a model's malformed proposal is simply not measured.
    """
    value = action.get(key)
    if value is None:
        return None
    try:
        x, y = to_pixels(value, action.get("coords", "pixel"), width, height)
    except ActionError as error:
        if strict:
            raise EditError(f"{key} of the verified action: {error.message}") from error
        return None
    return min(max(x, 0), width - 1), min(max(y, 0), height - 1)


def measure_edit(proposed: dict | None, verified: dict, proposed_cot: dict | None, verified_cot: dict,
                 width: int, height: int, by_hand: bool = False) -> dict:
    """What changed between proposal and verified action: type, distance moved, fields, reasoning.

    Raises EditError (a ValueError) when the verified action has a point that is not two finite
    numbers."""
    proposed = proposed or {}
    proposed_cot = proposed_cot or {}
    type_changed = proposed.get("action") != verified.get("action")
    distances = []
    for key in POINT_FIELDS:
        before, after = _pixels(proposed, key, width, height), _pixels(verified, key, width, height, strict=True)
        if before and after:
            distances.append(math.dist(before, after))
    fields_changed = sorted(key for key in TEXT_FIELDS
                            if str(proposed.get(key) or "") != str(verified.get(key) or "")
                            and (key in proposed or key in verified))
    points_added = sorted(key for key in POINT_FIELDS if (key in proposed) != (key in verified))
    cot_changed = [tag for tag in TAGS
                   if (proposed_cot.get(tag) or "").strip() != (verified_cot.get(tag) or "").strip()]
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
