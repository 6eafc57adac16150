"""Which rollout groups an RL update uses (report §3.3.2–3.3.3).

§3.3.2: "We train on tasks from the middle difficulty band ... tasks that every model solves or every
model fails produce no useful gradient." §3.3.3: "groups whose success rate falls outside a useful
range are discarded because they carry no contrast, and when sampling fails we fall back on earlier
successful trajectories of the same task, with a cap on how much of an update they may contribute."
That sentence is all the report says about the fallback; what it leaves open is decided below.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def is_success(value) -> bool:
    """A rollout's success from what a group holds: True/False, or an HTSC verdict ("true", "false")."""
    if isinstance(value, str):
        return value.lower() == "true"
    return value is True


def success_rate(successes: Sequence) -> float:
    if not successes:
        raise ValueError("an empty group has no success rate")
    return sum(is_success(v) for v in successes) / len(successes)


def useful_group(successes: Sequence, low: float = 0.0, high: float = 1.0) -> bool:
    """Whether a group's success rate p lies in the useful range [low, high] (both bounds included).

    All-success (p = 1) and all-failure (p = 0) groups are never useful whatever the bounds: they
    carry no contrast in success. An empty group is not useful either.
    """
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"the useful range must satisfy 0 ≤ low ≤ high ≤ 1, not ({low}, {high})")
    if not successes:
        return False
    p = success_rate(successes)
    return 0.0 < p < 1.0 and low <= p <= high


def fallback_successes(group: Sequence[T], earlier_successes: Sequence[T], cap: int,
                       succeeded: Callable[[T], bool] = is_success) -> list[T]:
    """§3.3.3's fallback: a group with no success borrows earlier successes of the same query.

    When no rollout of `group` succeeded, up to `cap` of `earlier_successes` (taken in the order
    given: the caller puts the most recent first) replace the group's last failures, so the group
    has a success to contrast with. The group keeps its size G (eq. 5 normalises over G) and at least
    one of its own failures, so borrowed trajectories never make up the whole group: the cap bounds
    how much of an update they contribute. A group that already has a success, a cap of 0 or no
    earlier success leaves the group as it is. Returns a new list.
    """
    if cap < 0:
        raise ValueError(f"the fallback cap must be non-negative, not {cap!r}")
    group = list(group)
    if not group or any(succeeded(item) for item in group):
        return group
    borrowed = list(earlier_successes)[:min(cap, len(group) - 1)]
    if not borrowed:
        return group
    return group[:len(group) - len(borrowed)] + borrowed
