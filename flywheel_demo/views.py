"""The Flywheel demo page (managers and admins): launch the demo, follow it, read every kept report.

Writes go through flywheel_demo/orchestrator.py only.
"""
import json

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import ADMIN, MANAGER, role_required
from benchmark.charts import bar
from flywheel_demo.models import DemoRun
from flywheel_demo.orchestrator import DEFAULTS, cancel_demo, start_demo
from flywheel_demo.report import reports_directory, stored_reports
from training import runs as training_runs


def sr_chart(report: dict) -> dict | None:
    """SR per round on the held-out tasks, and the ablation beside the last round."""
    rounds = report.get("rounds") or []
    if not any(row.get("sr") is not None for row in rounds):
        return None
    labels = [f"round {row['round']}" for row in rounds]
    data = [row.get("sr") for row in rounds]
    ablation = report.get("ablation") or {}
    if ablation.get("sr") is not None:
        labels.append("ablation: no ECDM data")
        data.append(ablation["sr"])
    return bar(labels, [{"label": "held-out SR", "data": data}])


def _context(demo=None, report=None, name=""):
    report = report if report is not None else (demo.report if demo else {})
    return {"demo": demo, "report": report, "chart": sr_chart(report) if report else None, "report_name": name,
            "live": demo is not None and demo.status in DemoRun.LIVE}


@role_required(MANAGER, ADMIN)
def demo_home(request):
    demos = DemoRun.objects.select_related("created_by")[:50]
    latest = demos[0] if demos else None
    return render(request, "flywheel_demo/home.html", {
        **_context(latest), "demos": demos, "reports": stored_reports(), "defaults": DEFAULTS,
        "reports_directory": reports_directory(),
        "extras_installed": training_runs.training_extras_installed(), "install_hint": training_runs.INSTALL_HINT})


@role_required(MANAGER, ADMIN)
def demo_detail(request, demo_id):
    demo = get_object_or_404(DemoRun, pk=demo_id)
    return render(request, "flywheel_demo/detail.html", _context(demo))


@role_required(MANAGER, ADMIN)
def demo_live(request, demo_id):
    """The htmx partial the page polls while the demo runs."""
    demo = get_object_or_404(DemoRun, pk=demo_id)
    return render(request, "flywheel_demo/_live.html", _context(demo))


@role_required(MANAGER, ADMIN)
def demo_report_file(request, name):
    report = next((r for r in stored_reports(limit=10_000) if r["name"] == name), None)
    if report is None:
        raise Http404("no such report")
    return render(request, "flywheel_demo/detail.html", {**_context(None, report, name),
                                                          "raw": json.dumps(report, indent=2, default=str)})


@role_required(MANAGER, ADMIN)
@require_POST
def demo_start(request):
    config = {key: request.POST[key] for key in DEFAULTS if request.POST.get(key, "").strip()}
    try:
        demo = start_demo(request.user, config)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return redirect("flywheel-demo")
    messages.success(request, f"Flywheel demo #{demo.pk} is starting: the Celery workers run its rounds.")
    return redirect("flywheel-demo-detail", demo_id=demo.pk)


@role_required(MANAGER, ADMIN)
@require_POST
def demo_cancel(request, demo_id):
    demo = cancel_demo(get_object_or_404(DemoRun, pk=demo_id), request.user)
    messages.info(request, f"Flywheel demo #{demo.pk} is {demo.get_status_display().lower()}.")
    return redirect("flywheel-demo-detail", demo_id=demo.pk)
