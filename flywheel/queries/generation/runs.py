"""Generation runs: plan drafts, pass them through the intake gates, write Query rows in batches.

A run is launched from the site (a Celery task, dispatched after the launching transaction
commits) or run synchronously by scripts and tests (`generate_now`). Each batch of drafts is
judged by gates.run_gates and written in one transaction with bulk inserts: passed drafts become
queries in review ("Needs review"), rejected ones are kept as rejected queries with "gateN: reason"
and their gate results. Keys are "gen-<run>-<n>" over a plan that is deterministic for the run's
config and seed, so a run picked up again after a lost worker skips what it already wrote.
A caller that plans its own drafts (generation against a benchmark quota) hands them to
`generate_now(..., drafts=...)`: they pass the same gates and are written the same way.
"""
from __future__ import annotations

import logging
import time
from collections import Counter

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from flywheel import jobs
from flywheel.models import App, Edge, FunctionNode, GenerationRun, ModelVersion, Query, QueryApp, QueryFunction
from flywheel.queries.gates import check_independent_judge, run_gates
from flywheel.queries.generation.llm import rewrite_with_llm
from flywheel.queries.generation.planner import normalized_config, plan_drafts

log = logging.getLogger(__name__)
BATCH = 250
MAX_PROBLEMS = 200
OPEN = (GenerationRun._meta.get_field("status").default, "running")


def _check_version(model_version, judge_version=None):
    """ValueError (said for a person) before anything is written: the writer and gate 1's judge
    are endpoint models, and the judge is not the writer (§2.2.6)."""
    for version in (model_version, judge_version):
        if version is not None and version.kind != ModelVersion.Kind.ENDPOINT:
            raise ValueError(f"{version.name} is not an endpoint model; choose an endpoint or offline")
    check_independent_judge(model_version, judge_version)


def launch_generation(config, user, model_version=None, judge_version=None) -> GenerationRun:
    """Create a queued run and hand it to a worker once the transaction commits. `model_version`
    writes the drafts, `judge_version` (another endpoint, or none: the rules) judges gate 1."""
    config = normalized_config(config)
    _check_version(model_version, judge_version)
    with transaction.atomic():
        run = GenerationRun.objects.create(config=config, model_version=model_version, judge_version=judge_version,
                                           created_by=user)
        transaction.on_commit(lambda: dispatch_generation(run.pk))
    return run


def dispatch_generation(run_id: int):
    result = jobs.task(jobs.GENERATE_QUERIES).apply_async((run_id,))
    GenerationRun.objects.filter(pk=run_id).update(celery_task_id=result.id or "")
    return result.id


def generate_now(config, model_version=None, user=None, drafts=None, judge_version=None) -> GenerationRun:
    """Create and execute a run in this process (scripts, tests); returns it finished.

    `drafts`: a plan the caller made (and wrote, with its own LLM prompt if any), used as the
    run's drafts instead of plan_drafts(config) and without another LLM pass; they still pass
    the intake gates (gate 1 judged by `judge_version` when given, never by the writer
    `model_version`) and are written like any other."""
    config = normalized_config(config)
    _check_version(model_version, judge_version)
    if drafts is not None:
        config["supplied_drafts"] = len(drafts)
    run = GenerationRun.objects.create(config=config, model_version=model_version, judge_version=judge_version,
                                       created_by=user)
    execute_run(run.pk, drafts=drafts)
    run.refresh_from_db()
    return run


def cancel_generation(run: GenerationRun) -> bool:
    """Stop a queued or running run after its current batch; what was written stays."""
    changed = GenerationRun.objects.filter(pk=run.pk, status__in=OPEN).update(
        status="cancelled", finished_at=timezone.now())
    run.refresh_from_db()
    return bool(changed)


def _status(run_id) -> str:
    return GenerationRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or ""


def page_ids_of(draft) -> list[int]:
    """The pages a draft's GEM path passes through, in order (for the LLM prompt)."""
    edges = Edge.objects.in_bulk(draft.gem_path)
    ids = []
    for edge_id in draft.gem_path:
        edge = edges.get(edge_id)
        if edge is None:
            continue
        for page_id in (edge.source_id, edge.target_id):
            if page_id not in ids:
                ids.append(page_id)
    return ids


def _query_row(run, draft, key) -> Query:
    labels = dict(draft.labels)
    gate1 = draft.gate_results.get("gate1") or {}
    if gate1.get("complexity") and "complexity" not in labels:
        labels["complexity"] = gate1["complexity"]
    labels["origin"] = draft.origin
    rejected = bool(draft.rejected_by)
    return Query(
        key=key, text=draft.text, tier=draft.tier, subclass=draft.subclass, persona=draft.persona,
        capabilities=list(draft.capabilities), labels=labels, risk=draft.risk or "low",
        prerequisites=list(draft.prerequisites), source="synthesized",
        tags=["generated"] + (["cross-app"] if len(draft.apps) > 1 else []),
        known_path=draft.known_path, verification=draft.verification, gate_results=draft.gate_results,
        generation_run=run, gem_path=list(draft.gem_path),
        status=Query.Status.REJECTED if rejected else Query.Status.REVIEW,
        status_reason=f"{draft.rejected_by}: {draft.rejection_reason}" if rejected else "")


