"""Training pages (managers and admins): snapshots of the pools, runs with their loss curves,
model versions with their lineage and serving recipe.

Every write goes through training/snapshots.py, training/runs.py or training/serving.py.
"""
import json
from pathlib import Path

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts.roles import ADMIN, MANAGER, role_required
from flywheel.models import ModelVersion
from flywheel.polling import render_live
from training import serving
from training.config import DEFAULTS, ConfigError
from training.model_host.host import request_serving
from training.models import DataSnapshot, Serving, TrainingRun
from training.reward_model import launch_reward_model_training, page_summary
from training.rules.screen_corpora import CORPORA
from training.runs import INSTALL_HINT, RunError, cancel_run, create_run, lineage, resume_run, training_extras_installed
from training.screen_corpora import corpus_mixture
from training.snapshots import create_snapshot

PREVIEW_SAMPLES = 3


def _json_field(request, name: str) -> dict:
    text = (request.POST.get(name) or "").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ConfigError(f"the {name.replace('_', ' ')} is not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise ConfigError(f"the {name.replace('_', ' ')} is a JSON object")
    return value


@role_required(MANAGER, ADMIN)
def training_home(request):
    runs = TrainingRun.objects.select_related("snapshot", "base_model", "produced_model", "created_by")[:100]
    snapshots = DataSnapshot.objects.select_related("created_by")[:100]
    return render(request, "training/home.html", {
        "runs": runs, "snapshots": snapshots,
        "ready_snapshots": [s for s in snapshots if s.status == DataSnapshot.Status.READY],
        "models": ModelVersion.objects.policies().order_by("-created_at")[:200],  # a run's base is a policy
        "extras_installed": training_extras_installed(), "install_hint": INSTALL_HINT,
        "defaults": {stage: json.dumps(values, indent=1) for stage, values in DEFAULTS.items()},
        "kinds": DataSnapshot.Kind.choices, "stages": TrainingRun.Stage.choices, "corpora": CORPORA,
    })


@role_required(MANAGER, ADMIN)
@require_POST
def snapshot_create(request):
    kind = request.POST.get("kind", "")
    if kind not in DataSnapshot.Kind.values:
        messages.error(request, f"Unknown snapshot kind {kind!r}.")
        return redirect("training-home")
    try:
        config = _json_field(request, "snapshot_config")
        if corpora := _corpus_fields(request):  # the form's ratio fields win over the JSON's
            config["corpora"] = {**(config.get("corpora") if isinstance(config.get("corpora"), dict) else {}),
                                 **corpora}
        snapshot = create_snapshot(kind, config, user=request.user, name=request.POST.get("name", "").strip()[:200])
    except (ValueError, ConfigError) as error:
        messages.error(request, f"Snapshot not created: {error}")
        return redirect("training-home")
    if snapshot.status == DataSnapshot.Status.READY:
        messages.success(request, f"Snapshot #{snapshot.pk}: {snapshot.row_count} samples.")
    elif snapshot.status == DataSnapshot.Status.BUILDING:
        messages.info(request, f"Snapshot #{snapshot.pk} is a large export: a training worker builds it.")
    else:
        messages.warning(request, f"Snapshot #{snapshot.pk} is {snapshot.get_status_display().lower()}: {snapshot.error}")
    return redirect("training-snapshot", snapshot_id=snapshot.pk)


def _corpus_fields(request) -> dict:
    """The screen-corpus ratios the export form sets ({} when every field is blank)."""
    ratios = {}
    for corpus in CORPORA:
        text = (request.POST.get(f"corpus_{corpus}") or "").strip()
        if text:
            try:
                ratios[corpus] = float(text)
            except ValueError:
                raise ConfigError(f"the {corpus} ratio is not a number ({text!r})") from None
    return ratios


@role_required(MANAGER, ADMIN)
def snapshot_detail(request, snapshot_id):
    snapshot = get_object_or_404(DataSnapshot.objects.select_related("created_by"), pk=snapshot_id)
    return render(request, "training/snapshot.html", {
        "snapshot": snapshot, "preview": _preview(snapshot), "runs": snapshot.training_runs.all()[:50],
        "by_source": sorted((snapshot.stats.get("by_source") or {}).items()),
        "skipped": (snapshot.stats.get("skipped") or [])[:50], "corpora": corpus_mixture(snapshot),
        "high_frequency": snapshot.stats.get("high_frequency")})


def _preview(snapshot: DataSnapshot) -> list[dict]:
    """The first samples as the trainer will read them (the chat format), so a manager can check them."""
    path = Path(snapshot.directory or "/nonexistent") / "data.jsonl"
    samples = []
    try:
        with open(path) as handle:
            for line in handle:
                samples.append(json.loads(line))
                if len(samples) >= PREVIEW_SAMPLES:
                    break
    except (OSError, ValueError):
        return []
    return samples


@role_required(MANAGER, ADMIN)
@require_POST
def run_create(request):
    if not training_extras_installed():  # the page disables the button; a stale page is refused here
        messages.error(request, f"Run not launched: {INSTALL_HINT}")
        return redirect("training-home")
    stage = request.POST.get("stage", "")
    snapshot = DataSnapshot.objects.filter(pk=request.POST.get("snapshot") or 0).first()
    base = ModelVersion.objects.policies().filter(pk=request.POST.get("base_model") or 0).first()
    try:
        run = create_run(stage, _json_field(request, "run_config"), user=request.user, snapshot=snapshot,
                         base_model=base)
    except (ConfigError, RunError) as error:
        messages.error(request, f"Run not launched: {error}")
        return redirect("training-home")
    messages.success(request, f"{run} queued on the training workers.")
    return redirect("training-run", run_id=run.pk)


def _curve_chart(run: TrainingRun) -> dict | None:
    points = [p for p in run.metrics or [] if p.get("loss") is not None]
    if not points:
        return None
    # The loss axis spans the losses seen (not 0..max): a falling curve is seen falling.
    # (the chart format of benchmark/charts.py, which training may not import)
    return {"type": "line", "labels": [p["step"] for p in points], "percent": False, "fit": True,
            "axes": {"x": "training step", "y": "loss"},
            "datasets": [{"label": "loss", "data": [round(float(p["loss"]), 5) for p in points]}]}


@role_required(MANAGER, ADMIN)
def run_detail(request, run_id):
    run = get_object_or_404(TrainingRun.objects.select_related("snapshot", "base_model", "produced_model",
                                                               "created_by"), pk=run_id)
    context = {"run": run, "chart": _curve_chart(run), "live": run.status in TrainingRun.ACTIVE,
               "extras_installed": training_extras_installed(), "install_hint": INSTALL_HINT,
               "last_points": (run.metrics or [])[-10:]}
    return render_live(request, "training/run.html", context, live=context["live"], panel="training/_run_live.html")


@role_required(MANAGER, ADMIN)
@require_POST
def run_cancel(request, run_id):
    run = get_object_or_404(TrainingRun, pk=run_id)
    try:
        run = cancel_run(run)
        messages.success(request, f"{run}: cancel requested; the trainer saves a checkpoint and stops.")
    except RunError as error:
        messages.error(request, str(error))
    return redirect("training-run", run_id=run.pk)


@role_required(MANAGER, ADMIN)
@require_POST
def run_resume(request, run_id):
    run = get_object_or_404(TrainingRun, pk=run_id)
    try:
        resume_run(run)
        messages.success(request, f"{run} queued again; it continues from its last checkpoint.")
    except RunError as error:
        messages.error(request, str(error))
    return redirect("training-run", run_id=run.pk)


@role_required(MANAGER, ADMIN)
def model_detail(request, model_id):
    version = get_object_or_404(ModelVersion, pk=model_id)
    try:
        recipe = serving.recipe(version) if version.artifact and version.is_policy else ""
    except ValueError:
        recipe = ""
    # A step reward model's card (issue #39) follows its training live, then shows its held-out figures.
    reward = page_summary(version) if version.kind == ModelVersion.Kind.REWARD_MODEL else None
    return render_live(request, "training/model.html", {
        "version": version, "chain": lineage(version), "recipe": recipe,
        "serving": Serving.objects.filter(version=version).first(),
        "children": version.children.order_by("created_at"), "served_name": serving.served_name(version),
        "runs_from": version.training_runs_from.select_related("snapshot", "produced_model")[:50],
        # benchmark runs of this version, through the relation (training does not import the benchmark)
        "evaluations": version.eval_runs.select_related("benchmark").order_by("-created_at")[:20],
        "reward": reward}, live=bool(reward and reward["live"]), panel="training/_reward_model.html")


@role_required(MANAGER, ADMIN)
@require_POST
def reward_model_create(request):
    """Launch a step reward model's training on the training queue; its model page follows it."""
    if not training_extras_installed():
        messages.error(request, f"Not launched: {INSTALL_HINT}")
        return redirect("training-home")
    try:
        seed = int(request.POST.get("seed") or 0)
    except ValueError:
        messages.error(request, "Not launched: the seed is a whole number.")
        return redirect("training-home")
    try:
        version = launch_reward_model_training(request.POST.get("name", ""), request.user, seed=seed)
    except ValueError as error:
        messages.error(request, f"Not launched: {error}")
        return redirect("training-home")
    messages.success(request, f"{version.name} is queued on the training workers: it reads the judged steps, "
                              "then trains in seconds.")
    return redirect("training-model", model_id=version.pk)


@role_required(MANAGER, ADMIN)
@require_POST
def model_serve(request, model_id):
    version = get_object_or_404(ModelVersion, pk=model_id)
    try:
        row = request_serving(version)
    except ValueError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"A model host serves {version.name} within a minute and keeps it served until "
                                  f"{timezone.localtime(row.wanted_until):%Y-%m-%d %H:%M}, longer while a run uses it.")
    return redirect("training-model", model_id=model_id)


@role_required(MANAGER, ADMIN)
@require_POST
def model_register_endpoint(request, model_id):
    version = get_object_or_404(ModelVersion, pk=model_id)
    try:
        version = serving.register_endpoint(version, request.POST.get("endpoint_url", ""),
                                            request.POST.get("served_model_name", ""), by=request.user)
    except ValidationError as error:
        messages.error(request, "Endpoint not registered: " + "; ".join(error.messages))
        return redirect("training-model", model_id=model_id)
    health = version.health or {}
    if health.get("ok"):
        messages.success(request, f"{version.name} is served at {version.endpoint_url} and answers "
                                  f"({health.get('latency_ms')} ms); every line and the benchmark can use it.")
    else:
        messages.warning(request, f"{version.name} is registered, but the endpoint does not answer yet: "
                                  f"{health.get('error')}. Beat checks it again every minute.")
    return redirect("training-model", model_id=model_id)
