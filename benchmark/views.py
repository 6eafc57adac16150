"""Benchmark version pages (report §4.1–4.2): the versions, one version's composition and evolution,
its actions (generate against the quota, freeze, evaluate), and the expert review query by query.

Managers run versions. The review page is also open to adjudicators: the report's "experts" both
refine queries before a version ships (§4.2.4) and score split verdicts (§4.3), and in this console
adjudicators are those experts. Freezing, generating and launching stay the managers'.
Every change goes through benchmark.versions / benchmark.infer; every change is a POST.
"""
import json
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.db import transaction
from django.db.models import Count, Q
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.roles import ADJUDICATOR, MANAGER, role_required
from benchmark import versions
from benchmark.charts import quota_groups, realised_groups, value_label
from benchmark.imports import BenchmarkImportError, import_farm_tasks
from benchmark.infer import DEFAULT_INFER, EvaluationRefused, launch_evaluation
from benchmark.input_checks import (
    InputError,
    infer_settings,
    name_and_version,
    quota_table_from,
    shifts_from,
    split_from,
)
from benchmark.models import Benchmark, BenchmarkItem, EvalRun, FrozenBenchmark, Interaction, Split
from benchmark.presets import PRESETS
from benchmark.rules.metric_system import DIMENSIONS, as_table
from benchmark.rules.quotas import DEFAULT_TOLERANCE, realised_counts
from flywheel.models import ModelVersion, QueryLocked
from flywheel.policies import default_policy_version
from flywheel.rules.numbers import row_id, whole_number

FARM_TASKS = Path(settings.BASE_DIR) / "simfarm" / "tasks" / "tasks.jsonl"
BLANK_PRECONDITIONS = 2  # empty rows the review form offers for new preconditions


def latest_scores(benchmark_ids) -> dict:
    """{benchmark id: the latest finished run} for the list."""
    latest = {}
    for run in (EvalRun.objects.filter(benchmark_id__in=list(benchmark_ids), status=EvalRun.Status.DONE)
                .select_related("model_version").order_by("-finished_at", "-pk")):
        latest.setdefault(run.benchmark_id, run)
    return latest


def _list_context(create=None, derive=None):
    benchmarks = list(Benchmark.objects.select_related("parent", "created_by").annotate(
        live=Count("items", filter=~Q(items__review=BenchmarkItem.Review.RETIRED)),
        held_out=Count("items", filter=Q(items__split=Split.HELD_OUT) & ~Q(items__review=BenchmarkItem.Review.RETIRED)),
        pending=Count("items", filter=Q(items__review=BenchmarkItem.Review.PENDING)),
        runs=Count("eval_runs", distinct=True)).order_by("name", "-created_at"))
    latest = latest_scores(b.pk for b in benchmarks)
    for benchmark in benchmarks:
        benchmark.latest_run = latest.get(benchmark.pk)
    return {"benchmarks": benchmarks, "presets": PRESETS,
            "has_frozen": any(b.frozen for b in benchmarks),
            "create": create or {"preset": "vbench"}, "derive": derive or {},
            "shift_example": json.dumps({"intent_dependency": {"dependent": 0.1, "single": -0.1}}),
            "quota_example": json.dumps(PRESETS["vbench"], indent=1)}


@role_required(MANAGER)
@require_POST
def benchmark_import_farm(request):
    """What `manage.py import_benchmark --farm simfarm/tasks/tasks.jsonl` does, from the pages."""
    try:
        benchmark = import_farm_tasks(FARM_TASKS, user=request.user)
    except BenchmarkImportError as error:
        messages.error(request, "The farm's task set was not imported: " + "; ".join(map(str, error.problems[:5])))
        return redirect("benchmark-list")
    except OSError:
        messages.error(request, f"The farm's task set was not imported: {FARM_TASKS.name} cannot be read "
                                "where this console runs.")
        return redirect("benchmark-list")
    held_out = benchmark.items.filter(split=Split.HELD_OUT).count()
    if benchmark.import_report.get("created"):
        messages.success(request, f"{benchmark} is frozen from the farm's task set: {benchmark.items.count() - held_out} "
                                  f"open queries, {held_out} held out for evaluation only.")
    else:
        messages.info(request, f"{benchmark} is there already; nothing changed.")
    return redirect("benchmark-detail", benchmark_id=benchmark.pk)


