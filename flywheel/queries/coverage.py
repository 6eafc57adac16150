"""Function-tree coverage (§2.2.1): leaves exercised by at least one successful trajectory / all leaves.

A leaf is exercised when a trajectory judged True (HTSC True, an adjudicator's "correct", a
semi-automatic trajectory verified step by step: all leave the verdict True) belongs to a query
linked to the leaf or to a reuse node of it (the same function by another path). The numbers are
read from the trajectories themselves, so they are right whatever order routing's after-commit
work runs in; `exercised_at` records when a leaf was first exercised, set as trajectories are routed.
"""
import logging

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from flywheel.models import App, FunctionNode, Outcome, QueryFunction, Trajectory
from flywheel.queries.function_tree.edit import leaves

log = logging.getLogger(__name__)
SUCCESSFUL = Q(verdict=Outcome.TRUE)


def _exercised_functions(app=None) -> set[int]:
    """Ids of the nodes whose function a successful trajectory did (a reuse node stands for its canonical)."""
    # Per node, the first of its queries with a successful trajectory (LIMIT 1 over the (query,
    # verdict) index): a few thousand nodes, each done at its first hit, instead of joining every
    # successful trajectory.
    succeeded = Trajectory.objects.filter(SUCCESSFUL, query_id=OuterRef("query_id"))
    first_hit = (QueryFunction.objects.filter(function_id=OuterRef("pk")).filter(Exists(succeeded))
                 .order_by().values("pk")[:1])
    nodes = FunctionNode.objects.annotate(hit=Subquery(first_hit)).filter(hit__isnull=False)
    if app is not None:
        nodes = nodes.filter(app=app)
    return set(nodes.order_by().values_list(Coalesce("reuse_of_id", "pk"), flat=True))


def _ratio(exercised, total):
    return round(exercised / total, 4) if total else 0.0


def coverage(app=None) -> dict:
    """{"leaves": n, "exercised": n, "ratio": float} for one app, or over every app."""
    leaf_ids = set(leaves(app).values_list("pk", flat=True))
    exercised = len(leaf_ids & _exercised_functions(app))
    return {"leaves": len(leaf_ids), "exercised": exercised, "ratio": _ratio(exercised, len(leaf_ids))}


def coverage_by_app(exercised_ids: set[int] | None = None) -> list[dict]:
    """One row per app that has leaves: {"app", "leaves", "exercised", "ratio"}, by package."""
    exercised_ids = _exercised_functions() if exercised_ids is None else exercised_ids
    per_app = {}
    for pk, app_id in leaves().order_by().values_list("pk", "app_id"):
        row = per_app.setdefault(app_id, [0, 0])
        row[0] += 1
        row[1] += pk in exercised_ids
    apps = App.objects.in_bulk(per_app)
    rows = [{"app": apps[app_id], "leaves": n, "exercised": done, "ratio": _ratio(done, n)}
            for app_id, (n, done) in per_app.items()]
    return sorted(rows, key=lambda row: row["app"].package)


def coverage_overview() -> dict:
    """{"overall": coverage(), "by_app": coverage_by_app()}, reading the successful trajectories once."""
    by_app = coverage_by_app(_exercised_functions())
    leaves_total, exercised = sum(row["leaves"] for row in by_app), sum(row["exercised"] for row in by_app)
    return {"overall": {"leaves": leaves_total, "exercised": exercised, "ratio": _ratio(exercised, leaves_total)},
            "by_app": by_app}


def mark_exercised(query_id, when=None) -> int:
    """Stamp the query's functions (and, for reuse nodes, their canonical node) as exercised now,
    where not already; return how many nodes were stamped."""
    ids = set()
    for function_id, reuse_of_id in QueryFunction.objects.filter(query_id=query_id).values_list(
            "function_id", "function__reuse_of_id"):
        ids.add(function_id)
        if reuse_of_id:
            ids.add(reuse_of_id)
    return FunctionNode.objects.filter(pk__in=ids, exercised_at__isnull=True).update(
        exercised_at=when or timezone.now())


def on_trajectory_routed(sender, trajectory_id, outcome, reason="", **kwargs):
    """Routing committed a verdict (HTSC's or an adjudicator's): a True one exercises the query's leaves."""
    if outcome != Outcome.TRUE:
        return
    try:
        with transaction.atomic():
            query_id = Trajectory.objects.filter(pk=trajectory_id).values_list("query_id", flat=True).first()
            if query_id is not None:
                mark_exercised(query_id)
    except Exception:  # coverage bookkeeping never breaks routing; the numbers come from verdicts anyway
        log.exception("coverage: trajectory %s not recorded", trajectory_id)
