"""Role homes, the manager dashboard, task state, /healthz and /metrics."""
import hmac

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from django.views.static import serve
from django_celery_results.models import TaskResult
from prometheus_client import CONTENT_TYPE_LATEST

from accounts.roles import ADJUDICATOR, ADMIN, ANNOTATOR, MANAGER, has_role, role_required, user_roles
from flywheel.access import blob_visible_to
from flywheel.console.dashboard import dashboard_counts
from flywheel.console.metrics import render_metrics
from flywheel.console.system_health import public_summary, system_health
from flywheel.console.workers import ANSWER_WITHIN_S, phone_hosts, worker_queues
from flywheel.judging.calibration import consensus_rate_by_day, system_agreement
from flywheel.tasks import ping

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
    if request.headers.get("HX-Request"):  # the rows poll every 3 s: without the workers' second of waiting
        return render(request, "flywheel/_task_rows.html", {"tasks": tasks})
    workers, broker_error = worker_queues()
    return render(request, "flywheel/tasks.html", {"tasks": tasks, "workers": workers, "broker_error": broker_error,
                                                   "answer_within_s": ANSWER_WITHIN_S, "phone_hosts": phone_hosts()})


@role_required(MANAGER)
@require_POST
def task_ping(request):
    """Send a real task through the broker to a worker, so the page shows the pipeline alive."""
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


def _bearer_token(request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


@never_cache
@require_GET
def metrics(request):
    """Prometheus' text exposition (flywheel/console/metrics.py), for its scraper with
    `Authorization: Bearer <METRICS_TOKEN>` or for a signed-in admin, manager or staff member.
    A scraper understands 401 + WWW-Authenticate, not a redirect to the login page."""
    token, expected = _bearer_token(request), settings.METRICS_TOKEN
    if token is not None:
        if not (expected and hmac.compare_digest(token.encode(), expected.encode())):
            return _unauthorized("wrong metrics token" if expected else "token access is off (METRICS_TOKEN is empty)")
    elif not request.user.is_authenticated:
        return _unauthorized("sign in, or send Authorization: Bearer <METRICS_TOKEN>")
    elif not (request.user.is_staff or has_role(request.user, MANAGER)):
        return HttpResponse("Metrics need the admin or manager role.\n", status=403, content_type="text/plain")
    return HttpResponse(render_metrics(), content_type=CONTENT_TYPE_LATEST)


metrics.required_roles = (MANAGER,)  # what the route table's permission tests check (admins pass too)


def _unauthorized(reason):
    response = HttpResponse(f"{reason}\n", status=401, content_type="text/plain")
    response["WWW-Authenticate"] = 'Bearer realm="flywheel metrics"'
    return response


@role_required()
def media(request, path):
    """Serve a stored screenshot or dump (filesystem storage only) to someone who may see a step
    that shows it (flywheel.access); to anyone else it does not exist."""
    if not blob_visible_to(request.user, path):
        raise Http404("No such file.")
    return serve(request, path, document_root=settings.MEDIA_ROOT)
