"""The semi-automatic session page (§2.3.2): a person verifies, step by step, what a policy proposes.

The engine is flywheel/collection/semi_auto.py; these views only take requests, check who may act, and
answer pages or JSON. Drawing, dragging and keyboard shortcuts live in static/js/session.js and the
action editor it shares with the repair page, static/js/action_editor.js.
"""
import json

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.roles import ADMIN, ANNOTATOR, has_role, role_required
from devices.actions import ACTIONS, SYSTEM_BUTTONS, TERMINATE_STATUSES
from flywheel.collection import semi_auto
from flywheel.collection.edits import EditError
from flywheel.collection.semi_auto import OutcomeUnconfirmed, SessionError
from flywheel.models import Line, ModelVersion, Query, Trajectory
from flywheel.policies.protocol import TAGS
from flywheel.rules.numbers import whole_number
from flywheel.rules.stops import StopKind

SHORTCUTS = [
    ("Enter", "confirm and execute the action"), ("Ctrl+Enter", "confirm while typing in a field"),
    ("Z / Ctrl+Z", "undo the last edit (not yet executed)"), ("Esc", "back to the proposal"),
    ("← ↑ → ↓", "nudge the tap box 5 px (Shift: 25 px)"), ("H", "act on the screen by hand"),
    ("C", "click"), ("D", "double_click"), ("T", "type"), ("B", "system_button"), ("S", "swipe"),
    ("G", "drag"), ("L", "long_press"), ("O", "open"), ("V", "set_scroll_widget"), ("N", "take_notes"),
    ("W", "wait"), ("E", "terminate"), ("Q", "clarify"), ("U", "call_user"),
    ("R", "edit the reasoning"), ("P", "pause / resume"), ("X", "not executable…"), ("?", "show these keys"),
    ("F / I", "ending without success: failure / infeasible (Enter confirms, Esc goes back)"),
]


def _own_trajectory(request, pk):
    trajectory = get_object_or_404(Trajectory.objects.select_related("query", "device", "model_version"),
                                   pk=pk, line=Line.SEMI_AUTO)
    if trajectory.annotator_id != request.user.pk and not has_role(request.user, ADMIN):
        raise PermissionDenied("This session belongs to another annotator.")
    return trajectory


@role_required(ANNOTATOR)
@require_POST
def take_next(request):
    """The next query of my queue (assigned first), a matching phone, a reset, then the session."""
    version = None
    if request.POST.get("model_version"):
        version = get_object_or_404(ModelVersion, pk=request.POST["model_version"])
    if request.POST.get("query"):
        query = get_object_or_404(Query, pk=request.POST["query"], status=Query.Status.READY, evaluation_only=False)
        if query.assignee_id not in (None, request.user.pk):
            raise PermissionDenied("That query is assigned to someone else.")
        if not Query.objects.filter(pk=query.pk, status=Query.Status.READY).update(status=Query.Status.IN_PROGRESS, assignee=request.user):
            messages.error(request, "Someone took that query first.")
            return redirect("my-queue")
    else:
        query = semi_auto.next_query_for(request.user)
    if query is None:
        messages.info(request, "Your queue is empty: nothing is assigned to you and no open query is ready.")
        return redirect("my-queue")
    try:
        trajectory = semi_auto.start_session(query, request.user, model_version=version)
    except SessionError as error:
        messages.error(request, str(error))
        return redirect("my-queue")
    _prepare_or_say_why(request, trajectory)
    return redirect("session", pk=trajectory.pk)


def _must_take_the_phone_again(trajectory) -> bool:
    """The page was left, or the lease expired: the session picks up again by POST (session_prepare)."""
    if trajectory.status == Trajectory.Status.PAUSED:
        return trajectory.stop_kind == StopKind.LEFT_THE_PAGE
    return trajectory.status == Trajectory.Status.RUNNING and semi_auto.live_lease(trajectory) is None


