"""Every failure's path through attribution and the ECDM (§2.5), counted so that nothing disappears.

A failed trajectory (verdict False or Env_ERROR; ECDM-made samples and continuations are never
failures of their own, and benchmark rollouts are scored by the benchmark, never repaired: their
destination is "benchmark") stands at exactly one stage, the first that holds of:

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

from django.db.models import Case, CharField, Count, Exists, IntegerField, OuterRef, Q, Subquery, Value, When
from django.db.models.fields.json import KeyTextTransform

from flywheel.models import Attribution, Line, Outcome, Repair, Trajectory
from flywheel.rules.salvage import SUPERVISION_PATHS, salvage_yield

FAILED = (Outcome.FALSE, Outcome.ENV_ERROR)
# Lines whose False or Env_ERROR trajectories are no failures for the ECDM: its own samples, and
# benchmark rollouts (held-out queries, scored for the SR of a model version, never training data).
NOT_ECDM_FAILURES = (Line.ECDM, Line.BENCHMARK)

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
    return trajectories.filter(verdict__in=FAILED).exclude(line__in=NOT_ECDM_FAILURES)


def _stage(level: str, path: str, owner: str, has_repair) -> Case:
    """The stage (module docstring) over the newest attribution's `level`, `path` and `owner`
    fields; `has_repair(**filters)` is the condition that the failure has such a repair."""
    return Case(
        When(**{f"{level}__isnull": True}, then=Value("unattributed")),
        When(has_repair(status=Repair.Status.DONE, sample__isnull=False, path__in=SALVAGE_REPAIR_PATHS),
             then=Value("repaired")),
        When(has_repair(status=Repair.Status.NEEDS_HUMAN), then=Value("needs_human")),
        When(has_repair(status=Repair.Status.PENDING), then=Value("pending")),
        When(has_repair(status=Repair.Status.FAILED), then=Value("repair_failed")),
        When(**{path: "counterfactual"}, then=Value("counterfactual")),
        When(**{owner: Attribution.Owner.ENVIRONMENT}, then=Value("environment")),
        When(**{owner: Attribution.Owner.QUERY_REVIEW}, then=Value("query_review")),
        When(**{owner: Attribution.Owner.RULE_FIX}, then=Value("rule_fix")),
        default=Value("no_repair"), output_field=CharField())


def with_failure_path(trajectories):
    """Annotate each trajectory with its newest attribution's level, cause, ECDM path and owner,
    and its stage (see the module's docstring). For listing a page of trajectories; counting many
    is failure_counts' job."""
    newest = Attribution.objects.filter(trajectory=OuterRef("pk")).order_by("-created_at", "-pk")

    def has_repair(**filters):
        return Exists(Repair.objects.filter(trajectory=OuterRef("pk"), **filters))

    return trajectories.annotate(
        ecdm_level=Subquery(newest.values("level")[:1]),
        ecdm_cause=Subquery(newest.values("cause")[:1]),
        ecdm_path=Subquery(newest.values("ecdm_path")[:1]),
        ecdm_owner=Subquery(newest.values("owner")[:1]),
    ).annotate(ecdm_stage=_stage("ecdm_level", "ecdm_path", "ecdm_owner", has_repair))


def salvage_path(path: str, by: str | None) -> str:
    """Where a repair's sample counts in the salvage yield: a step correction under who wrote it."""
    if path == Repair.Path.STEP:
        return "human" if by == "human" else "step"
    return path


def _group(group_by, prefix=""):
    """What failures are grouped by: a trajectory field (through `prefix`), or one group (None)."""
    return f"{prefix}{group_by}" if group_by else Value(None, output_field=IntegerField())


def _salvage_counts(failed, group_by):
    """{group: Counter(salvage path)}: each salvaged failure once, under its first done repair."""
    salvaging = Repair.objects.filter(status=Repair.Status.DONE, sample__isnull=False, path__in=SALVAGE_REPAIR_PATHS)
    earlier = salvaging.filter(trajectory_id=OuterRef("trajectory_id")).filter(
        Q(created_at__lt=OuterRef("created_at")) | Q(created_at=OuterRef("created_at"), pk__lt=OuterRef("pk")))
    rows = (salvaging.filter(trajectory_id__in=failed.order_by().values("pk")).filter(~Exists(earlier)).order_by()
            .values_list(_group(group_by, "trajectory__"), "path", KeyTextTransform("by", "correction"))
            .annotate(n=Count("*")))
    counts: dict = {}
    for key, path, by, n in rows:
        counts.setdefault(key, Counter())[salvage_path(path, by)] += n
    return counts


def empty_counts():
    """Raw counts of no failure (failure_counts' values; ledger_of turns them into a ledger)."""
    return {"failed": 0, "levels": Counter(), "paths": Counter(), "stages": Counter(), "salvaged": Counter()}


def ledger_of(counts: dict) -> dict:
    """The ledger the pages show, from raw counts."""
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


def failure_counts(trajectories, group_by: str | None = None, all_repairs: bool = False) -> dict:
    """{group (None without `group_by`): raw counts} of the failures among `trajectories`.

    Counted in SQL set by set, so the cost does not grow by a subquery per failure: the newest
    attribution of each failure (an anti-join), its stage from hashed lists of the repairs'
    trajectories, grouped; the failures without attribution; the salvaged ones (three statements).
    The lists hold the repairs of these failures, or with `all_repairs` every repair (the same
    answer, cheaper when `trajectories` are all of them)."""
    failed = failures(trajectories).order_by()
    newer = Attribution.objects.filter(trajectory_id=OuterRef("trajectory_id")).filter(
        Q(created_at__gt=OuterRef("created_at")) | Q(created_at=OuterRef("created_at"), pk__gt=OuterRef("pk")))

    def has_repair(**filters):
        repairs = Repair.objects.all() if all_repairs else Repair.objects.filter(trajectory_id__in=failed.values("pk"))
        return Q(trajectory_id__in=repairs.filter(**filters).order_by().values("trajectory_id"))

    attributed = (Attribution.objects.filter(trajectory__in=failed.values("pk")).filter(~Exists(newer)).order_by()
                  .annotate(stage=_stage("level", "ecdm_path", "owner", has_repair))
                  .values_list(_group(group_by, "trajectory__"), "level", "ecdm_path", "stage").annotate(n=Count("*")))
    unattributed = (failed.filter(~Exists(Attribution.objects.filter(trajectory=OuterRef("pk"))))
                    .values_list(_group(group_by)).annotate(n=Count("*")))
    groups: dict = {}
    for group, level, path, stage, n in attributed:
        counts = groups.setdefault(group, empty_counts())
        counts["failed"] += n
        counts["stages"][stage] += n
        counts["levels"][level] += n
        counts["paths"][path or ""] += n
    for group, n in unattributed:
        counts = groups.setdefault(group, empty_counts())
        counts["failed"] += n
        counts["stages"]["unattributed"] += n
    for group, salvaged in _salvage_counts(failed, group_by).items():
        groups.setdefault(group, empty_counts())["salvaged"] += salvaged
    return groups


def merge_counts(*counts: dict) -> dict:
    """Raw counts of several sets of failures added up."""
    merged = empty_counts()
    for one in counts:
        for name in ("levels", "paths", "stages", "salvaged"):
            merged[name] += one[name]
        merged["failed"] += one["failed"]
    return merged


def failure_ledger(trajectories, group_by: str | None = None):
    """The ECDM counts of the failures among `trajectories`: failed, attributed by level,
    dispatched by path, stage counts (they add up to `failed`), salvaged by path and the salvage
    yield (flywheel.rules.salvage). With `group_by` (a field such as "run_id"): {value: counts}."""
    groups = failure_counts(trajectories, group_by)
    if group_by:
        return {key: ledger_of(counts) for key, counts in groups.items()}
    return ledger_of(groups.get(None) or empty_counts())


def empty_ledger() -> dict:
    return ledger_of(empty_counts())


def filter_stage(trajectories, stage: str):
    """The failures among `trajectories` at `stage` (annotated with their path)."""
    return with_failure_path(failures(trajectories)).filter(ecdm_stage=stage)
