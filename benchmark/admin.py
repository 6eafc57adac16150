"""Read-only admin views: versions, items, runs and results change only through their workflows
(benchmark/versions.py, infer.py, judges.py), from the pages, the API and the commands."""
from django.contrib import admin

from accounts.read_only_admin import ReadOnlyAdmin
from benchmark.models import Benchmark, BenchmarkItem, EvalResult, EvalRun


@admin.register(Benchmark)
class BenchmarkAdmin(ReadOnlyAdmin):
    list_display = ["name", "version", "status", "origin", "parent", "frozen_at"]
    list_filter = ["status", "origin"]


@admin.register(BenchmarkItem)
class BenchmarkItemAdmin(ReadOnlyAdmin):
    list_display = ["benchmark", "query", "split", "executable", "expected_interaction", "review"]
    list_filter = ["split", "executable", "review", "expected_interaction"]


@admin.register(EvalRun)
class EvalRunAdmin(ReadOnlyAdmin):
    list_display = ["id", "benchmark", "model_version", "split", "status", "completed", "total", "created_at"]
    list_filter = ["status"]


@admin.register(EvalResult)
class EvalResultAdmin(ReadOnlyAdmin):
    list_display = ["id", "eval_run", "item", "attempt", "state", "outcome", "expert_outcome"]
    list_filter = ["state", "outcome"]
