"""Generation run pages (managers and admins): launch a run, watch its progress, cancel it."""
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import MANAGER, role_required
from flywheel.models import App, GenerationRun, ModelVersion
from flywheel.polling import render_live
from flywheel.queries.generation.planner import DEFAULT_CONFIG
from flywheel.queries.generation.runs import cancel_generation, launch_generation
from flywheel.queries.vocabulary import CAPABILITIES, PERSONAS, TIER_SUBCLASSES
from flywheel.rules.numbers import row_id

LIVE = ("queued", "running")


def _endpoint_choice(post, field: str) -> ModelVersion | None:
    chosen = post.get(field, "")
    if not chosen:
        return None
    version = (ModelVersion.objects.filter(pk=row_id(chosen), kind=ModelVersion.Kind.ENDPOINT).first()
               if row_id(chosen) else None)
    if version is None:
        raise ValueError(f"no endpoint model version {chosen!r}")
    return version


def _form_config(post) -> tuple[dict, ModelVersion | None, ModelVersion | None]:
    """The launch form → (config, writer, gate 1's judge): endpoint models or None; raises
    ValueError with what is wrong (a judge that is the writer's endpoint among it)."""
    config = {"apps": post.getlist("apps"), "tiers": post.getlist("tiers"), "personas": post.getlist("personas"),
              "capabilities": post.getlist("capabilities"), "per_leaf": post.get("per_leaf"),
              "cross_app": post.get("cross_app"), "seed": post.get("seed")}
    if not post.get("any_capability_field"):
        config.pop("capabilities")  # a form without the checkboxes keeps the default
    return config, _endpoint_choice(post, "model_version"), _endpoint_choice(post, "judge_version")


@role_required(MANAGER)
def generation_list(request):
    if request.method == "POST":
        try:
            config, version, judge = _form_config(request.POST)
            run = launch_generation(config, request.user, version, judge)
        except ValueError as error:
            messages.error(request, f"Nothing was launched: {error}")
            return redirect("generation-list")
        messages.success(request, f"{run} launched.")
        return redirect("generation-detail", run_id=run.pk)
    return render(request, "flywheel/generation_list.html", {
        "runs": GenerationRun.objects.select_related("model_version", "created_by")[:50],
        "apps": App.objects.filter(is_system=False).order_by("package"),
        "tiers": list(TIER_SUBCLASSES), "personas": PERSONAS.items(), "capabilities": CAPABILITIES.items(),
        "versions": ModelVersion.objects.filter(kind=ModelVersion.Kind.ENDPOINT), "defaults": DEFAULT_CONFIG,
    })


@role_required(MANAGER)
def generation_detail(request, run_id):
    run = get_object_or_404(GenerationRun.objects.select_related("model_version", "judge_version", "created_by"),
                            pk=run_id)
    live = run.status in LIVE
    rejections = [(gate, sorted(reasons.items(), key=lambda item: -item[1]))
                  for gate, reasons in sorted((run.report or {}).get("rejections", {}).items())]
    context = {"run": run, "live": live, "rejections": rejections,
               "timings": (run.report or {}).get("timings", {})}
    return render_live(request, "flywheel/generation_detail.html", context, live=live,
                       panel="flywheel/generation_live.html")


@role_required(MANAGER)
@require_POST
def generation_cancel(request, run_id):
    run = get_object_or_404(GenerationRun, pk=run_id)
    if cancel_generation(run):
        messages.info(request, f"{run} cancelled: the batch in progress is written, nothing after it.")
    else:
        messages.info(request, f"{run} had already ended.")
    return redirect("generation-detail", run_id=run.pk)
