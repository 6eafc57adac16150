"""High-frequency task data in a snapshot (Xiaomi-GUI-0 §3.1): the most-used functions get several
functionally equivalent trajectories through different entry points (flywheel/queries/high_frequency.py
makes their queries), capped per function in the mixture so they tilt the data without drowning it.

    cap_high_frequency(kind, rows, cap, seed) -> (rows, stats)

The unit capped is what one collection of a path gives: a trajectory (its steps in a CPT snapshot, the
trajectory in an SFT one), or a query in an RL snapshot. Rows of other queries are never touched. The
choice is seeded per function (training/rules/mixture.cap_per_group), so one function's cap never
changes what another keeps, and the same pool and seed give the same rows.
"""
from __future__ import annotations

from flywheel.models import FunctionNode
from flywheel.queries.high_frequency import group_of
from training.models import DataSnapshot
from training.rules.mixture import cap_per_group

DEFAULT_CAP = 8       # trajectories (RL: queries) per function: a handful of entry points, a few repeats each
FUNCTIONS_SHOWN = 20  # the snapshot page lists the largest groups


def _unit(kind: str, row):
    """(the unit a row belongs to, its query): a trajectory, or the query itself in an RL snapshot."""
    if kind == DataSnapshot.Kind.RL:
        return row.query, row.query
    trajectory = row.step.trajectory if kind == DataSnapshot.Kind.CPT else row.trajectory
    return trajectory, trajectory.query


def validate_cap(value) -> int | None:
    """The cap from a snapshot config (None: no cap); ValueError naming the key."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"high_frequency_cap must be a whole number of trajectories per function (1 or more) "
                         f"or null for no cap, not {value!r}")
    return value


def cap_high_frequency(kind: str, rows: list, cap: int | None, seed: int) -> tuple[list, dict]:
    """The rows with at most `cap` units per high-frequency function group, and what the cap did
    ({} when no row belongs to such a group)."""
    units, groups, functions = {}, {}, {}
    for row in rows:
        unit, query = _unit(kind, row)
        group = group_of(query.labels)
        if group is not None and unit.pk not in units:
            units[unit.pk] = group
            groups.setdefault(group, []).append(unit.pk)
            functions.setdefault(group, query.labels["high_frequency"].get("function"))
    if not groups:
        return rows, {}
    kept = set(units) if cap is None else set(
        cap_per_group(list(units), units.get, cap, seed))
    capped = [row for row in rows if (pk := _unit(kind, row)[0].pk) not in units or pk in kept]
    names = {node.pk: f"{node.app.display_label}: {node.label or node.path}" for node in
             FunctionNode.objects.filter(pk__in=[pk for pk in functions.values() if isinstance(pk, int)])
             .select_related("app")}
    by_function = sorted(({"group": group, "function": names.get(functions[group], ""), "collected": len(members),
                           "kept": sum(pk in kept for pk in members)} for group, members in groups.items()),
                         key=lambda row: (-row["collected"], row["group"]))
    return capped, {"cap": cap, "functions": len(groups), "collected": len(units), "kept": len(kept),
                    "rows_left_out": len(rows) - len(capped), "by_function": by_function[:FUNCTIONS_SHOWN]}
