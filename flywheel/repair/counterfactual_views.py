"""The failure classes page (§2.5.2 counterfactual derivation): classes with their counts and
status, the features induced from them, the adversarial queries derived (ready or rejected, with
the gate's reason), and "Derive now". Managers only."""
from django.contrib import messages
from django.db import transaction
from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import MANAGER, role_required
from flywheel import jobs
from flywheel.models import FailureClass, Query, Repair
from flywheel.repair.counterfactual import derivation_due, derive_for_class, recur_minimums


def _classes():
    return FailureClass.objects.annotate(
        ready=Count("derived_queries", filter=Q(derived_queries__status=Query.Status.READY), distinct=True),
        rejected=Count("derived_queries", filter=Q(derived_queries__status=Query.Status.REJECTED), distinct=True),
        in_rl=Count("derived_queries__rl_entry", filter=Q(derived_queries__rl_entry__state="active"), distinct=True),
    ).order_by("-trajectory_count", "key")


@role_required(MANAGER)
def failure_classes(request):
    classes = list(_classes())
    due = [c for c in classes if c.status == FailureClass.Status.RECURRING and derivation_due(c)]
    minimum = recur_minimums()
    return render(request, "flywheel/failure_classes.html", {
        "classes": classes, "due": len(due), "min_trajectories": minimum[0], "min_queries": minimum[1],
        "waiting": Repair.objects.filter(path=Repair.Path.COUNTERFACTUAL, status=Repair.Status.PENDING).count(),
    })


@role_required(MANAGER)
def failure_class(request, class_id):
    item = get_object_or_404(_classes(), pk=class_id)
    queries = (item.derived_queries.select_related("rl_entry").order_by("-created_at")[:100])
    members = (item.attributions.select_related("trajectory__query").order_by("-created_at")[:50])
    return render(request, "flywheel/failure_class.html", {
        "item": item, "queries": queries, "members": members, "features": item.features or {},
        "last": (item.features or {}).get("last_derivation") or {},
        "repairs": item.repairs.select_related("derived_query").order_by("-created_at")[:50],
    })


@role_required(MANAGER)
@require_POST
def derive_all(request):
    """Derive every recurring class that is due, in the worker (the same task beat runs)."""
    transaction.on_commit(lambda: jobs.task(jobs.REPAIR_DERIVE_RECURRING).delay())
    messages.success(request, "Derivation of the recurring classes started in the background; "
                              "reload this page in a minute to see their adversarial queries.")
    return redirect("failure-classes")


@role_required(MANAGER)
@require_POST
def derive_one(request, class_id):
    """Derive one class now, in the request (a handful of drafts through the gates)."""
    item = get_object_or_404(FailureClass, pk=class_id)
    queries = derive_for_class(item, user=request.user)
    item.refresh_from_db()
    ready = sum(q.status == Query.Status.READY for q in queries)
    rejected = len(queries) - ready
    if queries:
        messages.success(request, f"{ready} adversarial quer{'y' if ready == 1 else 'ies'} derived into the RL pool"
                                  f"{f', {rejected} rejected by the gates (kept with the reason)' if rejected else ''}.")
    else:
        note = ((item.features or {}).get("last_derivation") or {}).get("note") or "nothing could be derived"
        messages.error(request, f"No query derived: {note}.")
    return redirect("failure-class", class_id=item.pk)
