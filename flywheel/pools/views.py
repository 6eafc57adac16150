"""The ledger (where every trajectory went, per run) and the pool pages (§2.4.3)."""
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.shortcuts import get_object_or_404, render

from accounts.roles import MANAGER, role_required
from flywheel.models import CollectionRun, CptEntry, RlQueryEntry, RlRollout, SftEntry, Trajectory
from flywheel.models.trajectories import Destination

DESTINATION_LABELS = [(value or "pending", label) for value, label in Destination.choices]


def _destination_counts(trajectories):
    counts = dict(trajectories.values_list("destination").annotate(n=Count("id")))
    return [(label, counts.get("" if value == "pending" else value, 0)) for value, label in DESTINATION_LABELS]


@role_required(MANAGER)
def ledger(request):
    runs = CollectionRun.objects.annotate(n=Count("trajectories")).order_by("-created_at")[:100]
    rows = [(run, _destination_counts(run.trajectories.all())) for run in runs]
    unattached = Trajectory.objects.filter(run__isnull=True)
    return render(request, "flywheel/ledger.html", {
        "rows": rows, "labels": [label for _, label in DESTINATION_LABELS],
        "unattached": _destination_counts(unattached), "unattached_total": unattached.count()})


@role_required(MANAGER)
def ledger_run(request, run_id=None):
    run = get_object_or_404(CollectionRun, pk=run_id) if run_id else None
    trajectories = (Trajectory.objects.filter(run=run) if run else Trajectory.objects.filter(run__isnull=True))
    destination = request.GET.get("destination")
    if destination is not None:
        trajectories = trajectories.filter(destination=destination)
    page = Paginator(trajectories.select_related("query", "device").order_by("pk"), 100).get_page(
        request.GET.get("page"))
    return render(request, "flywheel/ledger_run.html", {"run": run, "page": page})


@role_required(MANAGER)
def pools(request):
    cpt_by_app = (CptEntry.objects.values("step__foreground_package")
                  .annotate(n=Count("id")).order_by("-n")[:15])
    history = {}
    for model, name in ((CptEntry, "cpt"), (SftEntry, "sft")):
        for row in model.objects.annotate(day=TruncDate("created_at")).values("day").annotate(n=Count("id")):
            history.setdefault(row["day"], {"cpt": 0, "sft": 0})[name] = row["n"]
    return render(request, "flywheel/pools.html", {
        "cpt_total": CptEntry.objects.count(), "cpt_by_app": cpt_by_app,
        "sft_total": SftEntry.objects.count(),
        "sft_by_intake": SftEntry.objects.values("intake").annotate(n=Count("id")).order_by("intake"),
        "sft_by_line": SftEntry.objects.values("trajectory__line").annotate(n=Count("id")).order_by("-n"),
        "rl_by_state": RlQueryEntry.objects.values("state").annotate(n=Count("id")).order_by("state"),
        "rl_by_channel": RlQueryEntry.objects.values("channel").annotate(
            n=Count("id"), live=Count("id", filter=Q(state__in=["banked", "active"]))).order_by("channel"),
        "rollouts": RlRollout.objects.select_related("entry__query", "model_version").order_by("-created_at")[:30],
        "history": sorted(history.items(), reverse=True)[:30],
    })
