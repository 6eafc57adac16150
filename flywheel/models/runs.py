"""Model versions (the policies that act) and collection runs (the work that uses them)."""
from django.conf import settings
from django.db import models
from django.db.models import CharField, Exists, OuterRef, Value
from django.db.models.functions import Cast, Concat

from devices.models import WorkItem
from flywheel.endpoints.url_safety import validate_endpoint_url
from flywheel.models.exploration import RunStatus
from flywheel.models.trajectories import Line


class ModelVersionQuerySet(models.QuerySet):
    def policies(self):
        """The versions a line, a loop or the benchmark may be offered as the policy that acts."""
        return self.exclude(kind__in=ModelVersion.NOT_POLICIES)


class ModelVersion(models.Model):
    """A policy/judge/Teacher model and how it is served.

    It lives in the data engine, not in `training`, because trajectories and votes reference it and
    imports flow devices ← flywheel ← training; training runs produce rows of this table.
    """

    class Kind(models.TextChoices):
        OFFLINE = "offline", "Built-in offline"
        ENDPOINT = "endpoint", "OpenAI-compatible endpoint"
        # A trained checkpoint not served yet: its page gives the vLLM recipe; once its endpoint is
        # registered it becomes an endpoint version every line and the benchmark can use.
        CHECKPOINT = "checkpoint", "Trained checkpoint (not served)"
        # A compact candidate-ranking head (issue #16): served in-process from its artifact directory.
        COMPACT = "compact", "Compact ranking policy (in-process)"
        # A step-level reward model (issue #39): rates a trajectory's steps (eq. 4), never acts.
        REWARD_MODEL = "reward_model", "Step reward model (in-process)"

    NOT_POLICIES = (Kind.REWARD_MODEL,)

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=16, choices=Kind, default=Kind.OFFLINE)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="children")
    # Not a URLField: its validator refuses single-label hosts (http://gpu-host:8000/v1); this one
    # checks the scheme and every address the host resolves to (flywheel/endpoints/url_safety.py).
    endpoint_url = models.CharField(max_length=200, blank=True, validators=[validate_endpoint_url])
    served_model_name = models.CharField(max_length=200, blank=True)
    sampling = models.JSONField(default=dict, blank=True, help_text="pinned sampling config")
    artifact = models.CharField(max_length=400, blank=True,
                                help_text="the checkpoint directory a training run wrote")
    health = models.JSONField(default=dict, blank=True,
                              help_text="last endpoint health check: ok, models, latency_ms, error")
    health_checked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ModelVersionQuerySet.as_manager()

    def __str__(self):
        return self.name

    @property
    def is_policy(self) -> bool:
        return self.kind not in self.NOT_POLICIES


WORK_KIND_PREFIX = "collect:run:"  # a run's work items are of kind "collect:run:<run id>"


def _has_open_work():
    """A subquery: the run (OuterRef) has queued or assigned work items."""
    kind = Concat(Value(WORK_KIND_PREFIX), Cast(OuterRef("pk"), output_field=CharField()))
    return Exists(WorkItem.objects.filter(kind=kind).open())


class CollectionRunQuerySet(models.QuerySet):
    def with_open_work(self):
        """Runs with work still queued or assigned."""
        return self.filter(_has_open_work())

    def without_open_work(self):
        return self.exclude(_has_open_work())


class CollectionRun(models.Model):
    """One launch of a collection line over a set of queries (§2.3)."""

    Status = RunStatus  # the same lifecycle as exploration and generation runs

    line = models.CharField(max_length=16, choices=Line)
    model_version = models.ForeignKey(ModelVersion, null=True, blank=True, on_delete=models.PROTECT)
    query_filter = models.JSONField(default=dict, blank=True)
    config = models.JSONField(default=dict, blank=True,
                              help_text="phones, repeats, anomaly rates, stop conditions")
    status = models.CharField(max_length=10, choices=Status, default="queued", db_index=True)
    total = models.PositiveIntegerField(default=0)
    completed = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL)
    celery_task_id = models.CharField(max_length=64, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True,
                                         help_text="last time its work was sent to the host queues")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = CollectionRunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.get_line_display()} run #{self.pk}"

    @property
    def work_kind(self) -> str:
        """The kind of this run's work items (devices.WorkItem): one kind per run."""
        return f"{WORK_KIND_PREFIX}{self.pk}"

    def work_items(self):
        """This run's work items (`.open()`: those queued or assigned)."""
        return WorkItem.objects.filter(kind=self.work_kind)

    @property
    def progress_percent(self):
        return round(100 * self.completed / self.total) if self.total else 0
