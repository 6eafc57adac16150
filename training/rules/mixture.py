"""Mixture ratios per data source (§5.3.3): tilt an export toward the abilities the model lacks.

A ratio r keeps each row of its source floor(r) times, and a seeded sample of round(frac(r) · n)
rows once more: 1 keeps everything, 0.5 a seeded half, 2.0 every row twice, 0 drops the source.
Each source draws from its own random stream (seeded by the seed and the source's name), so adding
or re-weighting one source never changes what another keeps.
"""
from __future__ import annotations

import math
import random

DEFAULT_KEY = "*"  # the ratio of every source the mapping does not name


def validate_ratios(ratios: dict) -> dict[str, float]:
    """{source: ratio} as floats; ValueError naming the first bad entry."""
    if not isinstance(ratios, dict):
        raise ValueError(f"mixture ratios must be a mapping of source to ratio, not {type(ratios).__name__}")
    checked = {}
    for source, ratio in ratios.items():
        if not isinstance(source, str) or not source:
            raise ValueError(f"a mixture source must be a non-empty name, not {source!r}")
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not math.isfinite(ratio):
            raise ValueError(f"the ratio of {source!r} must be a finite number, not {ratio!r}")
        if ratio < 0:
            raise ValueError(f"the ratio of {source!r} is negative ({ratio}); use 0 to drop a source")
        checked[source] = float(ratio)
    return checked


def ratio_for(source: str, ratios: dict[str, float]) -> float:
    return ratios.get(source, ratios.get(DEFAULT_KEY, 1.0))


def copies_per_row(count: int, ratio: float, rng: random.Random) -> list[int]:
    """How many times each of `count` rows is kept under `ratio`."""
    whole, fraction = int(ratio), ratio - int(ratio)
    copies = [whole] * count
    extra = math.floor(fraction * count + 0.5)  # round half up: 0.5 of 3 rows keeps 2
    for index in rng.sample(range(count), min(extra, count)):
        copies[index] += 1
    return copies


def mix(rows_by_source: dict[str, list], ratios: dict[str, float], seed: int) -> list:
    """The rows the mixture keeps: sources in name order, each source's rows in their given order,
    a repeated row next to its copies. Pure and deterministic for the same input and seed."""
    ratios = validate_ratios(ratios)
    kept = []
    for source in sorted(rows_by_source):
        rows = list(rows_by_source[source])
        rng = random.Random(f"{seed}:{source}")  # str seeds hash the same in every process
        for row, copies in zip(rows, copies_per_row(len(rows), ratio_for(source, ratios), rng)):
            kept.extend([row] * copies)
    return kept


def cap_per_group(rows, group_of, cap: int, seed) -> list:
    """High-frequency task data (Xiaomi-GUI-0 §3.1) capped per function in the mixture: at most
    `cap` rows of each group (`group_of(row)`: the row's function group, None for a row in no
    group, which is always kept). A larger group keeps a seeded sample, drawn from the group's own
    stream (seeded by the seed and the group), so one group's rows never change what another
    keeps. Rows keep their given order. Pure and deterministic for the same input and seed."""
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
        raise ValueError(f"the cap per group must be a whole number of rows, 0 or more, not {cap!r}")
    rows = list(rows)
    members: dict = {}
    for index, row in enumerate(rows):
        group = group_of(row)
        if group is not None:
            members.setdefault(group, []).append(index)
    dropped = set()
    for group, indexes in members.items():
        if len(indexes) > cap:
            kept = set(random.Random(f"{seed}:cap:{group}").sample(indexes, cap))
            dropped.update(i for i in indexes if i not in kept)
    return [row for index, row in enumerate(rows) if index not in dropped]
