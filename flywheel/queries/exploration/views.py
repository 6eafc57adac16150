"""Exploration pages (managers, admins): launch a run, watch it, read its report, cancel it."""
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import MANAGER, role_required
from devices.models import Device
from flywheel.models import App, ExplorationRun, GemPage
from flywheel.models.exploration import RunStatus
from flywheel.polling import render_live
from flywheel.queries.exploration.runs import DEFAULT_CONFIG, cancel_exploration, launch_exploration
from flywheel.rules.numbers import whole_number

BUDGET_FIELDS = ("max_depth", "max_pages", "max_seconds", "phones")


def explorable_apps() -> list[tuple[str, str]]:
    """(package, label) of apps on registered phones, and App rows that are not system surfaces."""
    packages = {p for apps in Device.objects.values_list("installed_apps", flat=True) for p in apps or []}
    packages |= set(App.objects.filter(is_system=False).values_list("package", flat=True))
    return sorted(App.display_labels(packages).items(), key=lambda pair: (pair[1].lower(), pair[0]))


@role_required(MANAGER)
def exploration_list(request):
    if request.method == "POST":
        apps = [app for app in request.POST.getlist("apps") if app]
        config = {}
        for field in BUDGET_FIELDS:
            value = request.POST.get(field, "").strip()
            if value:
                config[field] = whole_number(value)
                if config[field] is None:
                    messages.error(request, f"{field.replace('_', ' ')} must be a whole number.")
                    return redirect("exploration-list")
        if not apps:
            messages.error(request, "Choose at least one app to explore.")
            return redirect("exploration-list")
        run = launch_exploration(apps, config, user=request.user)
        messages.success(request, f"{run} launched for {len(apps)} app(s).")
        return redirect("exploration-detail", run_id=run.pk)
    runs = list(ExplorationRun.objects.select_related("created_by")[:50])
    names = App.display_labels(p for run in runs for p in run.apps)
    for run in runs:
        run.app_names = [names.get(p, p) for p in run.apps]
    return render(request, "flywheel/exploration_list.html", {
        "runs": runs,
        "apps": explorable_apps(), "defaults": DEFAULT_CONFIG,
        "idle_phones": Device.objects.filter(status=Device.Status.IDLE).count(),
    })


# What a problem's kind means, for the page (explorer.py and runs.py record the kinds).
PROBLEM_KINDS = {
    "dump_failed": "Screen not read", "blocked_by_audit": "Blocked by the safety audit", "budget": "Budget reached",
    "unreachable": "Page not reached again", "lost": "Lost its way", "crash": "App crashed", "phone": "Phone problem",
    "error": "Unexpected error", "no_phone": "No phone",
}
# An unexpected error's text is a programmer's (an exception); the worker's log has it with its traceback.
ERROR_DETAIL = "exploring this app stopped on an unexpected error; the worker's log has the details"


def app_status(run, progress: dict) -> str:
    """An app's state in the run: "queued" until a phone starts on it. Runs before #31 left an app
    "queued" while its phone explored it; actions recorded while the run is running say otherwise."""
    status = progress.get("status", "queued")
    if status == "queued" and progress.get("actions") and run.status == RunStatus.RUNNING:
        return "exploring"
    return status


def problem_rows(run, names) -> list[dict]:
    return [{"at": problem.get("at"), "app": names.get(problem.get("app"), ""),
             "kind": PROBLEM_KINDS.get(problem.get("kind"), str(problem.get("kind", "")).replace("_", " ")),
             "detail": ERROR_DETAIL if problem.get("kind") == "error" else problem.get("detail", "")}
            for problem in reversed(run.problems[-100:])]


def _app_rows(run, names):
    rows = []
    for package in run.apps:
        report = run.report.get(package, {})
        progress = run.progress.get(package, {})
        rows.append({"package": package, "app": names.get(package, package), "status": app_status(run, progress),
                     "pages": progress.get("pages", 0), "edges": progress.get("edges", 0),
                     "frontier": progress.get("frontier", 0), "actions": progress.get("actions", 0),
                     "merged": report.get("merged_duplicates", 0), "thresholds": report.get("thresholds", {}),
                     "skipped": report.get("skipped_irreversible", 0), "blocked": report.get("blocked_by_audit", 0),
                     "device": progress.get("device", "")})
    return rows


@role_required(MANAGER)
def exploration_detail(request, run_id):
    run = get_object_or_404(ExplorationRun, pk=run_id)
    live = run.status in (RunStatus.QUEUED, RunStatus.RUNNING)
    names = App.display_labels([*run.apps, *(problem.get("app") for problem in run.problems[-100:])])
    context = {"run": run, "rows": _app_rows(run, names), "live": live, "app_names": [names[p] for p in run.apps],
               "problems": problem_rows(run, names),
               "pages": GemPage.objects.filter(explored_by=run).select_related("app").order_by("app__package", "depth")[:300]}
    return render_live(request, "flywheel/exploration_detail.html", context, live=live,
                       panel="flywheel/_exploration_live.html")


@role_required(MANAGER)
@require_POST
def exploration_cancel(request, run_id):
    run = get_object_or_404(ExplorationRun, pk=run_id)
    cancel_exploration(run)
    messages.info(request, f"{run} cancelled: phones stop after their current action and are reset.")
    return redirect("exploration-detail", run_id=run.pk)
