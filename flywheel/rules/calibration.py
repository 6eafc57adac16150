"""Calibration that compounds (§2.4.2): human verdicts retroactively calibrate the evaluation
systems, so HTSC's consensus rate keeps rising across iterations.

Pure choices over tallies the service computes: which threshold value agrees best with the
people, what the consensus rate of a set of verdicts is, and whether it rose from round to round.
"""
from collections.abc import Hashable, Sequence

RISING, FALLING, LEVEL = "rising", "falling", "level"


def retroactively_calibrated_threshold(candidates: Sequence[Hashable], tallies: dict, current: Hashable):
    """The candidate value whose votes agree most with the adjudicators' decisions.

    tallies: value → (agreed, disagreed) over the same adjudicated cases (an abstention is
    neither). Most agreements wins; among equals, fewer disagreements; among those, the current
    value stays (a threshold only moves when the people's decisions say it should); otherwise the
    first in `candidates` (callers list them nearest the current value first).
    """
    if not candidates:
        return current
    scored = {value: tuple(tallies.get(value, (0, 0))) for value in candidates}
    best = max(agreed for agreed, _disagreed in scored.values())
    leaders = [v for v in candidates if scored[v][0] == best]
    fewest = min(scored[v][1] for v in leaders)
    leaders = [v for v in leaders if scored[v][1] == fewest]
    return current if current in leaders else leaders[0]


def consensus_rate(outcomes: Sequence[str]) -> float | None:
    """Share of HTSC verdicts that reached a decision (anything but Undetermined); None for none."""
    if not outcomes:
        return None
    decided = sum(1 for outcome in outcomes if outcome != "undetermined")
    return round(decided / len(outcomes), 3)


def consensus_trend(rates: Sequence[float | None], tolerance: float = 0.005) -> list[str]:
    """Per round (oldest first): rising / falling / level against the last round that had a rate;
    "" for the first rate and for rounds without one."""
    trend, previous = [], None
    for rate in rates:
        if rate is None or previous is None:
            trend.append("")
        elif rate > previous + tolerance:
            trend.append(RISING)
        elif rate < previous - tolerance:
            trend.append(FALLING)
        else:
            trend.append(LEVEL)
        if rate is not None:
            previous = rate
    return trend


def agreement(votes_and_truths: Sequence[tuple[str, str]]) -> dict:
    """{cases, agreed, disagreed, abstained, rate} of (system vote, human outcome) pairs; the rate
    is over the votes cast (None when the system abstained on every case)."""
    agreed = sum(1 for vote, truth in votes_and_truths if vote != "abstain" and vote == truth)
    abstained = sum(1 for vote, _truth in votes_and_truths if vote == "abstain")
    cast = len(votes_and_truths) - abstained
    return {"cases": len(votes_and_truths), "agreed": agreed, "disagreed": cast - agreed, "abstained": abstained,
            "rate": round(agreed / cast, 3) if cast else None}
