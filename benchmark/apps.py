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


def _count_evaluation(sender, run_id, line, **kwargs):
    from benchmark.infer import refresh_evaluation
    from benchmark.models import EvalRun

    evaluation_id = EvalRun.objects.filter(collection_run_id=run_id).values_list("pk", flat=True).first()
    if evaluation_id is not None:
        refresh_evaluation(evaluation_id)
