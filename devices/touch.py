"""Realistic touch trajectories (report §2.3.3): a swipe, drag or long press is a real gesture with
a duration, an eased speed profile and a little human jitter, never a "teleport".

`plan_stroke()` is pure and seeded: it returns the touch points (DOWN, MOVE..., UP) with their
times. `stroke_command()` turns them into ONE shell line of `input motionevent` calls separated
by `sleep`s, so a gesture costs one ADB round trip and keeps its timing on the phone's side.
`swipe_fallback_command()` is the plain `input swipe` for phones without `input motionevent`
(Android 9 and older).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

DEFAULT_SWIPE_MS = 450
DEFAULT_DRAG_MS = 900
DRAG_PICKUP_MS = 600        # a drag starts as a long press, so the element is picked up
DRAG_SETTLE_MS = 150        # hold still at the target before releasing
MIN_STEP_MS = 16            # one frame
JITTER_PX = 3.0             # sideways tremor of a finger, tapering to 0 at both ends
BOW_FRACTION = 0.04         # a thumb's arc: the path bows by up to 4% of its length


@dataclass(frozen=True)
class TouchPoint:
    kind: str   # DOWN, MOVE or UP
    x: int
    y: int
    t_ms: int   # time since DOWN


def ease_in_out(t: float) -> float:
    """Slow start, fast middle, slow end (cosine ease), as a finger accelerates and brakes."""
    return 0.5 - 0.5 * math.cos(math.pi * min(max(t, 0.0), 1.0))


def _clamp(value: float, low: int, high: int) -> int:
    return int(min(max(round(value), low), high))


def plan_stroke(start, end, duration_ms: int, rng: random.Random, width: int, height: int, *,
                hold_ms: int = 0, settle_ms: int = 0, steps: int | None = None) -> list[TouchPoint]:
    """DOWN at start, (hold), MOVEs along an eased, slightly bowed and jittered path, (settle), UP
    at end. The first and last points are exact; everything stays on screen."""
    (x1, y1), (x2, y2) = start, end
    length = math.hypot(x2 - x1, y2 - y1)
    if steps is None:
        steps = max(4, min(12, int(duration_ms / 60)))
    bow = rng.uniform(-BOW_FRACTION, BOW_FRACTION) * length
    # unit normal to the path, for the bow and the jitter
    nx, ny = ((-(y2 - y1) / length, (x2 - x1) / length) if length else (0.0, 0.0))
    points = [TouchPoint("DOWN", int(x1), int(y1), 0)]
    t0 = hold_ms
    for i in range(1, steps):
        s = i / steps
        progress = ease_in_out(s)
        sideways = bow * math.sin(math.pi * progress) + rng.uniform(-JITTER_PX, JITTER_PX) * math.sin(math.pi * s)
        x = x1 + (x2 - x1) * progress + nx * sideways
        y = y1 + (y2 - y1) * progress + ny * sideways
        points.append(TouchPoint("MOVE", _clamp(x, 0, width - 1), _clamp(y, 0, height - 1),
                                 t0 + round(duration_ms * s)))
    points.append(TouchPoint("MOVE", int(x2), int(y2), t0 + duration_ms))
    points.append(TouchPoint("UP", int(x2), int(y2), t0 + duration_ms + settle_ms))
    return points


def plan_long_press(point, hold_ms: int, rng: random.Random, width: int, height: int) -> list[TouchPoint]:
    """DOWN, a finger's tiny drift while holding (well under the touch slop), UP where it went down."""
    x, y = point
    drift = TouchPoint("MOVE", _clamp(x + rng.uniform(-2, 2), 0, width - 1),
                       _clamp(y + rng.uniform(-2, 2), 0, height - 1), hold_ms // 2)
    return [TouchPoint("DOWN", int(x), int(y), 0), drift, TouchPoint("UP", int(x), int(y), hold_ms)]


def plan_swipe(start, end, duration_ms, rng, width, height):
    return plan_stroke(start, end, duration_ms or DEFAULT_SWIPE_MS, rng, width, height)


def plan_drag(start, end, duration_ms, rng, width, height):
    return plan_stroke(start, end, duration_ms or DEFAULT_DRAG_MS, rng, width, height,
                       hold_ms=DRAG_PICKUP_MS, settle_ms=DRAG_SETTLE_MS)


def duration_of(points: list[TouchPoint]) -> int:
    return points[-1].t_ms - points[0].t_ms


def stroke_command(points: list[TouchPoint]) -> str:
    """One shell line: `input motionevent DOWN x y; sleep 0.05; input motionevent MOVE ...`."""
    parts = []
    previous = None
    for point in points:
        if previous is not None:
            gap = max(point.t_ms - previous.t_ms, 0)
            if gap >= MIN_STEP_MS:
                parts.append(f"sleep {gap / 1000:.3f}")
        parts.append(f"input motionevent {point.kind} {point.x} {point.y}")
        previous = point
    return "; ".join(parts)


def swipe_fallback_command(start, end, duration_ms: int) -> str:
    """`input swipe` injects evenly spaced MOVEs over the duration (no easing, but not a teleport)."""
    return f"input swipe {int(start[0])} {int(start[1])} {int(end[0])} {int(end[1])} {int(duration_ms)}"


def double_tap_command(x: int, y: int, gap_ms: int = 80) -> str:
    return f"input tap {x} {y}; sleep {gap_ms / 1000:.3f}; input tap {x} {y}"