@role_required(MANAGER)
def benchmark_list(request):
    """The versions; POST creates one from a preset or a pasted quota table."""
    if request.method != "POST":
        return render(request, "benchmark/list.html", _list_context())
    form = {k: request.POST.get(k, "") for k in ("name", "version", "purpose", "preset", "quota_table")}
    try:
        name, version = name_and_version(form["name"], form["version"])
        table = quota_table_from(form["preset"], form["quota_table"])
        benchmark = versions.create_version(name, version, table, purpose=form["purpose"].strip(), user=request.user)
    except (InputError, versions.VersionError) as error:
        return render(request, "benchmark/list.html", _list_context(create={**form, "error": str(error)}), status=400)
    messages.success(request, f"{benchmark} created as a draft. Generate queries against its quota, "
                              "then review them and freeze it.")
    return redirect("benchmark-detail", benchmark_id=benchmark.pk)


@role_required(MANAGER)
@require_POST
def benchmark_derive(request):
    """A new draft from a parent by stated quota shifts (the evolution of §4)."""
    form = {k: request.POST.get(k, "") for k in ("parent", "version", "name", "purpose", "shifts")}
    parent = Benchmark.objects.filter(pk=row_id(form["parent"])).first() if row_id(form["parent"]) else None
    try:
        if parent is None:
            raise InputError("choose the parent version to derive from")
        name, version = name_and_version(form["name"] or parent.name, form["version"])
        shifts = shifts_from(form["shifts"] or "{}")
        child = versions.derive_version(parent, version, shifts, user=request.user, name=name,
                                        purpose=form["purpose"].strip())
    except (InputError, versions.VersionError) as error:
        return render(request, "benchmark/list.html", _list_context(derive={**form, "error": str(error)}), status=400)
    moved = len(child.evolution.get("moved") or [])
    messages.success(request, f"{child} derived from {parent}: {moved} quota cell(s) moved, "
                              f"{child.items.count()} queries carried over. Generate against the new quota to fill it.")
    return redirect("benchmark-detail", benchmark_id=child.pk)


def _evolution(benchmark):
    evolution = benchmark.evolution or {}
    moved = [{**m, "value_label": value_label(m["value"])} for m in evolution.get("moved") or []]
    return {**evolution, "moved": moved, "shifts_json": json.dumps(evolution.get("shifts") or {})}


@role_required(MANAGER)
def benchmark_detail(request, benchmark_id):
    benchmark = get_object_or_404(Benchmark.objects.select_related("parent", "frozen_by", "created_by"), pk=benchmark_id)
    composition = versions.composition(benchmark)
    items = list(benchmark.items.select_related("query").order_by("position", "pk"))
    live_labels = [i.labels for i in items if i.review != BenchmarkItem.Review.RETIRED]
    counts = {d: dict(c) for d, c in realised_counts(live_labels).items()}
    table = benchmark.quota_table or {}
    must_include = []
    for rule in table.get("must_include") or []:
        have = counts.get(rule.get("dimension"), {}).get(rule.get("value"), 0)
        must_include.append({**rule, "min": rule.get("min", 1), "count": have, "ok": have >= rule.get("min", 1)})
    reviews = {state: sum(1 for i in items if i.review == state) for state in BenchmarkItem.Review.values}
    return render(request, "benchmark/detail.html", {
        "benchmark": benchmark, "composition": composition, "metric_system": as_table(),
        "quota_groups": quota_groups(composition["drift"], float(table.get("tolerance", DEFAULT_TOLERANCE))),
        "must_include": must_include,
        "realised_groups": [] if composition["drift"] else realised_groups(counts, composition["size"]),
        "evolution": _evolution(benchmark), "items": items, "reviews": reviews,
        "held_out": sum(1 for i in items if i.split == Split.HELD_OUT and i.review != BenchmarkItem.Review.RETIRED),
        "not_executable": sum(1 for i in items if not i.executable and i.review != BenchmarkItem.Review.RETIRED),
        "runs": benchmark.eval_runs.select_related("model_version").order_by("-created_at")[:50],
        "model_versions": ModelVersion.objects.policies().order_by("name"), "infer_defaults": DEFAULT_INFER,
        "children": benchmark.children.order_by("-created_at"),
    })


