"""Evaluation run pages (report §4.3): progress, scores and results of one run, its actions
(cancel, resume, re-judge), its exports, and the experts' queue of split verdicts.

Managers watch and steer runs. The split queue is the experts' (adjudicators, and managers): the
report sends every trajectory the judges split on to an expert, whose verdict then counts in SR.
"""
from django.contrib import messages
from django.db import transaction
from django.db.models import Count, Q
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.roles import ADJUDICATOR, MANAGER, has_role, role_required
from benchmark.charts import dimension_chart, dimension_rows
from benchmark.exports import androidworld_summary, results_jsonl
from benchmark.infer import cancel_evaluation, resume_evaluation
from benchmark.judges import record_expert_verdict
from benchmark.models import Benchmark, BenchmarkItem, EvalResult, EvalRun
from flywheel.polling import render_live
from flywheel.rules.numbers import row_id

LIVE = (EvalRun.Status.QUEUED, EvalRun.Status.RUNNING, EvalRun.Status.JUDGING, EvalRun.Status.PAUSED)
STOPPABLE = (EvalRun.Status.QUEUED, EvalRun.Status.RUNNING, EvalRun.Status.PAUSED)
REJUDGEABLE = (EvalRun.Status.DONE, EvalRun.Status.PAUSED, EvalRun.Status.CANCELLED, EvalRun.Status.FAILED)


def run_context(evaluation: EvalRun) -> dict:
    scores = evaluation.scores or {}
    rows = dimension_rows(scores.get("by_dimension"))
    results = list(evaluation.results.select_related("item__query", "trajectory", "expert_by")
                   .order_by("item__position", "item_id", "attempt"))
    return {"evaluation": evaluation, "scores": scores, "dimension_rows": rows,
            "dimension_chart": dimension_chart(rows) if rows else None, "results": results,
            "live": evaluation.status in LIVE, "stoppable": evaluation.status in STOPPABLE,
            "rejudgeable": evaluation.status in REJUDGEABLE and any(r.judge_verdict for r in results),
            "not_scored": sorted((scores.get("not_scored") or {}).items()),
            "poll": "every 5s" if evaluation.status == EvalRun.Status.PAUSED else "every 2s"}


@role_required(MANAGER)
def eval_run_list(request):
    runs = (EvalRun.objects.select_related("benchmark", "model_version", "created_by")
            .annotate(splits=Count("results", filter=Q(results__state=EvalResult.State.SPLIT,
                                                       results__superseded=False))).order_by("-created_at")[:100])
    return render(request, "benchmark/runs.html", {"runs": runs,
                                                   "frozen": Benchmark.objects.filter(frozen=True).exists()})


@role_required(MANAGER)
def eval_run_detail(request, eval_run_id):
    evaluation = get_object_or_404(EvalRun.objects.select_related("benchmark", "model_version", "created_by"),
                                   pk=eval_run_id)
    context = run_context(evaluation)
    return render_live(request, "benchmark/run_detail.html", context, live=context["live"],
                       panel="benchmark/_run_live.html")


@role_required(MANAGER)
@require_POST
def eval_run_cancel(request, eval_run_id):
    evaluation = get_object_or_404(EvalRun, pk=eval_run_id)
    if evaluation.status not in STOPPABLE:
        messages.error(request, f"Not cancelled: the run is {evaluation.get_status_display().lower()}.")
    else:
        cancel_evaluation(evaluation)
        messages.info(request, f"{evaluation} cancelled: phones finish their current step and stop; "
                               "what was scored so far stays.")
    return redirect("eval-run-detail", eval_run_id=evaluation.pk)


@role_required(MANAGER)
@require_POST
def eval_run_resume(request, eval_run_id):
    evaluation = get_object_or_404(EvalRun, pk=eval_run_id)
    refused = resume_evaluation(evaluation)
    if refused:
        messages.error(request, f"Not resumed: {refused}.")
    else:
        messages.success(request, f"{evaluation} resumed: its queued rollouts go to the phones again.")
    return redirect("eval-run-detail", eval_run_id=evaluation.pk)


