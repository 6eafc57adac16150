"""Adjudication pages: the Undetermined queue and the keyboard-driven step player."""
import struct

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import ADJUDICATOR, role_required
from annotation import adjudication
from devices.uitree import node_at, parse_hierarchy
from flywheel.blobs import read_blob
from flywheel.models import Adjudication, App, Destination, Trajectory, Vote

QUEUE_PAGE_SIZE = 50  # oldest first; people judge the next one with N, the list is for looking


def _png_size(name):
    try:
        header = read_blob(name)[:24]
        return struct.unpack(">II", header[16:24]) if header[:8] == b"\x89PNG\r\n\x1a\n" else None
    except (OSError, struct.error):
        return None


def player_steps(trajectory):
    """What the step player shows for each step: before/after frames, reasoning, overlay."""
    steps = list(trajectory.steps.order_by("index"))
    apps = App.display_labels(step.foreground_package for step in steps)
    frames = []
    for position, step in enumerate(steps):
        action = step.executed_action or {}
        size = _png_size(step.screenshot.name) if step.screenshot else None
        element = None
        if step.hierarchy and action.get("point"):
            try:
                xml = read_blob(step.hierarchy.name).decode("utf-8", "replace")
                node = node_at(parse_hierarchy(xml), *action["point"])
                element = node.describe() if node else None
            except OSError:
                element = None
        after = steps[position + 1] if position + 1 < len(steps) else None
        frames.append({
            "step": step, "action": action, "size": size, "element": element,
            "app": apps.get(step.foreground_package, ""),
            "before": step.screenshot.url if step.screenshot else "",
            "after": after.screenshot.url if after and after.screenshot else "",
        })
    return frames


@role_required(ADJUDICATOR)
def adjudication_queue(request):
    # Only what the list shows: a query's text rather than its specs, votes without rationale.
    votes = Vote.objects.only("trajectory_id", "system", "vote").order_by("system")
    claims = Adjudication.objects.select_related("adjudicator").only("trajectory_id", "decision",
                                                                     "adjudicator__username")
    waiting = (adjudication.waiting_for_adjudication().select_related("query").only("line", "started_at", "query__text")
               .prefetch_related(Prefetch("votes", votes), Prefetch("adjudications", claims)))
    page = Paginator(waiting, QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "annotation/adjudication_queue.html", {"trajectories": page.object_list, "page": page})


@role_required(ADJUDICATOR)
@require_POST
def adjudicate_next(request):
    claimed = adjudication.next_for(request.user)
    if claimed is None:
        messages.info(request, "Nothing is waiting for adjudication.")
        return redirect("adjudication-queue")
    return redirect("adjudicate", trajectory_id=claimed.trajectory_id)


@role_required(ADJUDICATOR)
def adjudicate(request, trajectory_id):
    """The step player and, for the person holding the claim, the decision; opening it claims
    nothing (claim_and_judge does, by POST)."""
    trajectory = get_object_or_404(Trajectory.objects.select_related("query", "device"), pk=trajectory_id)
    if trajectory.destination != Destination.ADJUDICATION:
        raise Http404("This trajectory is not waiting for adjudication.")
    claim = adjudication.open_claim(trajectory)
    return render(request, "annotation/adjudicate.html", {
        "trajectory": trajectory, "claim": claim,
        "mine": claim is not None and claim.adjudicator_id == request.user.pk,
        "votes": trajectory.votes.order_by("system"),
        "verdict": trajectory.verdicts.order_by("-created_at").first(),
        "frames": player_steps(trajectory),
    })


@role_required(ADJUDICATOR)
@require_POST
def claim_and_judge(request, trajectory_id):
    """Lock the trajectory for this person (or extend their lock), then show it."""
    try:
        adjudication.claim(trajectory_id, request.user)
    except Trajectory.DoesNotExist:
        raise Http404("No such trajectory.") from None
    except adjudication.ClaimRefused as refusal:
        messages.error(request, f"Can't judge it: {refusal}.")
        return redirect("adjudication-queue")
    return redirect("adjudicate", trajectory_id=trajectory_id)


@role_required(ADJUDICATOR)
@require_POST
def decide(request, trajectory_id):
    decision, note = request.POST.get("decision", ""), request.POST.get("note", "").strip()
    try:
        adjudication.decide(trajectory_id, request.user, decision, note)
    except adjudication.ClaimRefused as refusal:
        messages.error(request, f"Not recorded: {refusal}.")
        return redirect("adjudication-queue")
    except ValueError as error:
        messages.error(request, str(error))
        return redirect("adjudicate", trajectory_id=trajectory_id)
    messages.success(request, f"Trajectory #{trajectory_id}: {decision} recorded.")
    if request.POST.get("then") == "next":
        claimed = adjudication.next_for(request.user)
        if claimed:
            return redirect("adjudicate", trajectory_id=claimed.trajectory_id)
    return redirect("adjudication-queue")


@role_required(ADJUDICATOR)
@require_POST
def release_claim(request, trajectory_id):
    adjudication.release(trajectory_id, request.user)
    return redirect("adjudication-queue")
