"""Calibration that compounds (§2.4.2): adjudicators' decisions retroactively calibrate the
evaluation systems, and the consensus rate is followed round by round.

Human verdicts on Undetermined trajectories tell, for each system, whether its vote matched the
person. A calibration round re-runs the rule systems over the adjudicated trajectories under
candidate thresholds (System B's milestone share, System C's loop length and detour factor),
keeps the values that agree best with the people (flywheel/rules/calibration.py), stores them
with a few adjudicated cases as examples for the LLM judge's prompt, the agreement before and
after, and the consensus rate of the verdicts since the previous round. Systems B and C read
`active_thresholds()`, the LLM judge `judge_examples()` (flywheel/judging/thresholds.py); with
no round, their defaults hold.
"""
import logging
from collections import defaultdict

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, Max, OuterRef, Q

from devices.uitree import page_text, parse_hierarchy
from flywheel import tallies
from flywheel.judging import system_b, system_c
from flywheel.judging.calibration_purity import where_purity_holds
from flywheel.judging.frames import Frames
from flywheel.judging.pipeline import trajectory_view
from flywheel.judging.thresholds import active_thresholds, latest_round
from flywheel.models import Adjudication, CalibrationRound, Verdict, Vote
from flywheel.policies.protocol import describe_action
from flywheel.rules.calibration import (
    agreement,
    consensus_rate,
    consensus_trend,
    retroactively_calibrated_threshold,
)
from flywheel.rules.htsc import ADJUDICATION_OUTCOMES

log = logging.getLogger(__name__)

CANDIDATES = {"milestone_share": (1.0, 0.9, 0.8, 0.75, 0.67, 0.5),
              "loop_length": (2, 3, 4, 5, 6),
              "detour_factor": (1.5, 2.0, 3.0, 4.0, 5.0, 6.0)}
FLAGGED = "flagged for a person"   # a verdict HTSC never reached (pipeline.flag_for_people)


def min_cases() -> int:
    return settings.CALIBRATION_MIN_CASES


def max_cases() -> int:
    return settings.CALIBRATION_MAX_CASES


def example_count() -> int:
    return settings.CALIBRATION_JUDGE_EXAMPLES


# --- what the systems read ------------------------------------------------------------------------

# --- agreement with people and the consensus rate -----------------------------------------------

def system_agreement():
    """Per system: votes cast on adjudicated trajectories, how many matched the person, the rate.

    Counted in SQL, votes by system, value and the person's newest decision on the trajectory."""
    newer = Adjudication.objects.exclude(decision="").filter(trajectory_id=OuterRef("trajectory_id")).filter(
        Q(decided_at__gt=OuterRef("decided_at")) | Q(decided_at=OuterRef("decided_at"), pk__gt=OuterRef("pk")))
    rows = (Adjudication.objects.exclude(decision="").filter(~Exists(newer)).order_by()
            .values_list("trajectory__votes__system", "trajectory__votes__vote", "decision")
            .annotate(n=Count("trajectory__votes")).filter(n__gt=0))
    stats = {system: {"votes": 0, "agreed": 0, "abstained": 0} for system in "ABC"}
    for system, vote, decided, n in rows:
        entry = stats[system]
        if vote == "abstain":
            entry["abstained"] += n
            continue
        entry["votes"] += n
        entry["agreed"] += n if vote == ADJUDICATION_OUTCOMES[decided] else 0
    for entry in stats.values():
        entry["rate"] = round(entry["agreed"] / entry["votes"], 3) if entry["votes"] else None
    return stats


def htsc_verdicts():
    """Verdicts HTSC reached by voting (not the ones flagged straight to a person)."""
    return Verdict.objects.exclude(rationale__startswith=FLAGGED)


def consensus_rate_by_day(days=30):
    """Share of HTSC verdicts that reached a decision (not Undetermined), per day (the last `days`
    days with verdicts), from the verdict tallies (flywheel/tallies.py)."""
    per_day = defaultdict(lambda: [0, 0])
    for day, outcome, n, _, _ in tallies.read(tallies.VERDICTS):
        per_day[day][0] += n if outcome != "undetermined" else 0
        per_day[day][1] += n
    ordered = sorted(per_day.items())[-days:]
    return [{"day": day.isoformat(), "verdicts": total, "rate": round(decided / total, 3)}
            for day, (decided, total) in ordered]


def consensus_since(moment=None) -> tuple[float | None, int]:
    """(consensus rate, verdicts counted) of the HTSC verdicts after `moment` (all when None)."""
    verdicts = htsc_verdicts()
    if moment is not None:
        verdicts = verdicts.filter(created_at__gt=moment)
    outcomes = list(verdicts.values_list("outcome", flat=True))
    return consensus_rate(outcomes), len(outcomes)