@role_required(ANNOTATOR)
def session(request, pk):
    """The page shows what is stored; it changes nothing (GET is safe). Taking the phone again and
    observing and proposing the next step are POSTs (session_prepare), never opening the page."""
    trajectory = _own_trajectory(request, pk)
    running = trajectory.status == Trajectory.Status.RUNNING
    step = semi_auto.pending_step(trajectory) if running else None
    preparing = _must_take_the_phone_again(trajectory) or (running and step is None)
    if preparing:
        step = None
    done = trajectory.steps.filter(executed_action__isnull=False).order_by("index")
    screen = (step.timings.get("screen") if step else None) or [1080, 2400]
    page = {
        "step": step.index if step else None,
        "proposal": step.proposed_action if step else None,
        "cot": step.cot if step else {},
        "screen": screen,
        "policy_error": (step.model_io or {}).get("error", "") if step else "",
        "urls": {name: f"/session/{trajectory.pk}/{name}/" for name in
                 ("execute", "prepare", "heartbeat", "pause", "resume", "leave", "not-executable")},
        "actions": list(ACTIONS), "buttons": list(SYSTEM_BUTTONS), "statuses": list(TERMINATE_STATUSES),
        "running": trajectory.status == Trajectory.Status.RUNNING,
        # Which endings are a success (§4.3): any other asks the annotator to confirm and state it.
        "expected_handoff": semi_auto.expected_handoff(trajectory),
    }
    return render(request, "annotation/session.html", {
        "trajectory": trajectory, "step": step, "done": done, "page": page,
        "preparing": preparing, "auto_prepare": preparing and "held" not in request.GET,
        "tags": TAGS, "shortcuts": SHORTCUTS, "issues": trajectory.consistency_issues,
        "flagged_steps": _flagged_steps(trajectory),
    })


@role_required(ANNOTATOR)
@require_POST
def session_prepare(request, pk):
    """Take the phone again if the lease lapsed or the page was left, then observe the screen and
    ask the policy for the next step. A failure is shown on the page, which then waits for a
    click instead of trying again by itself (`?held`)."""
    trajectory = _own_trajectory(request, pk)
    failed = False
    try:
        if _must_take_the_phone_again(trajectory):
            semi_auto.resume(trajectory)
            trajectory.refresh_from_db()
    except SessionError as problem:
        messages.error(request, str(problem))
        failed = True
    failed = failed or not _prepare_or_say_why(request, trajectory)
    url = reverse("session", args=[pk]) + ("?held=1" if failed else "")
    if request.headers.get("HX-Request") or request.headers.get("X-Requested-With"):
        response = HttpResponse(status=204)  # htmx and session.js navigate themselves
        response["HX-Redirect"] = url
        return response
    return redirect(url)


def _prepare_or_say_why(request, trajectory) -> bool:
    """Observe and propose the step awaiting verification; False (with a message) if that failed."""
    if trajectory.status != Trajectory.Status.RUNNING:
        return True
    try:
        semi_auto.prepare_step(trajectory)
    except SessionError as problem:
        messages.error(request, str(problem))
        return False
    except Exception as problem:  # a phone that stopped answering: say so, lose nothing
        messages.error(request, f"the phone did not answer: {problem}")
        return False
    return True


def _flagged_steps(trajectory):
    flagged = {issue["step"] for issue in trajectory.consistency_issues or []}
    rows = []
    for step in trajectory.steps.filter(index__in=flagged).order_by("index"):
        rows.append({"step": step, "issues": [i for i in trajectory.consistency_issues if i["step"] == step.index],
                     "fields": [(tag, (step.cot or {}).get(tag, "")) for tag in TAGS]})
    return rows


def _json_body(request):
    try:
        return json.loads(request.body or b"{}")
    except ValueError:
        return None


