"""The annotator's queue (the adjudicator's is in adjudication_views)."""
from django.shortcuts import render

from accounts.roles import ANNOTATOR, role_required
from flywheel.models import ModelVersion, Query, Trajectory
from flywheel.semi_auto import default_policy_version


@role_required(ANNOTATOR)
def my_queue(request):
    assigned = Query.objects.filter(assignee=request.user, status__in=["ready", "in_progress"])
    open_pool = Query.objects.filter(assignee__isnull=True, status="ready")
    in_progress = Trajectory.objects.filter(
        annotator=request.user, status__in=["running", "paused"]).select_related("query")
    return render(request, "annotation/my_queue.html", {
        "assigned": assigned.prefetch_related("app_links__app")[:100],
        "open_count": open_pool.count(),
        "open_next": open_pool.prefetch_related("app_links__app")[:20],
        "in_progress": in_progress,
        "policies": [default_policy_version(), *ModelVersion.objects.filter(kind="endpoint").order_by("name")],
    })
