"""Every failure's path through attribution and the ECDM (§2.5), counted so that nothing disappears.

A failed trajectory (verdict False or Env_ERROR; ECDM-made samples and continuations are never
failures of their own) stands at exactly one stage, the first that holds of:

    unattributed     the cascade has not attributed it yet (the ECDM's sweep will)
    repaired         one of its repairs is done with a sample in the SFT pool
    needs_human      a repair waits for a person (the human repair queue)
    pending          a repair is under way
    repair_failed    its repair failed (the reason is on the repair)
    counterfactual   its recurring class is repaired by counterfactual derivation, not it
    environment      Level 1 with no dismissible interruption: self-healing + re-collection
    query_review     Level 2 task-specification defect: back to query review
    rule_fix         Level 2 verifier defect: the rule is flagged for fixing
    no_repair        a model failure with nothing to anchor a repair on

so the stages of a set of failures add up to its number of failures.
"""
from collections import Counter

from django.db.models import Case, CharField, Exists, OuterRef, Subquery, Value, When

from flywheel.models import Attribution, Line, Outcome, Repair, Trajectory
from flywheel.rules.salvage import SUPERVISION_PATHS, salvage_yield

FAILED = (Outcome.FALSE, Outcome.ENV_ERROR)

STAGES = [
    ("unattributed", "Not yet attributed"),
    ("repaired", "Repaired: sample in the SFT pool (ecdm_repaired)"),
    ("needs_human", "Needs a person (repair queue)"),
    ("pending", "Repair under way"),
    ("repair_failed", "Repair failed (reason recorded)"),
    ("counterfactual", "Recurring class: counterfactual derivation"),
    ("environment", "Environment: self-healing + re-collection"),
    ("query_review", "Task defect: back to query review"),
    ("rule_fix", "Verifier defect: rule flagged for fixing"),
    ("no_repair", "Model failure, nothing to anchor a repair"),
]
STAGE_LABELS = dict(STAGES)
LEVELS = [(1, "L1 environment"), (2, "L2 task / verifier"), (3, "L3 model")]
PATHS = [("step", "Step-level correction"), ("rqa", "RQA"), ("counterfactual", "Counterfactual"),
         ("env", "Env pop-up repair"), ("", "No ECDM repair")]
SALVAGE_LABELS = {"step": "Teacher step correction", "human": "Human repair", "rqa": "RQA",
                  "env": "Env repair"}
SALVAGE_REPAIR_PATHS = (Repair.Path.STEP, Repair.Path.RQA, Repair.Path.ENV)


def failures(trajectories=None):
    """The failures the ECDM owns among `trajectories`."""
    trajectories = Trajectory.objects.all() if trajectories is None else trajectories
    return trajectories.filter(verdict__in=FAILED).exclude(line=Line.ECDM)


def with_failure_path(trajectories):
    """Annotate each trajectory with its newest attribution's level, cause, ECDM path and owner,
    and its stage (see the module's docstring)."""
    newest = Attribution.objects.filter(trajectory=OuterRef("pk")).order_by("-created_at", "-pk")
    repairs = Repair.objects.filter(trajectory=OuterRef("pk"))
    salvaged = repairs.filter(status=Repair.Status.DONE, sample__isnull=False, path__in=SALVAGE_REPAIR_PATHS)
    stage = Case(
        When(ecdm_level__isnull=True, then=Value("unattributed")),
        When(Exists(salvaged), then=Value("repaired")),
        When(Exists(repairs.filter(status=Repair.Status.NEEDS_HUMAN)), then=Value("needs_human")),
        When(Exists(repairs.filter(status=Repair.Status.PENDING)), then=Value("pending")),
        When(Exists(repairs.filter(status=Repair.Status.FAILED)), then=Value("repair_failed")),
        When(ecdm_path="counterfactual", then=Value("counterfactual")),
        When(ecdm_owner=Attribution.Owner.ENVIRONMENT, then=Value("environment")),
        When(ecdm_owner=Attribution.Owner.QUERY_REVIEW, then=Value("query_review")),
        When(ecdm_owner=Attribution.Owner.RULE_FIX, then=Value("rule_fix")),
        default=Value("no_repair"), output_field=CharField())
    return trajectories.annotate(
        ecdm_level=Subquery(newest.values("level")[:1]),
        ecdm_cause=Subquery(newest.values("cause")[:1]),
        ecdm_path=Subquery(newest.values("ecdm_path")[:1]),
        ecdm_owner=Subquery(newest.values("owner")[:1]),
    ).annotate(ecdm_stage=stage)


