"""The Flywheel demo page (managers and admins): launch the demo, follow it, read every kept report.

Writes go through flywheel_demo/orchestrator.py only.
"""
import json

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from accounts.roles import ADMIN, MANAGER, role_required
from flywheel_demo.models import DemoRun
from flywheel_demo.orchestrator import ARMS, DEFAULT_ARMS, DEFAULTS, cancel_demo, start_demo
from flywheel_demo.report import NO_ECDM, chart_svg, reports_directory, stored_reports
from training import runs as training_runs


def sr_chart(report: dict) -> str | None:
    """SR per round and per arm with their intervals: the SVG kept beside the report, drawn inline."""
    rounds = [row for row in report.get("rounds") or [] if isinstance(row, dict)]
    if not any(row.get("sr") is not None for row in rounds):
        return None
    return mark_safe(chart_svg(report))  # safe: numbers, and labels chart_svg escapes


def report_arms(report: dict) -> list[dict]:
    """The experiment arms of a report; an older report's one ablation reads as the no-ECDM arm."""
    if "arms" in report:
        return [row for row in report["arms"] or [] if isinstance(row, dict)]
    ablation = report.get("ablation") or {}
    if not ablation.get("tasks"):
        return []
    return [{**ablation, "arm": NO_ECDM, "what": "the last round's training without the ECDM-produced samples"}]


def target_rows(report: dict) -> list[dict]:
    """Each target in words, what was measured and whether it is met (an older report's targets
    are its gains paragraph instead)."""
    met, targets, figures = report.get("met") or {}, report.get("targets") or {}, report.get("figures") or {}
    if "gain_round0_to_last" not in met:
        return []
    last = figures.get("last_round")
    words = {(c.get("before"), c.get("after")): c.get("words") for c in report.get("comparisons") or []}
    false_success = figures.get(f"false_success_round{last}")
    return [
        {"what": f"round 0 → round {last}: at least {targets.get('gain_round0_to_last_pts')} points, "
                 "its 95% interval above 0", "measured": words.get(("r0", f"r{last}")) or "not evaluated",
         "met": met["gain_round0_to_last"]},
        {"what": f"round 1 → round {last}: at least {targets.get('gain_round1_to_last_pts')} points, "
                 "its 95% interval above 0", "measured": words.get(("r1", f"r{last}")) or "not evaluated",
         "met": met["gain_round1_to_last"]},
        {"what": f"false successes at round {last}: at most {100 * targets.get('false_success_last', 0):.0f}% "
                 "of its failed tasks",
         "measured": "no failed task" if false_success is None else f"{100 * false_success:.1f}%",
         "met": met.get("false_success_last")},
        {"what": f"the whole demo in at most {targets.get('minutes')} minutes",
         "measured": f"{figures.get('minutes')} minutes", "met": met.get("minutes")}]


def _context(demo=None, report=None, name=""):
    report = report if report is not None else (demo.report if demo else {})
    return {"demo": demo, "report": report, "chart": sr_chart(report) if report else None, "report_name": name,
            "arms": report_arms(report) if report else [], "target_rows": target_rows(report) if report else [],
            "live": demo is not None and demo.status in DemoRun.LIVE}


@role_required(MANAGER, ADMIN)
def demo_home(request):
    demos = DemoRun.objects.select_related("created_by")[:50]
    latest = demos[0] if demos else None
    return render(request, "flywheel_demo/home.html", {
        **_context(latest), "demos": demos, "reports": stored_reports(), "defaults": DEFAULTS,
        "arm_choices": [{"name": name, "what": what, "checked": name in DEFAULT_ARMS} for name, what in ARMS.items()],
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
    config["arms"] = request.POST.getlist("arms")  # none ticked: the rounds alone, no experiment arm
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
