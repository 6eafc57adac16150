"""Benchmark versions, their reviewed items, evaluation runs and per-query results (report §4).

A frozen version is immutable: its row, its items and their snapshots refuse every change
(`FrozenBenchmark`), so a score always refers to exactly one set of queries and labels.
"""
import hashlib
import json

from django.conf import settings
from django.db import models


class FrozenBenchmark(Exception):
    """A frozen benchmark version (or one of its items) may not change; derive a new version."""


class Benchmark(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        REVIEW = "review", "In expert review"
        FROZEN = "frozen", "Frozen"

    class Origin(models.TextChoices):
        MANUAL = "manual", "Made by hand"
        GENERATED = "generated", "Generated against its quota"
        IMPORTED = "imported", "Imported (JSONL)"
        FARM = "farm", "The farm's task set"
        DERIVED = "derived", "Derived from a parent by quota shifts"

    name = models.CharField(max_length=200)
    version = models.CharField(max_length=40)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="children")
    purpose = models.TextField(blank=True)
    origin = models.CharField(max_length=10, choices=Origin, default="manual")
    quota_table = models.JSONField(default=dict, blank=True,
                                   help_text="target shares over Table 4's dimensions, must-include rules, app cap")
    evolution = models.JSONField(default=dict, blank=True,
                                 help_text="the stated shifts from the parent and the diff they produced")
    queries = models.ManyToManyField("flywheel.Query", related_name="benchmarks", blank=True,
                                     through="BenchmarkItem")
    status = models.CharField(max_length=8, choices=Status, default="draft", db_index=True)
    frozen = models.BooleanField(default=False)
    frozen_at = models.DateTimeField(null=True, blank=True)
    frozen_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="frozen_benchmarks")
    content_hash = models.CharField(max_length=64, blank=True, help_text="sha256 over the frozen items")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="benchmarks")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-created_at"]
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="unique_benchmark_version")]

    def __str__(self):
        return f"{self.name} {self.version}"

    def save(self, *args, **kwargs):
        if self.pk and Benchmark.objects.filter(pk=self.pk, frozen=True).exists():
            raise FrozenBenchmark(f"{self} is frozen; derive a new version to change it")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if self.frozen or self.eval_runs.exists():
            raise FrozenBenchmark(f"{self} is frozen or has evaluation runs; it is kept")
        return super().delete(*args, **kwargs)


class Split(models.TextChoices):
    OPEN = "open", "Open (also collectable)"
    HELD_OUT = "held_out", "Held out (evaluation only)"


class Interaction(models.TextChoices):
    EXECUTE = "execute", "Carry it out"
    CLARIFY = "clarify", "Ask a clarifying question"
    CALL_USER = "call_user", "Hand over to the user (call_user)"
    REFUSE = "refuse", "Refuse"


class BenchmarkItem(models.Model):
    class Review(models.TextChoices):
        PENDING = "pending", "Not reviewed"
        APPROVED = "approved", "Approved"
        RETIRED = "retired", "Retired from this version"

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="items")
    query = models.ForeignKey("flywheel.Query", on_delete=models.PROTECT, related_name="benchmark_items")
    position = models.PositiveIntegerField(default=0)
    split = models.CharField(max_length=8, choices=Split, default="open", db_index=True)
    external_id = models.CharField(max_length=100, blank=True, help_text="the task id in an imported file")
    executable = models.BooleanField(default=True)
    not_executable_reason = models.CharField(max_length=300, blank=True)
    labels = models.JSONField(default=dict, blank=True, help_text="one value per Table 4 dimension")
    environment = models.JSONField(default=dict, blank=True,
                                   help_text="preconditions [{text, holds: once|per_run}], reset notes")
    expected_interaction = models.CharField(max_length=10, choices=Interaction, default="execute")
    interaction_points = models.JSONField(default=list, blank=True,
                                          help_text="where the model must ask or hand over, in words")
    review = models.CharField(max_length=8, choices=Review, default="pending", db_index=True)
    review_note = models.TextField(blank=True)
    reviewed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="reviewed_benchmark_items")
    reviewed_at = models.DateTimeField(null=True, blank=True)
    snapshot = models.JSONField(default=dict, blank=True, help_text="what was frozen: text, labels, checks")

    class Meta:
        ordering = ["benchmark", "position", "pk"]
        constraints = [models.UniqueConstraint(fields=["benchmark", "query"], name="unique_benchmark_query")]

    def __str__(self):
        return f"{self.benchmark} · {self.query.key}"

    def save(self, *args, **kwargs):
        if self._frozen():
            raise FrozenBenchmark(f"{self.benchmark} is frozen; its items do not change")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if self._frozen():
            raise FrozenBenchmark(f"{self.benchmark} is frozen; its items do not change")
        return super().delete(*args, **kwargs)

    def _frozen(self):
        return Benchmark.objects.filter(pk=self.benchmark_id, frozen=True).exists()

    def frozen_snapshot(self) -> dict:
        query = self.query
        body = {"key": query.key, "text": query.text, "labels": self.labels, "environment": self.environment,
                "expected_interaction": self.expected_interaction, "interaction_points": self.interaction_points,
                "verification": query.verification, "reset": query.reset, "split": self.split,
                "executable": self.executable}
        body["sha256"] = hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
        return body


class EvalRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        PAUSED = "paused", "Paused"
        JUDGING = "judging", "Judging"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    benchmark = models.ForeignKey(Benchmark, on_delete=models.PROTECT, related_name="eval_runs")
    model_version = models.ForeignKey("flywheel.ModelVersion", on_delete=models.PROTECT,
                                      related_name="eval_runs")
    split = models.CharField(max_length=8, default="all", help_text="all, open or held_out")
    config = models.JSONField(default=dict, blank=True, help_text="the full pinned evaluation config")
    status = models.CharField(max_length=10, choices=Status, default="queued", db_index=True)
    status_reason = models.CharField(max_length=300, blank=True)
    collection_run = models.OneToOneField("flywheel.CollectionRun", null=True, blank=True,
                                          on_delete=models.SET_NULL, related_name="eval_run")
    trajectories = models.ManyToManyField("flywheel.Trajectory", related_name="eval_runs", blank=True)
    total = models.PositiveIntegerField(default=0)
    completed = models.PositiveIntegerField(default=0)
    scores = models.JSONField(default=dict, blank=True)
    judge_round = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"eval #{self.pk} of {self.model_version} on {self.benchmark}"

    @property
    def progress_percent(self):
        return round(100 * self.completed / self.total) if self.total else 0


class EvalResult(models.Model):
    """One trajectory of one benchmark item in one run, its judges' votes and its score."""

    class State(models.TextChoices):
        RUNNING = "running", "Inference running"
        SCORED = "scored", "Scored"
        SPLIT = "split", "Judges split: waiting for an expert"
        EXPERT = "expert", "Scored by an expert"
        NOT_SCORED = "not_scored", "Not scored"

    eval_run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="results")
    item = models.ForeignKey(BenchmarkItem, on_delete=models.PROTECT, related_name="results")
    trajectory = models.OneToOneField("flywheel.Trajectory", null=True, blank=True, on_delete=models.PROTECT,
                                      related_name="eval_result")
    attempt = models.PositiveSmallIntegerField(default=1)
    superseded = models.BooleanField(default=False, help_text="a re-collection replaced it")
    state = models.CharField(max_length=10, choices=State, default="running", db_index=True)
    not_scored_reason = models.CharField(max_length=300, blank=True)
    evidence = models.JSONField(default=dict, blank=True,
                                help_text="terminal readings taken at the end of inference, stop reason, actions")
    votes = models.JSONField(default=list, blank=True, help_text="[{judge, version, vote, rationale}]")
    judge_verdict = models.CharField(max_length=10, blank=True)
    outcome = models.CharField(max_length=8, blank=True, help_text="success or failure once scored")
    outcome_reason = models.CharField(max_length=300, blank=True)
    partial_credit = models.FloatField(null=True, blank=True)
    judge_round = models.PositiveIntegerField(default=0)
    judged_at = models.DateTimeField(null=True, blank=True)
    expert_outcome = models.CharField(max_length=8, blank=True)
    expert_note = models.TextField(blank=True)
    expert_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="benchmark_verdicts")
    expert_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["eval_run", "item__position", "attempt"]

    def __str__(self):
        return f"result #{self.pk} ({self.state}) of {self.item}"

    @property
    def final_outcome(self):
        return self.expert_outcome or self.outcome
