"""The annotator's queue (the adjudicator's is in adjudication_views)."""
from django.db.models import Prefetch
from django.shortcuts import render

from accounts.roles import ANNOTATOR, role_required
from flywheel.models import ModelVersion, Query, QueryApp, Trajectory
from flywheel.policies import default_policy_version


@role_required(ANNOTATOR)
def my_queue(request):
    collectable = Query.objects.filter(evaluation_only=False)  # held-out queries are for the benchmark only
    assigned = collectable.filter(assignee=request.user, status__in=[Query.Status.READY, Query.Status.IN_PROGRESS])
    open_pool = collectable.filter(assignee__isnull=True, status=Query.Status.READY)
    in_progress = Trajectory.objects.filter(
        annotator=request.user, status__in=[Trajectory.Status.RUNNING, Trajectory.Status.PAUSED]).select_related(
        "query").only("status", "query__text")
    shown = ("key", "text", "tier", "status")  # a query's specs and labels are not listed here
    return render(request, "annotation/my_queue.html", {
        "assigned": assigned.only(*shown)[:100],
        "open_count": open_pool.count(),
        "open_next": open_pool.only(*shown).prefetch_related(Prefetch(
            "app_links", QueryApp.objects.select_related("app").only("query_id", "position", "app__package", "app__label")))[:20],
        "in_progress": in_progress,
        "policies": [default_policy_version(), *ModelVersion.objects.filter(kind=ModelVersion.Kind.ENDPOINT).order_by("name")],
    })
