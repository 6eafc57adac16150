"""Calibration held to the truth (§2.4.2, with the judge-evaluation set): thresholds that agree best
with the adjudicators move, where needed, to the nearest ones under which HTSC's purity still holds on
the set's latest evaluations (the SFT pool is "purity first", §2.4.3).

A set case is re-voted by Systems B and C under candidate thresholds from its stored frames and dumps;
System A's vote and the safety veto do not depend on thresholds and are reused as recorded.
"""
import itertools
from types import SimpleNamespace

from flywheel.judging import system_b, system_c
from flywheel.judging.frames import Frames
from flywheel.judging.judge_figures import judge_figures
from flywheel.judging.judge_set import SetInvalid, case_view, load_set
from flywheel.models import JudgeEvaluation
from flywheel.rules.htsc import htsc_consensus

PURITY_FLOOR = 0.99        # overall: share of True that are truly done
KIND_FLOOR = 0.97          # on dump-blind and trap screens


class SetCase:
    """One judged case, re-voted under candidate thresholds; the votes it recorded under the
    evaluation's own thresholds are reused, so the pixels are read again only where a threshold
    changes what C decides."""

    def __init__(self, row, case: dict, recorded_under: dict | None = None):
        self.row = row
        self.view = case_view(case, row.steps)
        self.frames = Frames(self.view)
        self.loop = system_c.trailing_loop(self.view, self.frames)
        self.shortest = len((self.view.known_path or {}).get("steps") or [])
        self.taken = sum(1 for s in self.view.steps if s.action)
        self._b, self._c = {}, {}
        votes = row.votes or {}
        if recorded_under and "B" in votes and "C" in votes:
            self._b[float(recorded_under["B"]["milestone_share"])] = votes["B"]["vote"]
            self._c[self._c_key(recorded_under["C"])] = votes["C"]["vote"]

    def _c_key(self, c: dict) -> tuple:
        """What C's thresholds change: whether the run is a loop, whether the path is a detour."""
        return (self.loop >= int(c["loop_length"]),
                bool(self.shortest) and self.taken > float(c["detour_factor"]) * self.shortest + 2)

    def outcome(self, thresholds: dict) -> str:
        share = float(thresholds["B"]["milestone_share"])
        if share not in self._b:
            self._b[share] = system_b.system_b_vote(self.view, None, {"milestone_share": share}).vote
        c = thresholds["C"]
        key = self._c_key(c)
        if key not in self._c:
            self._c[key] = system_c.rules_vote(self.view, c, self.frames).vote
        vote_a = ((self.row.votes or {}).get("A") or {}).get("vote", "abstain")
        return htsc_consensus(vote_a, self._b[share], self._c[key], bool(self.row.safety))


def set_cases() -> list[SetCase]:
    """The cases of the latest finished evaluation of each mode (full farm, real phone) whose set file
    is unchanged since."""
    cases = []
    for real_phone in (False, True):
        evaluation = (JudgeEvaluation.objects.filter(status=JudgeEvaluation.Status.DONE, real_phone=real_phone)
                      .order_by("-created_at").first())
        if evaluation is None:
            continue
        try:
            _, entries, digest = load_set(evaluation.set_version)
        except SetInvalid:
            continue
        if digest != evaluation.set_sha256:
            continue
        by_key = {entry["key"]: entry for entry in entries}
        cases += [SetCase(row, by_key[row.key], evaluation.thresholds) for row in evaluation.cases.all()
                  if row.key in by_key]
    return cases


def figures_under(cases: list[SetCase], thresholds: dict) -> dict:
    return judge_figures(SimpleNamespace(truth=c.row.truth, outcome=c.outcome(thresholds),
                                         screen_kind=c.row.screen_kind, votes=c.row.votes) for c in cases)


def purity_holds(figures: dict) -> bool:
    def at_least(value, floor):
        return value is None or value >= floor
    return (at_least(figures["sft_purity"], PURITY_FLOOR) and at_least(figures["blind_purity"], KIND_FLOOR)
            and at_least(figures["trap_purity"], KIND_FLOOR))


def _distance(candidate: dict, chosen: dict) -> tuple:
    return (abs(candidate["B"]["milestone_share"] - float(chosen["B"]["milestone_share"])),
            abs(candidate["C"]["loop_length"] - int(chosen["C"]["loop_length"]))
            + abs(candidate["C"]["detour_factor"] - float(chosen["C"]["detour_factor"])))


def where_purity_holds(chosen: dict, candidates: dict, cases: list[SetCase] | None = None) -> tuple[dict, str, dict]:
    """(thresholds, note, figures on the set): `chosen` when purity holds under it, else the nearest
    candidate under which it does, else the strictest candidate. No evaluated set: `chosen`, ''."""
    cases = set_cases() if cases is None else cases
    if not cases:
        return chosen, "", {}
    figures = figures_under(cases, chosen)
    if purity_holds(figures):
        return chosen, f"purity on the judge set holds ({_percent(figures['sft_purity'])})", figures
    grid = [{"B": {"milestone_share": share}, "C": {"loop_length": loop, "detour_factor": detour}}
            for share, loop, detour in itertools.product(candidates["milestone_share"], candidates["loop_length"],
                                                          candidates["detour_factor"])]
    for candidate in sorted(grid, key=lambda c: _distance(c, chosen)):
        moved = figures_under(cases, candidate)
        if purity_holds(moved):
            return candidate, (f"moved to where purity holds on the judge set: {_percent(figures['sft_purity'])} → "
                               f"{_percent(moved['sft_purity'])}"), moved
    strictest = {"B": {"milestone_share": max(candidates["milestone_share"])},
                 "C": {"loop_length": min(candidates["loop_length"]), "detour_factor": min(candidates["detour_factor"])}}
    return strictest, ("purity does not hold on the judge set under any candidate thresholds: the strictest are "
                       "kept"), figures_under(cases, strictest)


def _percent(value) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"
