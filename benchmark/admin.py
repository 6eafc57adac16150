from django.contrib import admin

from benchmark.models import Benchmark, EvalRun

admin.site.register(Benchmark)
admin.site.register(EvalRun)
