"""The human repair queue's pages: the queue (/repairs/) and one repair (/repairs/<id>/): the goal,
the kept prefix, the wrong step on its frozen screenshot, the Teacher's attempt, and an editor on
that screenshot (static/js/repair.js, over the session's action editor static/js/action_editor.js, draws
the tap box and sends the correction as JSON)."""
import json

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.roles import ANNOTATOR, role_required
from annotation import repair_queue
from annotation.repair_queue import ClaimRefused, RepairRejected
from devices.actions import ACTIONS, SYSTEM_BUTTONS, TERMINATE_STATUSES
from flywheel.access import repairs_visible_to
from flywheel.models import Repair
from flywheel.policies.protocol import TAGS
from flywheel.rules.numbers import row_id

QUEUE_PAGE_SIZE = 50  # oldest first; people take the next one with Enter, the list is for looking

# 1-9 and 0: the action types in Table 3's order (the select lists all 14).
NUMBER_KEYS = [(str(n + 1), name) for n, name in enumerate(ACTIONS[:9])] + [("0", "terminate")]
SHORTCUTS = [
    ("Enter", "claim this repair / take the next one"), ("T", "accept the Teacher's attempt into the editor"),
    *[(key, name) for key, name in NUMBER_KEYS], ("A", "choose any action type"),
    ("← ↑ → ↓", "move the tap box 5 px (Shift: 25 px)"), ("F", "edit the action's text / app / value"),
    ("R", "edit the reasoning (the first required tag still empty)"), ("Esc", "leave a field; outside one, back to how the page began"),
    ("Ctrl+Enter", "submit the correction and go to the next repair"),
    ("S", "skip: give it back to the queue and take the next"), ("X", "cannot be repaired: say why, Enter"),
    ("?", "show these keys"),
]


def _visible(request, pk):
    return get_object_or_404(repairs_visible_to(request.user).select_related(
        "trajectory__query", "trajectory__device", "attribution", "claimed_by", "repaired_by"), pk=pk)


