"""Runs that fill the query side of the loop: app exploration (§2.2.5) and query generation (§2.2)."""
from django.conf import settings
from django.db import models


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    PAUSED = "paused", "Paused"     # its work stays queued; resuming dispatches it again
    DONE = "done", "Done"
    CANCELLED = "cancelled", "Cancelled"
    FAILED = "failed", "Failed"


class ExplorationRun(models.Model):
    """Non-destructive walkthroughs of apps on leased idle phones, writing GEM pages and edges.

    `frontier` is the resumable state (per app: pages still to expand and the path to each), so a
    run interrupted by a dead worker continues where it stopped instead of starting over.
    """

    apps = models.JSONField(default=list, help_text="packages to explore")
    config = models.JSONField(default=dict, blank=True,
                              help_text="max_depth, max_pages, max_seconds, phones")
    status = models.CharField(max_length=10, choices=RunStatus, default="queued", db_index=True)
    pages_found = models.PositiveIntegerField(default=0)
    actions_taken = models.PositiveIntegerField(default=0)
    progress = models.JSONField(default=dict, blank=True, help_text="per app: pages, edges, frontier size")
    frontier = models.JSONField(default=dict, blank=True)
    report = models.JSONField(default=dict, blank=True,
                              help_text="per app: pages, merged duplicates, thresholds used, backed-out actions")
    problems = models.JSONField(default=list, blank=True,
                                help_text="what went wrong and was skipped: {at, app, kind, detail}")
    celery_task_id = models.CharField(max_length=64, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"exploration run #{self.pk}"


class GenerationRun(models.Model):
    """Query generation over function-tree leaves and GEM paths, then intake gates 1–3."""

    config = models.JSONField(default=dict, blank=True,
                              help_text="apps, tiers, personas, capabilities, per_leaf, cross_app, seed")
    model_version = models.ForeignKey("flywheel.ModelVersion", null=True, blank=True,
                                      on_delete=models.PROTECT,
                                      help_text="the endpoint model that writes the drafts; none: offline")
    # Gate 1's judge (§2.2.6 "an independent LLM judge"): never the writer's endpoint; none: the rules judge.
    judge_version = models.ForeignKey("flywheel.ModelVersion", null=True, blank=True, on_delete=models.PROTECT,
                                      related_name="+", help_text="the endpoint model that judges gate 1")
    status = models.CharField(max_length=10, choices=RunStatus, default="queued", db_index=True)
    total = models.PositiveIntegerField(default=0)
    generated = models.PositiveIntegerField(default=0)
    passed = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)
    report = models.JSONField(default=dict, blank=True, help_text="rejections per gate and reason, timings")
    problems = models.JSONField(default=list, blank=True)
    celery_task_id = models.CharField(max_length=64, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"generation run #{self.pk}"
