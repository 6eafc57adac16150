"""A flywheel demo run: the compact policy trained round over round, measured on held-out tasks.

Written only by flywheel_demo/orchestrator.py (one transaction per stage move, the row locked).
"""
from django.conf import settings
from django.db import models


class DemoRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    LIVE = ("queued", "running")

    status = models.CharField(max_length=10, choices=Status, default="queued", db_index=True)
    stage = models.CharField(max_length=40, default="setup",
                             help_text="where the run stands: setup, round0, collect, round1, loop, ablation, report")
    config = models.JSONField(default=dict, blank=True, help_text="phones, steps, loop rounds, epochs, seed")
    state = models.JSONField(default=dict, blank=True,
                             help_text="the ids the run made: benchmark, models and evaluations per round, runs, loop")
    report = models.JSONField(default=dict, blank=True, help_text="SR per round, salvage yield, pool sizes, ablation")
    detail = models.CharField(max_length=300, blank=True, help_text="what the run waits for, in words")
    report_path = models.CharField(max_length=400, blank=True, help_text="the report file this run wrote")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return f"flywheel demo #{self.pk}"