def rounds_table() -> dict:
    """The rounds oldest first with their consensus trend, and the live rate since the last one."""
    rounds = list(CalibrationRound.objects.select_related("created_by").order_by("number"))
    trend = consensus_trend([r.consensus_rate for r in rounds])
    rows = [{"round": r, "trend": t} for r, t in zip(rounds, trend)]
    live_rate, live_count = consensus_since(rounds[-1].created_at if rounds else None)
    live_trend = consensus_trend([r.consensus_rate for r in rounds] + [live_rate])[-1] if rounds else ""
    return {"rows": rows, "live": {"rate": live_rate, "verdicts": live_count, "trend": live_trend}}


# --- a calibration round ------------------------------------------------------------------------

class Case:
    """One adjudicated trajectory: what the person decided and what the systems saw."""

    def __init__(self, adjudication, view):
        self.adjudication = adjudication
        self.trajectory = adjudication.trajectory
        self.truth = ADJUDICATION_OUTCOMES[adjudication.decision]
        self.view = view
        self.milestones = (view.verification or {}).get("milestones") or []
        self.progress = (system_b.milestone_progress(view, self.milestones, skip_missing=True)
                         if self.milestones else [])
        # What System C's thresholds act on, measured once (as system_c.rules_vote measures it,
        # from the frames, each read once for every re-vote).
        self.frames = Frames(view)
        self.loop = system_c.trailing_loop(view, self.frames)
        self.shortest = len((view.known_path or {}).get("steps") or [])
        self.taken = sum(1 for s in view.steps if s.action)
        self.c_votes = {}


def adjudicated_cases(limit: int | None = None) -> list[Case]:
    """The newest decided adjudications (one per trajectory), with the trajectories' views."""
    cases, seen = [], set()
    decided = (Adjudication.objects.exclude(decision="").select_related("trajectory__query", "adjudicator")
               .order_by("-decided_at", "-pk"))
    for adjudication in decided[: (limit or max_cases()) * 2]:
        if adjudication.trajectory_id in seen:
            continue
        seen.add(adjudication.trajectory_id)
        cases.append(Case(adjudication, trajectory_view(adjudication.trajectory)))
        if len(cases) >= (limit or max_cases()):
            break
    return cases


def _b_vote(case: Case, share: float) -> str:
    if not case.milestones:
        return "abstain"
    progress = case.progress
    if share >= 1:  # as System B reads it: the first missing milestone ends the walk
        first_missing = next((i for i, r in enumerate(progress) if r is None), None)
        if first_missing is not None:
            progress = progress[:first_missing + 1]
    return system_b.milestone_vote(case.view, case.milestones, progress, share).vote


def _c_vote(case: Case, thresholds: dict) -> str:
    """System C's rules under `thresholds`; they only matter through "is it a loop" and "is it a
    detour", so each case is voted at most once per pair of answers."""
    key = (case.loop >= int(thresholds["loop_length"]),
           bool(case.shortest) and case.taken > float(thresholds["detour_factor"]) * case.shortest + 2)
    if key not in case.c_votes:
        case.c_votes[key] = system_c.rules_vote(case.view, thresholds, case.frames).vote
    return case.c_votes[key]


def _tally(cases, vote_of) -> tuple[int, int]:
    summary = agreement([(vote_of(case), case.truth) for case in cases])
    return summary["agreed"], summary["disagreed"]


def _nearest_first(values, current):
    return sorted(set(values) | {current}, key=lambda v: (abs(float(v) - float(current)), float(v)))


def choose_thresholds(cases: list[Case], current: dict) -> dict:
    """The thresholds that agree best with the people over `cases` (rules.calibration)."""
    share_now = float(current["B"]["milestone_share"])
    b_cases = [c for c in cases if c.milestones]
    shares = _nearest_first(CANDIDATES["milestone_share"], share_now)
    share = retroactively_calibrated_threshold(
        shares, {s: _tally(b_cases, lambda c, s=s: _b_vote(c, s)) for s in shares}, share_now)
    loop_now, detour_now = int(current["C"]["loop_length"]), float(current["C"]["detour_factor"])
    pairs = sorted(((loop, detour) for loop in _nearest_first(CANDIDATES["loop_length"], loop_now)
                    for detour in _nearest_first(CANDIDATES["detour_factor"], detour_now)),
                   key=lambda p: (abs(p[0] - loop_now) + abs(p[1] - detour_now), p))
    tallies = {p: _tally(cases, lambda c, p=p: _c_vote(c, {"loop_length": p[0], "detour_factor": p[1]}))
               for p in pairs}
    loop, detour = retroactively_calibrated_threshold(pairs, tallies, (loop_now, detour_now))
    return {"B": {"milestone_share": share}, "C": {"loop_length": loop, "detour_factor": detour}}


