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
