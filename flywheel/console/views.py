"""Role homes, the manager dashboard, task state and /healthz."""
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from django_celery_results.models import TaskResult

from accounts.roles import ADJUDICATOR, ADMIN, ANNOTATOR, MANAGER, has_role, role_required, user_roles
from flywheel.console.dashboard import dashboard_counts
from flywheel.console.system_health import public_summary, system_health
from flywheel.evaluation.calibration import consensus_rate_by_day, system_agreement

ROLE_HOMES = [(ADMIN, "admin-home"), (MANAGER, "dashboard"), (ADJUDICATOR, "adjudication-queue"),
              (ANNOTATOR, "my-queue")]


@login_required
def home(request):
    """Send each person to their role's home; people without a role learn why."""
    roles = user_roles(request.user)
    for role, url_name in ROLE_HOMES:
        if role in roles:
            return redirect(url_name)
    return render(request, "no_role.html", status=403)


@role_required(MANAGER)
def dashboard(request):
    return render(request, "flywheel/dashboard.html", {
        "counts": dashboard_counts(), "agreement": system_agreement(),
        "consensus": consensus_rate_by_day()})


@role_required(MANAGER)
def dashboard_counts_fragment(request):
    """The counts alone, for htmx polling."""
    return render(request, "flywheel/_dashboard_counts.html", {"counts": dashboard_counts()})


@role_required(ADMIN)
def admin_home(request):
    return render(request, "flywheel/admin_home.html")


@role_required(MANAGER)
def task_list(request):
    tasks = TaskResult.objects.order_by("-date_created")[:100]
    template = "flywheel/_task_rows.html" if request.headers.get("HX-Request") else "flywheel/tasks.html"
    return render(request, template, {"tasks": tasks})


@role_required(MANAGER)
@require_POST
def task_ping(request):
    """Send a real task through the broker to a worker, so the page shows the pipeline alive."""
    from flywheel.tasks import ping

    ping.delay("dashboard")
    return redirect("task-list")


@never_cache
def healthz(request):
    """Public: status words only (for probes and `make up`); managers and admins signed in also get
    each component's details (errors, worker names, ADB addresses, timings)."""
    status, body = system_health()
    if not has_role(request.user, MANAGER):
        body = public_summary(body)
    return JsonResponse(body, status=status)


@role_required()
def media(request, path):
    """Serve a stored screenshot or dump (filesystem storage only) to someone who may see a step
    that shows it (flywheel.access); to anyone else it does not exist."""
    from django.conf import settings
    from django.http import Http404
    from django.views.static import serve

    from flywheel.access import blob_visible_to

    if not blob_visible_to(request.user, path):
        raise Http404("No such file.")
    return serve(request, path, document_root=settings.MEDIA_ROOT)