def measure(cases: list[Case], thresholds: dict) -> dict:
    """Agreement with the people of B and C (re-run by rules) under `thresholds`."""
    return {"B": agreement([(_b_vote(c, float(thresholds["B"]["milestone_share"])), c.truth) for c in cases]),
            "C": agreement([(_c_vote(c, thresholds["C"]), c.truth) for c in cases])}


def _history(view, limit=8) -> str:
    lines = []
    for step in view.steps[-limit:]:
        shown = " | ".join(page_text(parse_hierarchy(step.hierarchy)).split("\n")[:8])
        action = describe_action(step.action) if step.action else "(no action)"
        lines.append(f"Step {step.index}: screen shows: {shown[:200]} → {action}")
    return "\n".join(lines)


def choose_examples(cases: list[Case], count: int | None = None) -> list[dict]:
    """A few adjudicated cases for the judge's prompt: the ones a stored vote got wrong first
    (the judges' blind spots), spread over the people's outcomes and over tasks, newest first."""
    count = example_count() if count is None else count
    if count <= 0 or not cases:
        return []
    votes = defaultdict(set)
    for trajectory_id, vote in (Vote.objects.filter(trajectory_id__in=[c.trajectory.pk for c in cases],
                                                    system__in=["B", "C"])
                                .exclude(vote="abstain").values_list("trajectory_id", "vote")):
        votes[trajectory_id].add(vote)
    missed = {c.trajectory.pk for c in cases if votes[c.trajectory.pk] - {c.truth}}
    ordered = sorted(cases, key=lambda c: c.trajectory.pk not in missed)
    by_outcome = defaultdict(list)
    for case in ordered:
        by_outcome[case.truth].append(case)
    chosen, goals = [], set()
    while len(chosen) < count and any(by_outcome.values()):
        for outcome in sorted(by_outcome):
            waiting = by_outcome[outcome]
            if waiting and len(chosen) < count:
                # another task than those already shown, when there is one
                case = next((c for c in waiting if c.view.goal not in goals), waiting[0])
                waiting.remove(case)
                goals.add(case.view.goal)
                chosen.append(case)
    return [{"trajectory": c.trajectory.pk, "goal": c.view.goal[:300], "history": _history(c.view)[:1500],
             "outcome": c.truth, "decision": c.adjudication.decision, "note": (c.adjudication.note or "")[:200],
             "missed_by_systems": c.trajectory.pk in missed} for c in chosen]


def calibrate(user=None) -> CalibrationRound:
    """One round: thresholds that agree best with the adjudicators, judge examples, agreement
    before and after, and the consensus rate of the verdicts since the previous round.

    With fewer than CALIBRATION_MIN_CASES adjudicated trajectories the thresholds stay as they
    are (a round is still recorded, saying so). Raises ValueError when another round was just
    recorded at the same time.
    """
    previous = latest_round()
    current = active_thresholds()
    cases = adjudicated_cases()
    enough = len(cases) >= min_cases()
    chosen = choose_thresholds(cases, current) if enough else current
    chosen, purity_note, set_figures = where_purity_holds(chosen, CANDIDATES)
    before, after = measure(cases, current), measure(cases, chosen)
    changed = [f"{system}.{name}: {current[system][name]:g} → {value:g}"
               for system, values in chosen.items() for name, value in values.items()
               if float(value) != float(current[system][name])]
    note = ("" if enough else f"only {len(cases)} adjudicated trajectories (at least {min_cases()} needed): "
                              "thresholds kept")
    note = "; ".join(part for part in (note, purity_note) if part)
    after.update(changed=changed, note=note, stored=system_agreement(), judge_set=set_figures)
    rate, counted = consensus_since(previous.created_at if previous else None)
    try:
        with transaction.atomic():
            number = (CalibrationRound.objects.aggregate(n=Max("number"))["n"] or 0) + 1
            round_ = CalibrationRound.objects.create(
                number=number, adjudications_used=len(cases), thresholds=chosen, examples=choose_examples(cases),
                agreement_before=before, agreement_after=after, consensus_rate=rate, verdicts_counted=counted,
                created_by=user if getattr(user, "is_authenticated", False) else None)
    except IntegrityError:
        raise ValueError("another calibration round was recorded at the same moment; look at it first")
    log.info("calibration round %s: %s", round_.number, ", ".join(changed) or "thresholds kept")
    return round_
