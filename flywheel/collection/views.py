"""Collection run pages (managers): launch, watch progress and phones, read the step log, cancel."""
import json
import re

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import MANAGER, role_required
from devices.anomaly_injection import KINDS as ANOMALY_KINDS
from devices.anomaly_injection import WHERE_IT_WORKS
from devices.models import Device
from flywheel.collection.launch import LINES, cancel_run, launch_run, refresh_progress, select_queries, selection_hint
from flywheel.collection.recorder import record_answer
from flywheel.collection.run_config import CONFIG_FIELDS, clean_launch
from flywheel.models import Adjudication, App, CollectionRun, Line, ModelVersion, Step, Vote
from flywheel.policies import unservable_reason
from flywheel.polling import render_live
from flywheel.queries.external import ingest_external
from flywheel.queries.uploads import ImportTooLarge, form_import_text
from flywheel.rules.numbers import row_id


def _launch_form_data(post):
    """The form's fields → (line, query filter, model version, config); raises ValidationError."""
    line = post.get("line", "automatic")
    query_filter = {"apps": post.getlist("apps"), "tiers": post.getlist("tiers"),
                    "tags": [t.strip() for t in post.get("tags", "").split(",") if t.strip()],
                    "keys": chosen_keys(post)}
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
        version = ModelVersion.objects.filter(pk=row_id(chosen)).first() if row_id(chosen) else None
        if version is None:
            raise ValidationError(f"no model version {chosen!r}")
        if unservable_reason(version):
            raise ValidationError(unservable_reason(version))
    return line, query_filter, version, config

def chosen_keys(data) -> list[str]:
    """The query keys a person typed (commas, spaces or new lines between them), in their order."""
    return list(dict.fromkeys(re.split(r"[\s,]+", data.get("keys", "").strip()))) if data.get("keys", "").strip() else []


@role_required(MANAGER)
def run_count(request):
    """The launch form asks (htmx, on each change) how many trajectories its selection launches."""
    try:
        line, query_filter, _version, config = _launch_form_data(request.GET)
    except ValidationError as error:
        return render(request, "flywheel/_launch_count.html", {"problem": "; ".join(error.messages)})
    queries = select_queries(query_filter, held_out=line == Line.BENCHMARK)
    found = set(queries.values_list("key", flat=True))
    repeats = int(config.get("repeats") or 1)
    return render(request, "flywheel/_launch_count.html", {
        "queries": len(found), "repeats": repeats, "trajectories": len(found) * repeats,
        "unmatched": [key for key in query_filter.get("keys", []) if key not in found]})


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
        "apps": App.objects.all(), "versions": ModelVersion.objects.policies(),
        "anomaly_kinds": [(kind, words, WHERE_IT_WORKS[kind]) for kind, words in ANOMALY_KINDS.items()],
        "idle_phones": Device.objects.filter(status=Device.Status.IDLE).count(),
        "chosen_keys": ", ".join(chosen_keys(request.GET)),  # a link from the query pages may choose them
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
    log = list(steps.only("trajectory_id", "index", "foreground_package", "executed_action", "audit", "anomaly",
                          "created_at", "trajectory__query__text").order_by("-created_at")[:40])
    names = App.display_labels(s.foreground_package for s in log)
    for step in log:
        step.app_label = names.get(step.foreground_package, "")
    questions = [s for s in steps.filter(edit__clarify_pending__isnull=False).only(
        "trajectory_id", "edit", "trajectory__query__text") if not (s.edit or {}).get("clarify_answer")]
    live = run.status in (CollectionRun.Status.QUEUED, CollectionRun.Status.RUNNING)
    context = {"run": run, "phones": phones, "log": log, "questions": questions, "live": live,
               "verdicts": verdict_rows(run)}
    return render_live(request, "flywheel/run_detail.html", context, live=live, panel="flywheel/_run_live.html")


VERDICT_ROWS = 100  # the newest trajectories; the ledger of the run has them all


def verdict_rows(run) -> list[dict]:
    """The run's newest trajectories with their verdict and who or what decided it: the person who
    adjudicated it, else the three judges' votes."""
    trajectories = (run.trajectories.select_related("query").only(
        "id", "run_id", "status", "verdict", "destination", "query__text", "started_at")
        .prefetch_related(Prefetch("votes", queryset=Vote.objects.order_by("system").only(
                              "trajectory_id", "system", "vote")),
                          Prefetch("adjudications", to_attr="decided", queryset=Adjudication.objects.exclude(
                              decision="").select_related("adjudicator").order_by("-decided_at")))
        .order_by("-started_at")[:VERDICT_ROWS])
    rows = []
    for trajectory in trajectories:
        decided = trajectory.decided[0] if trajectory.decided else None
        if decided is not None:
            by = f"{decided.adjudicator or 'a former user'}: {decided.get_decision_display()}"
        elif trajectory.votes.all():
            by = "judges: " + ", ".join(f"{v.system} {v.get_vote_display()}" for v in trajectory.votes.all())
        else:
            by = ""
        rows.append({"trajectory": trajectory, "by": by, "by_person": decided is not None})
    return rows


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
