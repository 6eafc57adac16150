"""The ledger (where every trajectory went, per run) and the pool pages (§2.4.3)."""
from collections import Counter

from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, render

from accounts.roles import MANAGER, role_required
from flywheel import tallies
from flywheel.models import CollectionRun, RlQueryEntry, RlRollout, Trajectory
from flywheel.models.trajectories import Destination, LabelGate
from flywheel.pools.badcase import FORMAT_HELP
from flywheel.pools.ledger import (
    FAILED,
    NOT_ECDM_FAILURES,
    STAGE_LABELS,
    empty_ledger,
    failure_ledger,
    filter_stage,
    with_failure_path,
)
from flywheel.pools.ledger_snapshot import ledger_overview
from flywheel.pools.sft import not_label_counts

DESTINATION_LABELS = [(value or "pending", label) for value, label in Destination.choices]
RUNS_PER_PAGE = 50
TRAJECTORIES_PER_PAGE = 50


def _destinations_by_run(run_ids):
    """{run id (None: outside runs): [(label, count)]} in one statement over the (run, destination) index."""
    counts: dict = {}
    rows = (Trajectory.objects.filter(Q(run_id__in=run_ids) | Q(run_id__isnull=True)).order_by()
            .values_list("run_id", "destination").annotate(n=Count("*")))
    for run_id, destination, n in rows:
        counts.setdefault(run_id, {})[destination] = n
    return {run_id: [(label, by_destination.get("" if value == "pending" else value, 0))
                     for value, label in DESTINATION_LABELS]
            for run_id, by_destination in counts.items()}


@role_required(MANAGER)
def ledger(request):
    """Where every trajectory went, per run, and every failure's path through attribution and the
    ECDM (stages that add up to the failures, salvage yield); the failure counts come from beat's
    snapshot when there is a recent one (ledger_snapshot.py)."""
    runs_page = Paginator(CollectionRun.objects.order_by("-created_at", "-pk"), RUNS_PER_PAGE).get_page(
        request.GET.get("page"))
    runs = list(runs_page.object_list)
    destinations = _destinations_by_run([run.pk for run in runs])
    nothing = [(label, 0) for _, label in DESTINATION_LABELS]
    overview = ledger_overview([run.pk for run in runs])
    empty = empty_ledger()
    rows = []
    for run in runs:
        run.n = sum(n for _, n in destinations.get(run.pk, nothing))
        rows.append((run, destinations.get(run.pk, nothing), overview["by_run"].get(run.pk, empty)))
    unattached = destinations.get(None, nothing)
    return render(request, "flywheel/ledger.html", {
        "rows": rows, "labels": [label for _, label in DESTINATION_LABELS],
        "unattached": unattached, "unattached_total": sum(n for _, n in unattached),
        "unattached_failures": overview["outside_runs"], "overall": overview["overall"],
        "as_of": overview["as_of"], "runs_page": runs_page,
        # Their own destination; counted apart so the page can say they are left out of the failures.
        "benchmark_total": Trajectory.objects.filter(destination=Destination.BENCHMARK).count()})


def _with_paths(trajectory_ids):
    """The listed trajectories with their failure's path: worked out for a page of rows (a subquery
    per row), not for the whole run; and only the columns the table shows, not the query's specs."""
    return list(with_failure_path(Trajectory.objects.filter(pk__in=trajectory_ids))
                .select_related("query", "device").order_by("pk")
                .only("status", "stop_reason", "verdict", "teacher_assisted", "destination", "line", "query__text",
                      "device__serial", "device__adb_server"))


@role_required(MANAGER)
def ledger_run(request, run_id=None):
    """One run's trajectories (or those outside runs), each linked to its page with its failure's
    path; filter by destination or by ECDM stage (?stage=needs_human...)."""
    run = get_object_or_404(CollectionRun, pk=run_id) if run_id else None
    trajectories = (Trajectory.objects.filter(run=run) if run else Trajectory.objects.filter(run__isnull=True))
    failures = failure_ledger(trajectories)
    listed = trajectories
    destination, stage = request.GET.get("destination"), request.GET.get("stage")
    if destination is not None:
        listed = listed.filter(destination=destination)
    if stage in STAGE_LABELS:
        listed = filter_stage(listed, stage)
    page = Paginator(listed.order_by("pk").only("pk"), TRAJECTORIES_PER_PAGE).get_page(request.GET.get("page"))
    page.object_list = _with_paths([trajectory.pk for trajectory in page.object_list])
    for trajectory in page.object_list:
        failed = trajectory.verdict in FAILED and trajectory.line not in NOT_ECDM_FAILURES
        trajectory.stage_label = STAGE_LABELS.get(trajectory.ecdm_stage, "") if failed else ""
    return render(request, "flywheel/ledger_run.html", {
        "run": run, "page": page, "failures": failures, "stage": stage if stage in STAGE_LABELS else "",
        "stage_label": STAGE_LABELS.get(stage, ""), "destination": destination})


@role_required(MANAGER)
def pools(request):
    """The three pools: sizes, composition and what entered per day. The CPT and SFT figures come
    from their tallies (flywheel/tallies.py): exact, without counting a million rows per request."""
    return render(request, "flywheel/pools.html", pools_context())


def pools_context(**extra) -> dict:
    """What the pools page shows (the BadCase upload re-shows it with its problems)."""
    cpt_by_app = sorted(((key, n) for key, n, _, _ in tallies.read(tallies.CPT, by=("key",))),
                        key=lambda row: (-row[1], row[0]))
    sft_by_intake, sft_by_line = Counter(), Counter()
    for key, n, _, _ in tallies.read(tallies.SFT, by=("key",)):
        intake, line = key.split("|")
        sft_by_intake[intake] += n
        sft_by_line[line] += n
    history = {}
    for source in (tallies.CPT, tallies.SFT):
        for day, n, _, _ in tallies.read(source, by=("day",)):
            history.setdefault(day, {"cpt": 0, "sft": 0})[source.name] = n
    return {
        "cpt_total": sum(n for _, n in cpt_by_app),
        "cpt_by_app": [{"step__foreground_package": key, "n": n} for key, n in cpt_by_app[:15]],
        "sft_total": sum(sft_by_intake.values()),
        "sft_by_intake": [{"intake": intake, "n": n} for intake, n in sorted(sft_by_intake.items())],
        "sft_by_line": [{"trajectory__line": line, "n": n} for line, n in sft_by_line.most_common()],
        "sft_not_labels": [(LabelGate(gate).label, n) for gate, n in sorted(not_label_counts().items())],
        "rl_by_state": RlQueryEntry.objects.values("state").annotate(n=Count("id")).order_by("state"),
        "rl_by_channel": RlQueryEntry.objects.values("channel").annotate(
            n=Count("id"), live=Count("id", filter=Q(state__in=["banked", "active"]))).order_by("channel"),
        "rollouts": RlRollout.objects.select_related("entry__query", "model_version").order_by("-created_at")[:30],
        "history": sorted(history.items(), reverse=True)[:30],
        "measuring": RlQueryEntry.objects.filter(state=RlQueryEntry.State.MEASURING).select_related(
            "query", "measurement_run").order_by("-updated_at")[:20],
        "badcase_format": FORMAT_HELP, **extra,
    }
