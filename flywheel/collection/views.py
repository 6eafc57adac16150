"""Collection run pages (managers): launch, watch progress and phones, read the step log, cancel."""
import json

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import MANAGER, role_required
from devices.anomaly_injection import KINDS as ANOMALY_KINDS
from devices.models import Device
from flywheel.collection.launch import LINES, cancel_run, launch_run, refresh_progress, selection_hint
from flywheel.collection.recorder import record_answer
from flywheel.collection.run_config import CONFIG_FIELDS, clean_launch
from flywheel.models import App, CollectionRun, Line, ModelVersion, Step
from flywheel.policies import unservable_reason
from flywheel.polling import render_live
from flywheel.queries.external import ingest_external
from flywheel.queries.uploads import ImportTooLarge, form_import_text


def _launch_form_data(post):
    """The form's fields → (line, query filter, model version, config); raises ValidationError."""
    line = post.get("line", "automatic")
    query_filter = {"apps": post.getlist("apps"), "tiers": post.getlist("tiers"),
                    "tags": [t.strip() for t in post.get("tags", "").split(",") if t.strip()]}
    if post.get("pool"):
        query_filter["pool"] = post["pool"]
    if line == Line.EXTERNAL:
        query_filter["source"] = "external"
    config = {name: post.get(name) for name in CONFIG_FIELDS}
    config["anomaly_rates"] = {kind: post[f"anomaly_{kind}"] for kind in ANOMALY_KINDS
                               if post.get(f"anomaly_{kind}") not in (None, "", "0")}
    line, query_filter, config = clean_launch(line, query_filter, config)
    version, chosen = None, post.get("model_version", "")
    if chosen:
        version = ModelVersion.objects.filter(pk=chosen).first() if chosen.isascii() and chosen.isdigit() else None
        if version is None:
            raise ValidationError(f"no model version {chosen!r}")
        if unservable_reason(version):
            raise ValidationError(unservable_reason(version))
    return line, query_filter, version, config

@role_required(MANAGER)
def run_list(request):
    if request.method == "POST":
        try:
            line, query_filter, version, config = _launch_form_data(request.POST)
        except ValidationError as error:
            messages.error(request, "; ".join(error.messages))
            return redirect("run-list")
        run = launch_run(line, query_filter, version, config, user=request.user)
        if not run.total:
            run.delete()
            messages.error(request, f"No query matches that selection; nothing was launched. {selection_hint()}")
            return redirect("run-list")
        messages.success(request, f"{run} launched with {run.total} trajectories to collect.")
        return redirect("run-detail", run_id=run.pk)
    return render(request, "flywheel/runs.html", {
        "runs": CollectionRun.objects.select_related("model_version", "created_by")[:50],
        "lines": [(value, label) for value, label in CollectionRun._meta.get_field("line").choices
                  if value in LINES],
        "apps": App.objects.all(), "versions": ModelVersion.objects.all(), "anomaly_kinds": ANOMALY_KINDS,
        "idle_phones": Device.objects.filter(status=Device.Status.IDLE).count(),
    })

@role_required(MANAGER)
def run_detail(request, run_id):
    run = get_object_or_404(CollectionRun, pk=run_id)
    refresh_progress(run.pk)
    run.refresh_from_db()
    holders = [f"collection:run:{run.pk}"]
    phones = Device.objects.filter(leases__holder__in=holders, leases__released_at__isnull=True).distinct()
    # The step log shows a few columns of each step: its reasoning, model I/O and timings (kilobytes
    # per step) and the query's specs stay in the database.
    steps = Step.objects.filter(trajectory__run=run).select_related("trajectory__query")
    log = steps.only("trajectory_id", "index", "foreground_package", "executed_action", "audit", "anomaly",
                     "created_at", "trajectory__query__text").order_by("-created_at")[:40]
    questions = [s for s in steps.filter(edit__clarify_pending__isnull=False).only(
        "trajectory_id", "edit", "trajectory__query__text") if not (s.edit or {}).get("clarify_answer")]
    live = run.status in (CollectionRun.Status.QUEUED, CollectionRun.Status.RUNNING)
    context = {"run": run, "phones": phones, "log": log, "questions": questions, "live": live}
    return render_live(request, "flywheel/run_detail.html", context, live=live, panel="flywheel/_run_live.html")


@role_required(MANAGER)
@require_POST
def run_clarify(request, run_id, step_id):
    """A person answers a question the policy asked (schema-guided line); the phone goes on."""
    step = get_object_or_404(Step, pk=step_id, trajectory__run_id=run_id)
    answer = request.POST.get("answer", "").strip()
    if not answer:
        messages.error(request, "Give an answer.")
    elif (step.edit or {}).get("clarify_answer"):
        messages.info(request, "That question was already answered.")
    else:
        record_answer(step, answer, by=request.user.username)
        messages.success(request, f"Answered '{answer}' for trajectory #{step.trajectory_id}.")
    return redirect("run-detail", run_id=run_id)

@role_required(MANAGER)
@require_POST
def run_cancel(request, run_id):
    run = get_object_or_404(CollectionRun, pk=run_id)
    cancel_run(run)
    messages.info(request, f"{run} cancelled: phones finish their current step and stop.")
    return redirect("run-detail", run_id=run.pk)

@role_required(MANAGER)
@require_POST
def external_import(request):
    """Paste or upload external queries (one per line, or JSONL objects with a "text")."""
    try:
        raw = form_import_text(request)
    except ImportTooLarge as error:
        messages.error(request, f"Not imported: {error}.")
        return redirect("run-list")
    except UnicodeDecodeError:
        messages.error(request, "Not imported: the file is not UTF-8 text.")
        return redirect("run-list")
    records = []
    for line in raw.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            records.append(json.loads(line) if line.startswith("{") else line)
        except json.JSONDecodeError:
            records.append(line)
    if not records:
        messages.error(request, "Nothing to import: paste one query per line.")
        return redirect("run-list")
    summary = ingest_external(records)
    messages.success(request, f"External queries: {summary['kept']} kept for replay, "
                              f"{summary['rejected']} removed (see Queries, status Rejected, for reasons).")
    return redirect("run-list")