@role_required(MANAGER)
@require_POST
def benchmark_generate(request, benchmark_id):
    """Generate queries against the quota, in the benchmark worker (after this commit)."""
    benchmark = get_object_or_404(Benchmark, pk=benchmark_id)
    if benchmark.frozen:
        messages.error(request, f"{benchmark} is frozen: derive a new version and generate against its quota.")
        return redirect("benchmark-detail", benchmark_id=benchmark.pk)
    from benchmark.tasks import generate

    user_id = request.user.pk
    transaction.on_commit(lambda: generate.delay(benchmark.pk, user_id))
    messages.success(request, f"Generation against the quota of {benchmark} started in the background "
                              "(follow it on the Tasks page); the new drafts appear below for review.")
    return redirect("benchmark-detail", benchmark_id=benchmark.pk)


@role_required(MANAGER)
@require_POST
def benchmark_freeze(request, benchmark_id):
    benchmark = get_object_or_404(Benchmark, pk=benchmark_id)
    try:
        benchmark = versions.freeze(benchmark, request.user)
    except (versions.VersionError, FrozenBenchmark) as error:
        messages.error(request, f"Not frozen: {error}")
    else:
        messages.success(request, f"{benchmark} frozen (content hash {benchmark.content_hash[:12]}…): "
                                  "it no longer changes and can be evaluated.")
    return redirect("benchmark-detail", benchmark_id=benchmark.pk)


@role_required(MANAGER)
@require_POST
def benchmark_evaluate(request, benchmark_id):
    """Launch an evaluation run of a frozen version."""
    benchmark = get_object_or_404(Benchmark, pk=benchmark_id)
    chosen = request.POST.get("model_version", "")
    try:
        if chosen:
            version = ModelVersion.objects.filter(pk=row_id(chosen)).first() if row_id(chosen) else None
            if version is None:
                raise InputError(f"no model version {chosen!r}")
        else:
            version = default_policy_version()
        split = split_from(request.POST.get("split", "all"))
        settings = infer_settings({k: request.POST.get(k, "") for k in DEFAULT_INFER if k in request.POST})
        evaluation = launch_evaluation(benchmark, version, split, settings, user=request.user)
    except (InputError, EvaluationRefused) as error:
        messages.error(request, f"Not launched: {error}")
        return redirect("benchmark-detail", benchmark_id=benchmark.pk)
    messages.success(request, f"{evaluation} launched: {evaluation.total} rollouts on the phones.")
    return redirect("eval-run-detail", eval_run_id=evaluation.pk)


@role_required(MANAGER)
def benchmark_items_export(request, benchmark_id):
    """The version's items as JSONL: the frozen snapshot of each, or what it is now for a draft."""
    benchmark = get_object_or_404(Benchmark, pk=benchmark_id)

    def lines():
        for item in benchmark.items.select_related("query").order_by("position", "pk").iterator():
            body = item.snapshot if benchmark.frozen and item.snapshot else item.frozen_snapshot()
            record = {**body, "position": item.position, "review": item.review, "external_id": item.external_id}
            yield json.dumps(record, ensure_ascii=False) + "\n"

    response = StreamingHttpResponse(lines(), content_type="application/x-ndjson; charset=utf-8")
    filename = f"{benchmark.name}-{benchmark.version}.jsonl".replace('"', "").replace("/", "_")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


# ---- expert review, query by query (§4.2.4) ----

def _review_form(item, post=None) -> dict:
    """What the review form shows: the item as it is, or what was just sent (kept on an error)."""
    environment = item.environment or {}
    if post is None:
        preconditions = [{"text": str(c.get("text", "")), "holds": c.get("holds", "per_run")}
                         for c in environment.get("preconditions") or [] if isinstance(c, dict)]
        return {"text": item.query.text, "labels": dict(item.labels or {}), "preconditions": preconditions,
                "expected_interaction": item.expected_interaction,
                "interaction_points": "\n".join(str(p) for p in item.interaction_points or []),
                "note": item.review_note}
    rows = sorted({n for k in post if k.startswith("pre_text_")
                   and (n := whole_number(k.removeprefix("pre_text_"), maximum=10**6)) is not None})
    preconditions = [{"text": post.get(f"pre_text_{i}", "").strip(), "holds": post.get(f"pre_holds_{i}", "per_run")}
                     for i in rows[:100]]
    return {"text": post.get("text", ""), "labels": {d.key: post.get(f"label_{d.key}", "").strip() for d in DIMENSIONS},
            "preconditions": [p for p in preconditions if p["text"]],
            "expected_interaction": post.get("expected_interaction", item.expected_interaction),
            "interaction_points": post.get("interaction_points", ""), "note": post.get("note", "")}