def salvage_path(path: str, by: str | None) -> str:
    """Where a repair's sample counts in the salvage yield: a step correction under who wrote it."""
    if path == Repair.Path.STEP:
        return "human" if by == "human" else "step"
    return path


def _salvage_rows(failed):
    """(trajectory_id, salvage path) of each salvaged failure, once, under its first done repair."""
    rows = (Repair.objects.filter(trajectory__in=failed.values("pk"), status=Repair.Status.DONE,
                                  sample__isnull=False, path__in=SALVAGE_REPAIR_PATHS)
            .order_by("created_at", "pk").values_list("trajectory_id", "path", "correction"))
    first = {}
    for trajectory_id, path, correction in rows:
        by = correction.get("by") if isinstance(correction, dict) else None
        first.setdefault(trajectory_id, salvage_path(path, by))
    return first


def _empty():
    return {"failed": 0, "levels": Counter(), "paths": Counter(), "stages": Counter(), "salvaged": Counter()}


def _finish(counts: dict) -> dict:
    failed = counts["failed"]
    salvaged = {path: counts["salvaged"].get(path, 0) for path in SUPERVISION_PATHS}
    stages = [(key, label, counts["stages"].get(key, 0)) for key, label in STAGES]
    attributed = failed - counts["stages"].get("unattributed", 0)
    return {
        "failed": failed, "attributed": attributed,
        "levels": [(level, label, counts["levels"].get(level, 0)) for level, label in LEVELS],
        "paths": [(path or "none", label, counts["paths"].get(path, 0)) for path, label in PATHS],
        "stages": stages, "stage": {key: n for key, _, n in stages},
        "accounted": sum(n for _, _, n in stages),
        "salvaged": [(path, SALVAGE_LABELS[path], salvaged[path]) for path in SUPERVISION_PATHS],
        "salvaged_total": sum(salvaged.values()),
        "salvage_yield": salvage_yield(failed, salvaged),
    }


def failure_ledger(trajectories, group_by: str | None = None):
    """The ECDM counts of the failures among `trajectories`: failed, attributed by level,
    dispatched by path, stage counts (they add up to `failed`), salvaged by path and the salvage
    yield (flywheel.rules.salvage). With `group_by` (a field such as "run_id"): {value: counts}."""
    failed = failures(trajectories)
    salvaged = _salvage_rows(failed)
    groups: dict = {}
    for row in with_failure_path(failed).order_by().values_list(
            "pk", group_by or "pk", "ecdm_level", "ecdm_path", "ecdm_stage"):
        pk, key, level, path, stage = row
        counts = groups.setdefault(key if group_by else None, _empty())
        counts["failed"] += 1
        counts["stages"][stage] += 1
        if level is not None:
            counts["levels"][level] += 1
            counts["paths"][path or ""] += 1
        if pk in salvaged:
            counts["salvaged"][salvaged[pk]] += 1
    if group_by:
        return {key: _finish(counts) for key, counts in groups.items()}
    return _finish(groups.get(None) or _empty())


def empty_ledger() -> dict:
    return _finish(_empty())


def filter_stage(trajectories, stage: str):
    """The failures among `trajectories` at `stage` (annotated with their path)."""
    return with_failure_path(failures(trajectories)).filter(ecdm_stage=stage)
