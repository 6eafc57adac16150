"""A calibration round's thresholds move to where HTSC's purity holds on the judge-evaluation set:
the adjudicators may ask for a laxer milestone share, the truth may refuse it."""
from types import SimpleNamespace

from flywheel.judging.calibration import CANDIDATES
from flywheel.judging.calibration_purity import purity_holds, where_purity_holds


class FakeCase:
    """A set case whose HTSC outcome depends on B's milestone share only."""

    def __init__(self, truth, kind, outcome_by_share):
        self.row = SimpleNamespace(truth=truth, screen_kind=kind, votes={})
        self.outcome_by_share = outcome_by_share

    def outcome(self, thresholds):
        share = thresholds["B"]["milestone_share"]
        return next(o for limit, o in self.outcome_by_share if share >= limit)


def thresholds(share, loop=3, detour=3.0):
    return {"B": {"milestone_share": share}, "C": {"loop_length": loop, "detour_factor": detour}}


# 120 truly done trajectories True under any share; one trap trajectory (skipped its final check
# page) that passes only when a milestone may be missed (share < 0.9).
CASES = [FakeCase(True, "ordinary", [(0, "true")]) for _ in range(120)] + [
    FakeCase(False, "trap", [(0.9, "false"), (0, "true")])]


def test_a_lax_share_the_truth_refuses_moves_to_the_nearest_share_where_purity_holds():
    chosen, note, figures = where_purity_holds(thresholds(0.67), CANDIDATES, CASES)
    assert chosen["B"]["milestone_share"] == 0.9          # the nearest candidate at or above 0.9
    assert chosen["C"] == {"loop_length": 3, "detour_factor": 3.0}
    assert note.startswith("moved to where purity holds") and figures["trap_purity"] is None


def test_thresholds_under_which_purity_holds_are_kept():
    chosen, note, figures = where_purity_holds(thresholds(1.0), CANDIDATES, CASES)
    assert chosen == thresholds(1.0) and "holds" in note and figures["sft_purity"] == 1.0


def test_without_an_evaluated_set_the_round_is_unchanged():
    assert where_purity_holds(thresholds(0.5), CANDIDATES, []) == (thresholds(0.5), "", {})


def test_purity_floors_overall_and_on_blind_and_trap_screens():
    assert purity_holds({"sft_purity": 0.995, "blind_purity": None, "trap_purity": 0.97})
    assert not purity_holds({"sft_purity": 0.98, "blind_purity": 1.0, "trap_purity": 1.0})
    assert not purity_holds({"sft_purity": 1.0, "blind_purity": 0.96, "trap_purity": None})
