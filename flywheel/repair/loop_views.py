"""Self-evolution loop pages (managers): start a loop, watch its rounds and salvage yield, cancel."""
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import MANAGER, role_required
from devices.models import Device
from flywheel.collection.launch import select_queries
from flywheel.models import EvolutionLoop, ModelVersion
from flywheel.polling import render_live
from flywheel.pools.rl import bank_phase0, phase0_candidates
from flywheel.repair.loop import (
    EMPTY_POOL,
    LIVE,
    LOOP_FIELDS,
    load_trainer,
    pool_sizes,
    round_stats,
    start_loop,
)
from flywheel.repair.loop_control import OPEN, cancel_loop, resume_loop
from flywheel.rules.numbers import row_id
from flywheel.rules.salvage import SUPERVISION_PATHS

PATH_LABELS = {"step": "Teacher step correction", "human": "Human repair", "rqa": "RQA", "env": "Env pop-up repair"}


def _chosen_version(value: str) -> ModelVersion | None:
    if not value:
        return None
    version = ModelVersion.objects.policies().filter(pk=row_id(value)).first() if row_id(value) else None
    if version is None:
        raise ValidationError(f"no model version {value!r}")
    return version


@role_required(MANAGER)
def loop_list(request):
    if request.method == "POST":
        try:
            version = _chosen_version(request.POST.get("model_version", "").strip())
            config = {name: request.POST.get(name, "").strip() for name in LOOP_FIELDS}
            loop = start_loop(request.user, version, config, name=request.POST.get("name", "").strip())
        except ValidationError as error:
            messages.error(request, "Not started: " + "; ".join(error.messages))
            return redirect("loop-list")
        messages.success(request, f"{loop} started: {loop.state}")
        return redirect("loop-detail", loop_id=loop.pk)
    trainer, why = load_trainer()
    return render(request, "flywheel/loops.html", {
        "loops": EvolutionLoop.objects.select_related("model_version", "created_by")[:50],
        "versions": ModelVersion.objects.policies().order_by("name"), "defaults": {k: v[1] for k, v in LOOP_FIELDS.items()},
        "limits": LOOP_FIELDS, "pools": pool_sizes(), "pool_ready": select_queries({"pool": "rl"}).exists(),
        # a bool: a template would call the trainer itself (a callable) and find it falsy
        "empty_pool": EMPTY_POOL, "trainer": trainer is not None, "no_trainer": why,
        "idle_phones": Device.objects.filter(status=Device.Status.IDLE).count(),
        "phase0_candidates": phase0_candidates().count(),
    })


@role_required(MANAGER)
@require_POST
def loop_bank(request):
    """Phase 0 from the browser: what `manage.py rl_pool bank` does, through the same service."""
    candidates = phase0_candidates().count()
    with transaction.atomic():
        banked = bank_phase0()
    if banked:
        messages.success(request, f"Phase 0: {banked} of {candidates} queries not yet in the RL pool banked "
                                  f"as naturally difficult; the rest stay out until a policy's rollouts admit them.")
    elif candidates:
        messages.info(request, f"Phase 0: none of the {candidates} queries not yet in the RL pool is naturally "
                               "difficult, so none was banked; rollouts of a model admit queries later.")
    else:
        messages.info(request, "Phase 0: every query is already in the RL pool or held out; nothing to bank.")
    return redirect("loop-list")


def _round_rows(loop):
    rows = []
    for loop_round in loop.rounds.select_related("model_version", "rollout_run").order_by("number"):
        stats = round_stats(loop_round)
        salvaged = [(PATH_LABELS[p], stats["salvaged"][p], stats["yield_by_path"][p]) for p in SUPERVISION_PATHS]
        verdicts = stats["verdicts"]
        rows.append({"round": loop_round, "stats": stats, "salvaged": salvaged,
                     "open": verdicts.get("pending", 0) + verdicts.get("undetermined", 0),
                     "yield_percent": None if stats["salvage_yield"] is None else round(100 * stats["salvage_yield"]),
                     "start": {name: ((loop_round.stats or {}).get("pools_at_start") or {}).get(name, "?")
                               for name in ("rl_live", "sft", "cpt")},
                     "pools": loop_round.pool_sizes or {}})
    return rows


@role_required(MANAGER)
def loop_detail(request, loop_id):
    loop = get_object_or_404(EvolutionLoop.objects.select_related("model_version", "created_by"), pk=loop_id)
    live = loop.status in LIVE
    context = {"loop": loop, "rows": _round_rows(loop), "live": live, "path_labels": PATH_LABELS.values(),
               "pools": pool_sizes(), "open": loop.status in OPEN, "paused": loop.status == EvolutionLoop.Status.PAUSED}
    # htmx polls the whole page and keeps its live part (hx-select).
    return render_live(request, "flywheel/loop_detail.html", context, live=live)


@role_required(MANAGER)
@require_POST
def loop_cancel(request, loop_id):
    loop = get_object_or_404(EvolutionLoop, pk=loop_id)
    if loop.status not in OPEN:
        messages.info(request, f"{loop} is already {loop.get_status_display().lower()}.")
    else:
        cancel_loop(loop, user=request.user)
        messages.info(request, f"{loop} cancelled: its rollout stops after the phones' current step; "
                               "everything collected and repaired so far stays.")
    return redirect("loop-detail", loop_id=loop.pk)


@role_required(MANAGER)
@require_POST
def loop_resume(request, loop_id):
    loop = get_object_or_404(EvolutionLoop, pk=loop_id)
    try:
        loop = resume_loop(loop, user=request.user)
    except ValidationError as error:
        messages.info(request, " ".join(error.messages))
    else:
        messages.success(request, f"{loop} resumed: {loop.state}")
    return redirect("loop-detail", loop_id=loop_id)