@role_required(MANAGER)
@require_POST
def eval_run_rejudge(request, eval_run_id):
    """Judge the run again from its stored rollouts (today's judges), in the benchmark worker."""
    evaluation = get_object_or_404(EvalRun, pk=eval_run_id)
    if evaluation.status not in REJUDGEABLE:
        messages.error(request, f"Not re-judged: the run is {evaluation.get_status_display().lower()}; "
                                "re-judge it once it has finished, was paused or cancelled.")
        return redirect("eval-run-detail", eval_run_id=evaluation.pk)
    from benchmark.tasks import rejudge

    transaction.on_commit(lambda: rejudge.delay(evaluation.pk))
    messages.success(request, f"Re-judging {evaluation} (round {evaluation.judge_round + 1}) in the background "
                              "from its stored rollouts; expert verdicts already given are kept.")
    return redirect("eval-run-detail", eval_run_id=evaluation.pk)


def _download(content, content_type, filename):
    """An export as a download: text or bytes at once, or an iterable of chunks streamed."""
    if isinstance(content, str | bytes):
        response = HttpResponse(content, content_type=content_type)
    else:
        response = StreamingHttpResponse((c.encode() if isinstance(c, str) else c for c in content),
                                         content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@role_required(MANAGER)
def eval_run_results_export(request, eval_run_id):
    evaluation = get_object_or_404(EvalRun, pk=eval_run_id)
    return _download(results_jsonl(evaluation), "application/x-ndjson; charset=utf-8",
                     f"eval-{evaluation.pk}-results.jsonl")


@role_required(MANAGER)
def eval_run_summary_export(request, eval_run_id):
    evaluation = get_object_or_404(EvalRun, pk=eval_run_id)
    return _download(androidworld_summary(evaluation), "text/csv; charset=utf-8", f"eval-{evaluation.pk}-summary.csv")


# ---- the experts' queue of split verdicts ----

def waiting_for_experts():
    return (EvalResult.objects.filter(state=EvalResult.State.SPLIT, superseded=False)
            .select_related("item__query", "eval_run__benchmark", "eval_run__model_version", "trajectory")
            .order_by("eval_run__created_at", "eval_run_id", "item__position", "pk"))


@role_required(ADJUDICATOR, MANAGER)
def expert_queue(request):
    """Results the judges split on, across runs; `?result=` picks the one in front (default: the first)."""
    results = list(waiting_for_experts()[:500])
    chosen = row_id(request.GET.get("result", ""))
    index = next((i for i, r in enumerate(results) if r.pk == chosen), 0)
    current = results[index] if results else None
    in_review = (Benchmark.objects.filter(frozen=False).annotate(
        pending=Count("items", filter=Q(items__review=BenchmarkItem.Review.PENDING))).filter(pending__gt=0)
        .order_by("name", "version"))
    return render(request, "benchmark/expert_queue.html", {
        "results": results, "current": current, "index": index + 1,
        "previous": results[index - 1] if current and index > 0 else None,
        "next": results[index + 1] if current and index + 1 < len(results) else None,
        "in_review": in_review, "sees_runs": has_role(request.user, MANAGER)})


@role_required(ADJUDICATOR, MANAGER)
@require_POST
def expert_verdict(request, result_id):
    result = get_object_or_404(EvalResult, pk=result_id)
    outcome = request.POST.get("outcome", "")
    try:
        record_expert_verdict(result, outcome, request.user, note=request.POST.get("note", "").strip())
    except ValueError as error:
        messages.error(request, f"Not recorded: {error}.")
        return redirect(f"{reverse('benchmark-expert-queue')}?result={result.pk}")
    sr = (EvalRun.objects.filter(pk=result.eval_run_id).values_list("scores", flat=True).first() or {}).get("sr")
    messages.success(request, f"Result #{result.pk} scored {outcome} by you; eval #{result.eval_run_id} now has SR "
                              f"{'–' if sr is None else f'{sr:.1%}'}.")
    return redirect("benchmark-expert-queue")
