"""How well each HTSC system agrees with people, and the consensus rate over time (§2.4.2).

Human verdicts calibrate the systems: an adjudicated trajectory tells, for each system, whether
its vote matched the human outcome.
"""
from collections import defaultdict

from django.db.models.functions import TruncDate

from flywheel.models import Adjudication, Verdict, Vote
from flywheel.rules.htsc import ADJUDICATION_OUTCOMES


def system_agreement():
    """Per system: votes cast on adjudicated trajectories, how many matched the person, the rate."""
    decided = {a.trajectory_id: ADJUDICATION_OUTCOMES[a.decision]
               for a in Adjudication.objects.exclude(decision="")}
    stats = {system: {"votes": 0, "agreed": 0, "abstained": 0} for system in "ABC"}
    for vote in Vote.objects.filter(trajectory_id__in=decided):
        entry = stats[vote.system]
        if vote.vote == "abstain":
            entry["abstained"] += 1
            continue
        entry["votes"] += 1
        entry["agreed"] += vote.vote == decided[vote.trajectory_id]
    for entry in stats.values():
        entry["rate"] = round(entry["agreed"] / entry["votes"], 3) if entry["votes"] else None
    return stats


def consensus_rate_by_day(days=30):
    """Share of HTSC verdicts that reached a decision (not Undetermined), per day."""
    per_day = defaultdict(lambda: [0, 0])
    rows = (Verdict.objects.annotate(day=TruncDate("created_at"))
            .values_list("day", "outcome").order_by("day"))
    for day, outcome in rows:
        per_day[day][0] += outcome != "undetermined"
        per_day[day][1] += 1
    ordered = sorted(per_day.items())[-days:]
    return [{"day": day.isoformat(), "verdicts": total, "rate": round(decided / total, 3)}
            for day, (decided, total) in ordered]
