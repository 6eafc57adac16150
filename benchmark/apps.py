from django.apps import AppConfig


class BenchmarkConfig(AppConfig):
    name = "benchmark"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Benchmark-line rollouts are scored here, never routed by HTSC into a pool.
        from benchmark.infer import record_benchmark_rollout
        from flywheel.collection.engine import FINISHERS
        from flywheel.models import Line

        FINISHERS[Line.BENCHMARK] = record_benchmark_rollout
        from flywheel.signals import run_progressed

        run_progressed.connect(_count_evaluation, dispatch_uid="benchmark-count-evaluation")
        _track_decisions()


def _track_decisions():
    """Versions made and frozen, experts' reviews of items and their verdicts on split results, in the
    one history (accounts/history.py); a freeze and a verdict are queryset updates that record themselves."""
    from django.urls import reverse

    from accounts import history
    from benchmark.models import Benchmark, BenchmarkItem, EvalResult

    history.track(Benchmark, ["name", "version", "parent", "status", "frozen", "frozen_by", "content_hash",
                              "created_by"])
    history.track(BenchmarkItem, ["split", "review", "review_note", "reviewed_by", "labels", "environment",
                                  "expected_interaction", "interaction_points"], about="benchmark", on_create=False)
    history.track(EvalResult, ["expert_outcome", "expert_note", "expert_by"], about="trajectory", on_create=False)
    history.link(Benchmark, lambda pks: {pk: reverse("benchmark-detail", args=[pk]) for pk in pks})
    history.link(EvalResult, lambda pks: {
        pk: reverse("eval-run-detail", args=[run]) for pk, run in
        EvalResult.objects.filter(pk__in=pks).values_list("pk", "eval_run_id")})


def _count_evaluation(sender, run_id, line, **kwargs):
    from benchmark.infer import refresh_evaluation
    from benchmark.models import EvalRun

    evaluation_id = EvalRun.objects.filter(collection_run_id=run_id).values_list("pk", flat=True).first()
    if evaluation_id is not None:
        refresh_evaluation(evaluation_id)
