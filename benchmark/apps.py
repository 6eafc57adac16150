from django.apps import AppConfig


class BenchmarkConfig(AppConfig):
    name = "benchmark"
    default_auto_field = "django.db.models.BigAutoField"
