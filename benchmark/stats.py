"""How sure a success rate is: a percentile bootstrap over tasks for one evaluation's SR, and for two
evaluations of the same tasks a paired bootstrap of their difference with the exact McNemar test.

Pure and seeded: the same outcomes give the same interval on every run, so a kept report reads the same
when it is recomputed. Outcomes are one bool per task (solved or not).
"""
from __future__ import annotations

from math import comb

import numpy as np


def _bounds(values: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2
    lo, hi = np.quantile(values, [tail, 1 - tail])
    return float(lo), float(hi)


def bootstrap_ci(outcomes: list[bool], level: float = 0.95, resamples: int = 2000,
                 seed: int = 0) -> tuple[float | None, float | None]:
    """The percentile bootstrap interval of the success rate, the tasks drawn with replacement
    (None, None when there is no task)."""
    if not outcomes:
        return None, None
    solved = np.asarray(outcomes, dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(solved), size=(resamples, len(solved)))
    return _bounds(solved[draws].mean(axis=1), level)


def mcnemar_exact(gained: int, lost: int) -> float:
    """The exact two-sided McNemar p-value: a sign test on the discordant tasks (solved by one side
    only), each equally likely to go either way when the two sides are alike."""
    discordant = gained + lost
    if discordant == 0:
        return 1.0
    tail = sum(comb(discordant, k) for k in range(min(gained, lost) + 1)) / 2 ** discordant
    return min(1.0, 2 * tail)


def paired_difference(before: list[bool], after: list[bool], level: float = 0.95, resamples: int = 2000,
                      seed: int = 0) -> dict:
    """after's SR minus before's on the same tasks (position i is one task in both): the difference, its
    paired bootstrap interval (the same tasks drawn for both sides), the McNemar p-value and the counts
    of tasks gained (solved only after) and lost (solved only before)."""
    if len(before) != len(after):
        raise ValueError(f"paired outcomes need the same tasks: {len(before)} before, {len(after)} after")
    gained = sum(1 for b, a in zip(before, after) if a and not b)
    lost = sum(1 for b, a in zip(before, after) if b and not a)
    found = {"tasks": len(before), "gained": gained, "lost": lost, "p_value": mcnemar_exact(gained, lost)}
    if not before:
        return {**found, "delta": None, "ci95": (None, None)}
    change = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(change), size=(resamples, len(change)))
    return {**found, "delta": float(change.mean()), "ci95": _bounds(change[draws].mean(axis=1), level)}