@role_required(ANNOTATOR)
def repair_queue_page(request):
    waiting = repair_queue.waiting_for_repair()
    # The columns the list shows: the goal is a query's text, not its specs and labels (JSON a
    # thousand times over at scale).
    listed = waiting.select_related("trajectory__query", "claimed_by").only(
        "path", "step_index", "human_reason", "reason", "confidence", "created_at", "status", "claimed_until",
        "claimed_by__username", "trajectory__query__text")
    recent = (Repair.objects.filter(correction__by="human", repaired_by=request.user)
              | Repair.objects.filter(status=Repair.Status.FAILED, claimed_by=request.user))
    page = Paginator(listed, QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [{"repair": r, "holder": repair_queue.holder(r)} for r in page.object_list]
    return render(request, "annotation/repair_queue.html", {
        "rows": rows, "count": page.paginator.count, "page": page,
        "recent": recent.select_related("trajectory__query").only(
            "status", "sample_id", "replay", "reason", "finished_at", "trajectory__query__text")
        .order_by("-finished_at", "-pk")[:10],
    })


def _url_of(repair):
    return reverse("repair", args=[repair.pk]) if repair else reverse("repair-queue")


@role_required(ANNOTATOR)
@require_POST
def repair_next(request):
    skipped = [n for n in map(row_id, request.POST.getlist("skip")) if n is not None]
    claimed = repair_queue.next_for(request.user, exclude=skipped)
    if claimed is None:
        messages.info(request, "Nothing else is waiting for a repair.")
    return redirect(_url_of(claimed))


def _teacher(repair, width, height):
    output = repair.teacher_output if isinstance(repair.teacher_output, dict) else None
    if not output:
        return None
    action = output.get("action") if isinstance(output.get("action"), dict) else None
    confidence = output.get("confidence", repair.confidence)
    return {
        "action": repair_queue.in_pixels(action, width, height) if action else None, "raw_action": action,
        "cot": repair_queue.five_tags(output.get("cot")), "source": output.get("source") or "",
        "confidence": confidence if isinstance(confidence, (int, float)) else None,
        "rationale": output.get("rationale") or "", "error": output.get("error") or output.get("reason") or "",
    }


def repair_page_data(repair):
    """Everything the page shows, from the stored trajectory (nothing is asked of a phone)."""
    steps = list(repair.trajectory.steps.order_by("index"))
    index = repair_queue.wrong_step_index(repair, steps)
    frozen = next((s for s in steps if s.index == index), None)
    width, height = repair_queue.screen_size(frozen)
    wrong_raw = (frozen.executed_action or frozen.proposed_action) if frozen else None
    wrong = repair_queue.in_pixels(wrong_raw, width, height) if isinstance(wrong_raw, dict) else None
    teacher = _teacher(repair, width, height)
    start_cot = teacher["cot"] if teacher and any(teacher["cot"].values()) else {
        **dict.fromkeys(TAGS, ""), "Observation": repair_queue.five_tags(frozen.cot if frozen else {})["Observation"]}
    after = next((s for s in steps if index is not None and s.index == index + 1), None)
    marks = [{"kind": kind, "action": action} for kind, action in
             (("wrong", wrong), ("teacher", teacher and teacher["action"])) if action]
    return {
        "index": index, "frozen": frozen, "size": (width, height), "wrong": wrong, "wrong_raw": wrong_raw, "marks": marks,
        "wrong_cot": repair_queue.five_tags(frozen.cot if frozen else {}), "teacher": teacher,
        "prefix": [s for s in steps if index is not None and s.index < index],
        "after": after, "later": len([s for s in steps if index is not None and s.index > index]),
        "script": {
            "step": index, "screen": [width, height], "wrong": wrong,
            "teacher": {"action": teacher["action"], "cot": teacher["cot"]} if teacher and teacher["action"] else None,
            "start": {"action": (teacher or {}).get("action"), "cot": start_cot},
            "urls": {"submit": reverse("repair-submit", args=[repair.pk])},
            "keys": dict(NUMBER_KEYS),
        },
    }


@role_required(ANNOTATOR)
def repair_page(request, pk):
    """The repair and, for the person holding the claim, the editor; opening it claims nothing."""
    repair = _visible(request, pk)
    current = repair_queue.holder(repair)
    mine = current is not None and current.pk == request.user.pk
    return render(request, "annotation/repair.html", {
        "repair": repair, "trajectory": repair.trajectory, "holder": current, "mine": mine,
        "waiting": repair.status == Repair.Status.NEEDS_HUMAN, "page": repair_page_data(repair),
        "tags": TAGS, "actions": ACTIONS, "buttons": list(SYSTEM_BUTTONS), "statuses": TERMINATE_STATUSES,
        "number_keys": {name: key for key, name in NUMBER_KEYS}, "shortcuts": SHORTCUTS,
    })


@role_required(ANNOTATOR)
@require_POST
def repair_claim(request, pk):
    _visible(request, pk)
    try:
        repair_queue.claim(pk, request.user)
    except ClaimRefused as refusal:
        messages.error(request, f"Can't repair it: {refusal}.")
        return redirect("repair-queue")
    return redirect("repair", pk=pk)


@role_required(ANNOTATOR)
@require_POST
def repair_submit(request, pk):
    """JSON {step, action, cot} → {ok, status, sample, next}; a bad action is a 400 with the reason."""
    _visible(request, pk)
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return JsonResponse({"ok": False, "error": "send JSON: {step, action, cot}"}, status=400)
    step = body.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
        return JsonResponse({"ok": False, "error": "step is the index of the corrected step"}, status=400)
    try:
        repair = repair_queue.submit(pk, request.user, body.get("action"), body.get("cot"), step=step)
    except RepairRejected as error:
        return JsonResponse({"ok": False, "error": str(error)}, status=400)
    except ClaimRefused as refusal:
        return JsonResponse({"ok": False, "error": str(refusal)}, status=409)
    messages.success(request, f"Repair #{pk}: step {repair.step_index} corrected"
                              + (f"; sample #{repair.sample_id} is in the SFT pool." if repair.sample_id else "."))
    following = repair_queue.next_for(request.user) if body.get("then", "next") == "next" else None
    return JsonResponse({"ok": True, "status": repair.status, "sample": repair.sample_id,
                         "next": _url_of(following)})


@role_required(ANNOTATOR)
@require_POST
def repair_release(request, pk):
    """Skip: the repair goes back to the queue untouched; then the next one (not this one)."""
    _visible(request, pk)
    repair_queue.release(pk, request.user)
    if request.POST.get("then") == "next":
        following = repair_queue.next_for(request.user, exclude=[pk])
        if following is None:
            messages.info(request, "Skipped; nothing else is waiting for a repair.")
        return redirect(_url_of(following))
    return redirect("repair-queue")


@role_required(ANNOTATOR)
@require_POST
def repair_cannot(request, pk):
    """The person cannot repair it: failed with their reason (nothing is deleted); then the next."""
    _visible(request, pk)
    try:
        repair_queue.cannot_repair(pk, request.user, request.POST.get("reason", ""))
    except RepairRejected as error:
        messages.error(request, str(error))
        return redirect("repair", pk=pk)
    except ClaimRefused as refusal:
        messages.error(request, f"Not recorded: {refusal}.")
        return redirect("repair-queue")
    messages.info(request, f"Repair #{pk} marked as not repairable.")
    return redirect(_url_of(repair_queue.next_for(request.user)))
