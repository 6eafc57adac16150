"""The SFT rows one judge alone would admit: the ablation of HTSC (§2.4.1) behind the demo's
"single judge" arm. Never stored: the pool holds what HTSC and the people it asked admitted, and a
snapshot with `success_judge` reads the same judged trajectories as if one system's vote decided.

- kept: pool rows HTSC did not judge (ECDM-repaired, semi-automatic) stay as they are;
- the judged intakes (HTSC True, adjudicated) keep only trajectories the judge calls True;
- every other judged trajectory the judge calls True joins (source `single_judge_true`): the
  false successes a second and third judge would have caught. It passes the SFT intake's
  consistency gate as routing would have run it (flywheel/pools/sft.py), without a model to
  regenerate reasoning: a step the gate fails gives no sample (as "no regenerator" would).
A trajectory counts as judged once HTSC wrote a verdict on it; its judge's latest vote decides.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import OuterRef, Subquery

from flywheel.models import SftEntry, Trajectory, Vote, VoteValue
from flywheel.pools.sft import run_gate

JUDGED_INTAKES = (SftEntry.Intake.HTSC_TRUE, SftEntry.Intake.ADJUDICATED)
SINGLE_JUDGE_SOURCE = "single_judge_true"
SYSTEMS = tuple(Vote.System.values)


@dataclass(frozen=True)
class JudgedRow:
    """A judged trajectory that is not in the SFT pool but the single judge calls a success."""
    trajectory: Trajectory
    not_labels: frozenset = frozenset()  # step indices the consistency gate fails
    pk: None = None
    intake: str = SINGLE_JUDGE_SOURCE


def latest_vote(system: str):
    return Subquery(Vote.objects.filter(trajectory=OuterRef("pk"), system=system)
                    .order_by("-created_at", "-pk").values("vote")[:1])


def single_judge_rows(system: str, pool_rows, trajectories) -> tuple[list, dict]:
    """(rows, stats): `pool_rows` (SftEntry queryset, already filtered) re-routed as if judge
    `system` alone decided, over the judged `trajectories` (a Trajectory queryset filtered the same
    way); rows in pool-row order, added trajectories after them in id order."""
    if system not in SYSTEMS:
        raise ValueError(f"success_judge must be one of {', '.join(SYSTEMS)}, not {system!r}")
    says_true = (trajectories.filter(verdicts__isnull=False).annotate(judge_vote=latest_vote(system))
                 .filter(judge_vote=VoteValue.TRUE).distinct())
    admitted = set(says_true.values_list("pk", flat=True))
    rows, dropped, in_pool = [], 0, set()
    for row in pool_rows.order_by("pk"):
        if row.intake in JUDGED_INTAKES:
            in_pool.add(row.trajectory_id)
            if row.trajectory_id not in admitted:
                dropped += 1
                continue
        rows.append(row)
    added = [JudgedRow(trajectory, frozenset(issue.step_index for issue in run_gate(trajectory).issues))
             for trajectory in says_true.exclude(pk__in=in_pool).order_by("pk")]
    return rows + added, {"system": system, "judged_rows_dropped": dropped, "added": len(added)}
