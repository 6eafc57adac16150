"""Benchmark versions and evaluation runs (§4)."""
from django.conf import settings
from django.db import models


class Benchmark(models.Model):
    name = models.CharField(max_length=200)
    version = models.CharField(max_length=40)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="children")
    quota_table = models.JSONField(default=dict, blank=True,
                                   help_text="quotas over scenario, complexity, interaction/risk")
    queries = models.ManyToManyField("flywheel.Query", related_name="benchmarks", blank=True)
    frozen = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="unique_benchmark_version")]

    def __str__(self):
        return f"{self.name} {self.version}"


class EvalRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    benchmark = models.ForeignKey(Benchmark, on_delete=models.PROTECT, related_name="eval_runs")
    model_version = models.ForeignKey("flywheel.ModelVersion", on_delete=models.PROTECT,
                                      related_name="eval_runs")
    config = models.JSONField(default=dict, blank=True, help_text="pinned evaluation config")
    status = models.CharField(max_length=10, choices=Status, default="queued")
    trajectories = models.ManyToManyField("flywheel.Trajectory", related_name="eval_runs", blank=True)
    scores = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"eval #{self.pk} of {self.model_version} on {self.benchmark}"