def write_batch(run, numbered_drafts) -> None:
    """One transaction: the queries of (index, draft) pairs with their app and function links."""
    packages = {p for _i, d in numbered_drafts for p in d.apps}
    function_ids = {f for _i, d in numbered_drafts for f in d.functions}
    with transaction.atomic():
        apps = App.objects.in_bulk(packages, field_name="package")
        for package in packages - set(apps):
            apps[package] = App.objects.get_or_create(package=package, defaults={"label": package})[0]
        known_functions = set(FunctionNode.objects.filter(id__in=function_ids).values_list("id", flat=True))
        rows = [_query_row(run, draft, f"gen-{run.pk}-{index}") for index, draft in numbered_drafts]
        Query.objects.bulk_create(rows)
        app_links, function_links = [], []
        for row, (_index, draft) in zip(rows, numbered_drafts):
            for position, package in enumerate(dict.fromkeys(draft.apps)):
                app_links.append(QueryApp(query_id=row.pk, app_id=apps[package].pk, position=position))
            for position, function_id in enumerate(f for f in dict.fromkeys(draft.functions) if f in known_functions):
                function_links.append(QueryFunction(query_id=row.pk, function_id=function_id, position=position))
        QueryApp.objects.bulk_create(app_links)
        QueryFunction.objects.bulk_create(function_links)


def refresh_counts(run_id) -> dict:
    counts = Query.objects.filter(generation_run_id=run_id).aggregate(
        generated=Count("id"), passed=Count("id", filter=~Q(status=Query.Status.REJECTED)),
        rejected=Count("id", filter=Q(status=Query.Status.REJECTED)))
    GenerationRun.objects.filter(pk=run_id).update(**counts)
    return counts


def rejection_report(run_id) -> dict:
    """{gate: {reason: count}} over the run's rejected queries."""
    report = {}
    reasons = Counter(Query.objects.filter(generation_run_id=run_id, status=Query.Status.REJECTED)
                      .values_list("status_reason", flat=True))
    for reason, count in reasons.most_common():
        gate, _, why = reason.partition(": ")
        report.setdefault(gate or "unknown", {})[why[:160] or "(no reason)"] = count
    return report


def execute_run(run_id: int, drafts=None) -> dict:
    """The run's whole work (the Celery task calls this). Problems are recorded, not raised.
    `drafts`: the caller's own plan (generate_now); a run made of supplied drafts is not re-planned."""
    claimed = GenerationRun.objects.filter(pk=run_id, status__in=OPEN).update(status="running")
    if not claimed:
        return {"run": run_id, "status": _status(run_id), "skipped": True}
    run = GenerationRun.objects.select_related("model_version", "judge_version").get(pk=run_id)
    problems, started = list(run.problems or []), time.monotonic()
    timings = {}
    try:
        supplied = drafts is not None
        if not supplied and run.config.get("supplied_drafts") is not None:
            raise RuntimeError("its drafts were supplied by the caller and are gone; launch it again")
        drafts = list(drafts) if supplied else plan_drafts(run.config, problems)
        timings["plan_s"] = round(time.monotonic() - started, 3)
        GenerationRun.objects.filter(pk=run_id).update(total=len(drafts), problems=problems[:MAX_PROBLEMS])
        llm_texts = sum(d.origin == "llm" for d in drafts) if supplied else 0
        if run.model_version is not None and drafts and not supplied:
            llm_texts = rewrite_with_llm(drafts, run.model_version, page_ids_of, problems)
        written = set(Query.objects.filter(generation_run_id=run_id).values_list("key", flat=True))
        numbered = [(i, d) for i, d in enumerate(drafts) if f"gen-{run_id}-{i}" not in written]
        gate_s = write_s = 0.0
        for start in range(0, len(numbered), BATCH):
            if _status(run_id) != "running":
                break  # cancelled: the batches written stay, nothing half-written
            batch = numbered[start:start + BATCH]
            tick = time.monotonic()
            run_gates([d for _i, d in batch], run.model_version, run.judge_version)
            gate_s += time.monotonic() - tick
            tick = time.monotonic()
            write_batch(run, batch)
            write_s += time.monotonic() - tick
            refresh_counts(run_id)
        elapsed = time.monotonic() - started
        counts = refresh_counts(run_id)
        timings.update(gates_s=round(gate_s, 3), write_s=round(write_s, 3), total_s=round(elapsed, 3),
                       per_second=round(counts["generated"] / elapsed, 1) if elapsed else None)
        report = {"rejections": rejection_report(run_id), "timings": timings, "llm_texts": llm_texts,
                  "drafts": len(drafts)}
        GenerationRun.objects.filter(pk=run_id, status="running").update(status="done")
        GenerationRun.objects.filter(pk=run_id).update(report=report, problems=problems[:MAX_PROBLEMS],
                                                       finished_at=timezone.now())
        return {"run": run_id, **counts, "status": _status(run_id)}
    except Exception as error:  # the run records why it stopped; the worker stays up
        log.exception("generation run %s failed", run_id)
        problems.append({"kind": "failed", "detail": f"{type(error).__name__}: {error}"[:500]})
        GenerationRun.objects.filter(pk=run_id).update(status="failed", problems=problems[:MAX_PROBLEMS],
                                                       finished_at=timezone.now())
        refresh_counts(run_id)
        return {"run": run_id, "status": "failed", "error": str(error)[:200]}
