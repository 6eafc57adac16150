"""Turn-level batching of the RL update (Xiaomi-GUI-0 §4.4; training/trainer/turns.py) on plain rows:
turns regrouped by trajectory, every turn inheriting its trajectory's advantage, micro-batches drawn
turn-major across trajectories. No torch, no database."""
import pytest

from training.config import schema
from training.trainer.turns import BATCHINGS, TRAJECTORY, TURN, TurnError, batch_order, regroup_turns, turn_order


def row(trajectory, turn, inherited, group=1, steps=2, **extra):
    return {"group": group, "trajectory": trajectory, "turn": turn, "trajectory_advantage": inherited,
            "steps_in_trajectory": steps, **extra}


# rollouts.jsonl order: group by group, trajectory by trajectory, turn by turn
ROWS = [row(11, 0, 1.0), row(11, 1, 1.0), row(12, 0, -1.0, steps=1),
        row(21, 0, 1.22, group=2, steps=1), row(22, 0, -1.22, group=2, steps=3), row(22, 1, -1.22, group=2, steps=3),
        row(22, 2, -1.22, group=2, steps=3), row(23, 0, 0.0, group=2, steps=1)]


def test_turns_regroup_by_trajectory_in_turn_order():
    shuffled = [ROWS[p] for p in (6, 0, 4, 7, 1, 3, 5, 2)]
    regrouped = regroup_turns(shuffled)
    assert {t: [shuffled[p]["turn"] for p in positions] for t, positions in regrouped.items()} == {
        22: [0, 1, 2], 11: [0, 1], 21: [0], 23: [0], 12: [0]}
    assert regrouped[22] == [2, 6, 0]   # positions in the shuffled list: turns 0, 1, 2


def test_micro_batches_are_drawn_turn_major_across_trajectories():
    # turn 0 of 11, 12, 21, 22, 23 (first-appearance order), then turn 1 of 11 and 22, then turn 2 of 22
    assert turn_order(ROWS) == [0, 2, 3, 4, 7, 1, 5, 6]
    assert batch_order(ROWS, TURN) == [0, 2, 3, 4, 7, 1, 5, 6]
    assert batch_order(ROWS, TRAJECTORY) == list(range(8))   # file order, as the update always did
    # a skipped turn (a lost screenshot) leaves the others in place
    gap = [ROWS[0], row(11, 2, 1.0), ROWS[2]]
    assert turn_order(gap) == [0, 2, 1]
    with pytest.raises(TurnError, match="batching must be one of trajectory, turn"):
        batch_order(ROWS, "episode")


def test_every_turn_must_inherit_its_trajectorys_advantage():
    broken = [*ROWS[:5], row(22, 1, 0.7, group=2, steps=3), *ROWS[6:]]
    with pytest.raises(TurnError, match=r"turn 1 of trajectory 22 \(row 5\) does not inherit .* 0\.7, not -1\.22 \(row 4\)"):
        regroup_turns(broken)
    # the same value written through JSON twice is the same float; rounding noise is not a different one
    assert regroup_turns([row(5, 0, 0.1 + 0.2), row(5, 1, 0.3)])


@pytest.mark.parametrize("rows, message", [
    ([row(11, 0, 1.0), row(11, 0, 1.0)], "rollout rows 0 and 1 are both turn 0 of trajectory 11"),
    ([row(11, 0, 1.0), row(11, 1, 1.0, group=2)], "different group"),
    ([row(11, 0, 1.0), row(11, 1, 1.0, steps=3)], "different steps_in_trajectory"),
    ([{"group": 1, "trajectory": 11, "steps_in_trajectory": 1, "trajectory_advantage": 0.0}], "row 0 has no turn"),
    ([row(None, 0, 1.0)], "row 0 has no trajectory"),
    ([row(11, -1, 1.0)], "no turn"),
    ([row(11, 0, None)], "carries no trajectory advantage"),
    ([row(11, 0, float("nan"))], "carries no trajectory advantage"),
])
def test_rows_that_cannot_be_batched_by_turn_are_refused_by_name(rows, message):
    with pytest.raises(TurnError, match=message):
        turn_order(rows)


def test_the_run_config_offers_the_batchings_the_trainer_knows():
    assert schema("rl")["properties"]["batching"]["enum"] == list(BATCHINGS) == [TRAJECTORY, TURN]