@role_required(ANNOTATOR)
@require_POST
def execute(request, pk):
    trajectory = _own_trajectory(request, pk)
    body = _json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("action"), dict):
        return JsonResponse({"ok": False, "error": "send JSON: {step, action, cot, by_hand, reply, stated_outcome, "
                                                   "stated_reason}"}, status=400)
    step = semi_auto.pending_step(trajectory)
    if step is None or step.index != body.get("step"):
        return JsonResponse({"ok": False, "error": "this step is no longer the one awaiting verification; reload"},
                            status=409)
    try:
        outcome = semi_auto.execute_step(step, body["action"], body.get("cot") or {}, by_hand=bool(body.get("by_hand")),
                                         reply=str(body.get("reply") or ""),
                                         stated=str(body.get("stated_outcome") or ""),
                                         stated_reason=str(body.get("stated_reason") or ""), by=request.user)
    except (EditError, OutcomeUnconfirmed) as error:  # a point on no screen (Infinity...), an unstated failure
        return JsonResponse({"ok": False, "error": str(error)}, status=400)
    except SessionError as error:
        return JsonResponse({"ok": False, "error": str(error)}, status=409)
    trajectory.refresh_from_db()
    return JsonResponse({"ok": True, "finished": outcome["finished"], "edit": outcome["edit"],
                         "destination": trajectory.destination, "issues": trajectory.consistency_issues})


@role_required(ANNOTATOR)
@require_POST
def heartbeat(request, pk):
    trajectory = _own_trajectory(request, pk)
    alive = trajectory.status == Trajectory.Status.RUNNING and semi_auto.keep_alive(trajectory)
    return JsonResponse({"lease": alive, "status": trajectory.status})


@role_required(ANNOTATOR)
@require_POST
def pause(request, pk):
    semi_auto.pause(_own_trajectory(request, pk))
    return redirect("session", pk=pk)


@role_required(ANNOTATOR)
@require_POST
def leave(request, pk):
    """The page is closing (sendBeacon): free the phone now instead of waiting for expiry."""
    trajectory = _own_trajectory(request, pk)
    if trajectory.status == Trajectory.Status.RUNNING:
        semi_auto.pause(trajectory, semi_auto.LEFT_THE_PAGE)
    return JsonResponse({"status": trajectory.status})


@role_required(ANNOTATOR)
@require_POST
def resume(request, pk):
    trajectory = _own_trajectory(request, pk)
    try:
        semi_auto.resume(trajectory)
    except SessionError as error:
        messages.error(request, str(error))
        return redirect("session", pk=pk)
    trajectory.refresh_from_db()
    _prepare_or_say_why(request, trajectory)
    return redirect("session", pk=pk)


@role_required(ANNOTATOR)
@require_POST
def not_executable(request, pk):
    trajectory = _own_trajectory(request, pk)
    reason = request.POST.get("reason", "").strip()
    if not reason:
        messages.error(request, "Say why the task cannot be executed; the query's reviewers need it.")
        return redirect("session", pk=pk)
    semi_auto.mark_not_executable(trajectory, reason)
    messages.info(request, f"{trajectory.query.key} went back to review: {reason}")
    return redirect("my-queue")


@role_required(ANNOTATOR)
@require_POST
def fix_reasoning(request, pk):
    trajectory = _own_trajectory(request, pk)
    if trajectory.status != Trajectory.Status.COMPLETED:
        raise PermissionDenied("Only a completed trajectory's reasoning is fixed here.")
    index = whole_number(request.POST.get("step", ""))
    if index is None or not trajectory.steps.filter(index=index, executed_action__isnull=False).exists():
        return HttpResponseBadRequest("step must be the number of an executed step of this trajectory")
    issues = semi_auto.fix_reasoning(trajectory, index, {tag: request.POST.get(tag, "") for tag in TAGS
                                                         if tag in request.POST})
    if issues:
        messages.error(request, f"{len(issues)} consistency issue(s) remain.")
    else:
        messages.info(request, "The trajectory passed the consistency gate and is in the SFT pool.")
    return redirect("session", pk=pk)