def _review_context(benchmark, item, form, error=""):
    items = list(benchmark.items.select_related("query").order_by("position", "pk"))
    index = next(i for i, it in enumerate(items) if it.pk == item.pk)
    preconditions = form["preconditions"] + [{"text": "", "holds": "per_run"}] * BLANK_PRECONDITIONS
    labels = form["labels"]
    dimensions = [{"key": d.key, "label": d.label, "tests": d.tests, "current": labels.get(d.key) or "",
                   "choices": [(v, value_label(v)) for v in d.values]} for d in DIMENSIONS]
    return {"benchmark": benchmark, "item": item, "items": items, "form": form, "error": error,
            "preconditions": list(enumerate(preconditions)), "dimensions": dimensions,
            "interactions": Interaction.choices, "readonly": benchmark.frozen,
            "previous": items[index - 1] if index > 0 else None,
            "next": items[index + 1] if index + 1 < len(items) else None,
            "position": index + 1, "pending": sum(1 for i in items if i.review == BenchmarkItem.Review.PENDING)}


@role_required(MANAGER, ADJUDICATOR)
def benchmark_review(request, benchmark_id):
    """One query of a version at a time; `?item=` picks it (default: the first not reviewed)."""
    benchmark = get_object_or_404(Benchmark, pk=benchmark_id)
    items = benchmark.items.select_related("query").order_by("position", "pk")
    chosen = request.GET.get("item", "")
    item = items.filter(pk=row_id(chosen)).first() if row_id(chosen) else None
    item = item or items.filter(review=BenchmarkItem.Review.PENDING).first() or items.first()
    if item is None:
        return render(request, "benchmark/review_empty.html", {"benchmark": benchmark})
    return render(request, "benchmark/review.html", _review_context(benchmark, item, _review_form(item)))


@role_required(MANAGER, ADJUDICATOR)
@require_POST
def benchmark_review_item(request, benchmark_id, item_id):
    item = get_object_or_404(BenchmarkItem.objects.select_related("benchmark", "query"), pk=item_id,
                             benchmark_id=benchmark_id)
    benchmark = item.benchmark
    form = _review_form(item, request.POST)
    decision = request.POST.get("decision", "save")
    environment = {**(item.environment or {}), "preconditions": form["preconditions"]}
    points = [line.strip() for line in form["interaction_points"].splitlines() if line.strip()]
    try:
        versions.review_item(item, request.user, text=form["text"],
                             labels={k: v for k, v in form["labels"].items() if v}, environment=environment,
                             expected_interaction=form["expected_interaction"], interaction_points=points,
                             note=form["note"].strip(), decision=decision)
    except FrozenBenchmark as error:
        messages.error(request, f"Not saved: {error}")
        return redirect(f"{reverse('benchmark-review', args=[benchmark.pk])}?item={item.pk}")
    except versions.VersionError as error:
        return render(request, "benchmark/review.html",
                      _review_context(benchmark, item, form, error=f"Not saved: {error}"), status=400)
    except QueryLocked:
        error = (f"Not saved: {item.query.key} is frozen into an earlier version, so its text stays as it is; "
                 "retire it here and add a rewritten query instead (the labels and environment can still change)")
        return render(request, "benchmark/review.html", _review_context(benchmark, item, form, error=error), status=400)
    done = {"approve": "approved", "retire": "retired from this version", "save": "saved"}[decision]
    messages.success(request, f"{item.query.key} {done}.")
    target = item
    if decision != "save":
        later = benchmark.items.filter(review=BenchmarkItem.Review.PENDING).order_by("position", "pk")
        target = (later.filter(position__gt=item.position).first() or later.exclude(pk=item.pk).first()
                  or benchmark.items.filter(position__gt=item.position).order_by("position", "pk").first() or item)
    return redirect(f"{reverse('benchmark-review', args=[benchmark.pk])}?item={target.pk}")
