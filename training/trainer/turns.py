"""Turn-level batching of the RL update (Xiaomi-GUI-0 §4.4): "batches training by turn while retaining
trajectory IDs and turn indices, then regroups turns so each inherits an advantage derived from its
trajectory return".

A rollouts.jsonl row is already one turn (one policy step with its fixed-window history: the text
history and the last K screenshots), so the update's sequences are short whichever batching is chosen.
What the choice changes is which turns share a micro-batch:

    trajectory  (the default, what the update always did) the rows in file order: a trajectory's turns
                one after another, so a micro-batch mostly holds turns of one trajectory;
    turn        turn-major: turn 0 of every trajectory, then turn 1, ...; a micro-batch holds the same
                turn of several trajectories (histories of like length), and each rank's share is drawn
                from across the trajectories. The update's metrics say how it came out:
                trajectories_per_micro_batch and pad_fraction (the share of padded positions).

The gradient of one optimizer step is the same sum either way (eq. 6's weights are per row). Turn
batching first regroups the turns by trajectory and checks that each trajectory's turns are whole
(distinct turn indices, one group, one T_i) and that every turn carries its trajectory's advantage
("trajectory_advantage", the group-normalised return that training/rl_data.py writes): a row that
lost its trajectory's advantage fails the update before any weight moves.

Pure: no torch, so it is tested on plain rows.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

TRAJECTORY, TURN = "trajectory", "turn"
BATCHINGS = (TRAJECTORY, TURN)


class TurnError(ValueError):
    """Rows that cannot be batched by turn; the message names the row."""


def _integer(record: dict, key: str, number: int) -> int:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TurnError(f"rollout row {number} has no {key} (a non-negative integer), which turn batching needs: "
                        f"{value!r}")
    return value


def regroup_turns(records: Sequence[dict]) -> dict[int, list[int]]:
    """{trajectory id: the positions of its turns, in turn order}, after checking that every turn of a
    trajectory belongs to one group, names the same steps_in_trajectory, has a turn index of its own,
    and inherits the same trajectory advantage. A turn may be missing (a sample skipped for a lost
    screenshot or its length): the others still inherit."""
    turns: dict[int, list[tuple[int, int]]] = {}
    first: dict[int, tuple[int, dict]] = {}
    for number, record in enumerate(records):
        trajectory, turn = _integer(record, "trajectory", number), _integer(record, "turn", number)
        advantage = record.get("trajectory_advantage")
        if isinstance(advantage, bool) or not isinstance(advantage, int | float) or not math.isfinite(advantage):
            raise TurnError(f"rollout row {number} (trajectory {trajectory}, turn {turn}) carries no trajectory "
                            f"advantage: {advantage!r}")
        if trajectory not in first:
            first[trajectory] = (number, record)
        else:
            origin, seen = first[trajectory]
            for key in ("group", "steps_in_trajectory"):
                if record.get(key) != seen.get(key):
                    raise TurnError(f"rollout rows {origin} and {number} are turns of trajectory {trajectory} with "
                                    f"different {key} ({seen.get(key)!r}, {record.get(key)!r})")
            if not math.isclose(advantage, seen["trajectory_advantage"], rel_tol=1e-9, abs_tol=1e-12):
                raise TurnError(f"turn {turn} of trajectory {trajectory} (row {number}) does not inherit its "
                                f"trajectory's advantage: {advantage!r}, not {seen['trajectory_advantage']!r} "
                                f"(row {origin})")
        turns.setdefault(trajectory, []).append((turn, number))
    regrouped = {}
    for trajectory, entries in turns.items():
        entries.sort()
        for (turn, number), (after, later) in zip(entries, entries[1:]):
            if turn == after:
                raise TurnError(f"rollout rows {number} and {later} are both turn {turn} of trajectory {trajectory}")
        regrouped[trajectory] = [number for _, number in entries]
    return regrouped


def turn_order(records: Sequence[dict]) -> list[int]:
    """The row positions turn-major: every trajectory's turn 0 (in the order the trajectories first
    appear), then every turn 1, and so on. Checks the rows as regroup_turns does."""
    rank = {trajectory: number for number, trajectory in enumerate(regroup_turns(records))}
    return sorted(range(len(records)), key=lambda p: (records[p]["turn"], rank[records[p]["trajectory"]]))


def batch_order(records: Sequence[dict], batching: str) -> list[int]:
    """The order the update draws its micro-batches from (see the module's docstring)."""
    if batching == TRAJECTORY:
        return list(range(len(records)))
    if batching == TURN:
        return turn_order(records)
    raise TurnError(f"batching must be one of {', '.join(BATCHINGS)}, not {batching!r}")

