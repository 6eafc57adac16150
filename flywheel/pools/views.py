"""The ledger (where every trajectory went, per run) and the pool pages (§2.4.3)."""
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.shortcuts import get_object_or_404, render

from accounts.roles import MANAGER, role_required
from flywheel.models import CollectionRun, CptEntry, Line, RlQueryEntry, RlRollout, SftEntry, Trajectory
from flywheel.models.trajectories import Destination
from flywheel.pools.ledger import FAILED, STAGE_LABELS, failure_ledger, with_failure_path

DESTINATION_LABELS = [(value or "pending", label) for value, label in Destination.choices]


def _destination_counts(trajectories):
    counts = dict(trajectories.values_list("destination").annotate(n=Count("id")))
    return [(label, counts.get("" if value == "pending" else value, 0)) for value, label in DESTINATION_LABELS]


@role_required(MANAGER)
def ledger(request):
    """Where every trajectory went, per run, and every failure's path through attribution and the
    ECDM (stages that add up to the failures, salvage yield)."""
    runs = list(CollectionRun.objects.annotate(n=Count("trajectories")).order_by("-created_at")[:100])
    by_run = failure_ledger(Trajectory.objects.filter(run__in=[run.pk for run in runs]), group_by="run_id")
    empty = failure_ledger(Trajectory.objects.none())
    rows = [(run, _destination_counts(run.trajectories.all()), by_run.get(run.pk, empty)) for run in runs]
    unattached = Trajectory.objects.filter(run__isnull=True)
    return render(request, "flywheel/ledger.html", {
        "rows": rows, "labels": [label for _, label in DESTINATION_LABELS],
        "unattached": _destination_counts(unattached), "unattached_total": unattached.count(),
        "unattached_failures": failure_ledger(unattached), "overall": failure_ledger(Trajectory.objects.all())})


@role_required(MANAGER)
def ledger_run(request, run_id=None):
    """One run's trajectories (or those outside runs), each linked to its page with its failure's
    path; filter by destination or by ECDM stage (?stage=needs_human...)."""
    run = get_object_or_404(CollectionRun, pk=run_id) if run_id else None
    trajectories = (Trajectory.objects.filter(run=run) if run else Trajectory.objects.filter(run__isnull=True))
    failures = failure_ledger(trajectories)
    listed = with_failure_path(trajectories)
    destination, stage = request.GET.get("destination"), request.GET.get("stage")
    if destination is not None:
        listed = listed.filter(destination=destination)
    if stage in STAGE_LABELS:
        listed = listed.filter(verdict__in=FAILED).exclude(line=Line.ECDM).filter(ecdm_stage=stage)
    page = Paginator(listed.select_related("query", "device").order_by("pk"), 100).get_page(
        request.GET.get("page"))
    for trajectory in page.object_list:
        failed = trajectory.verdict in FAILED and trajectory.line != Line.ECDM
        trajectory.stage_label = STAGE_LABELS.get(trajectory.ecdm_stage, "") if failed else ""
    return render(request, "flywheel/ledger_run.html", {
        "run": run, "page": page, "failures": failures, "stage": stage if stage in STAGE_LABELS else "",
        "stage_label": STAGE_LABELS.get(stage, ""), "destination": destination})


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
