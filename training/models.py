"""Pool snapshots exported for training, and the training runs over them.

A run produces a flywheel.ModelVersion (its lineage M(t) -> M(t+1) is the run: base model, data
snapshot, config, metrics). Rows here are written only by training/snapshots.py and
training/runs.py, from pages, API and Celery alike.
"""
from django.conf import settings
from django.db import models


class DataSnapshot(models.Model):
    """An export of a pool at one moment: the exact rows, their hashes, the files a trainer reads."""

    class Kind(models.TextChoices):
        CPT = "cpt", "CPT single-step samples"
        SFT = "sft", "SFT trajectories"
        RL = "rl", "RL queries"

    class Status(models.TextChoices):
        BUILDING = "building", "Building"
        READY = "ready", "Ready"
        EMPTY = "empty", "Empty (nothing to export)"
        FAILED = "failed", "Failed"

    kind = models.CharField(max_length=3, choices=Kind)
    name = models.CharField(max_length=200, blank=True)
    config = models.JSONField(default=dict, blank=True,
                              help_text="sources and mixture ratios, screenshots K, seed")
    status = models.CharField(max_length=10, choices=Status, default="building", db_index=True)
    directory = models.CharField(max_length=400, blank=True, help_text="where the files are")
    row_ids = models.JSONField(default=list, blank=True,
                               help_text="the pool rows exported (CptEntry, SftEntry or RlQueryEntry ids)")
    row_count = models.PositiveIntegerField(default=0, help_text="samples written (a trajectory gives several)")
    content_hash = models.CharField(max_length=64, blank=True, db_index=True,
                                    help_text="sha256 over every sample and image, in order")
    stats = models.JSONField(default=dict, blank=True, help_text="samples per source, skipped rows and why")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return self.name or f"{self.get_kind_display()} snapshot #{self.pk}"


class TrainingRun(models.Model):
    class Stage(models.TextChoices):
        CPT = "cpt", "Continual pre-training"
        SFT = "sft", "Supervised fine-tuning"
        RL = "rl", "Agentic RL"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    ACTIVE = ("queued", "running")

    stage = models.CharField(max_length=3, choices=Stage)
    base_model = models.ForeignKey("flywheel.ModelVersion", null=True, blank=True,
                                   on_delete=models.PROTECT, related_name="training_runs_from")
    produced_model = models.ForeignKey("flywheel.ModelVersion", null=True, blank=True,
                                       on_delete=models.SET_NULL, related_name="produced_by")
    snapshot = models.ForeignKey(DataSnapshot, null=True, blank=True, on_delete=models.PROTECT,
                                 related_name="training_runs")
    config = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=Status, default="queued", db_index=True)
    progress = models.JSONField(default=dict, blank=True, help_text="step, total steps, epoch, last loss")
    metrics = models.JSONField(default=list, blank=True, help_text="the loss curve: {step, loss, lr, ...}")
    directory = models.CharField(max_length=400, blank=True, help_text="checkpoints and logs")
    checkpoint = models.CharField(max_length=400, blank=True, help_text="the last checkpoint written")
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    attempts = models.PositiveIntegerField(default=0, help_text="launches, resumes included")
    celery_task_id = models.CharField(max_length=64, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return f"{self.get_stage_display()} run #{self.pk}"

    @property
    def progress_percent(self):
        total = (self.progress or {}).get("total_steps") or 0
        return round(100 * min((self.progress or {}).get("step", 0), total) / total) if total else 0


class Serving(models.Model):
    """One checkpoint version served by a model host (training/model_host/): who serves it, where, and
    how it went. One row per version: claiming it (select_for_update) is what keeps two hosts apart."""

    class State(models.TextChoices):
        CLAIMED = "claimed", "Claimed by a model host"
        STARTING = "starting", "Starting its server"
        SERVING = "serving", "Serving"
        FAILED = "failed", "Failed (the checkpoint cannot be served)"
        STOPPED = "stopped", "Stopped (not in use)"

    ACTIVE = ("claimed", "starting", "serving")

    class Engine(models.TextChoices):
        VLLM = "vllm", "vLLM"
        BUILTIN = "builtin", "Built-in server (transformers)"

    version = models.OneToOneField("flywheel.ModelVersion", on_delete=models.CASCADE, related_name="serving")
    state = models.CharField(max_length=10, choices=State, default="claimed", db_index=True)
    host = models.CharField(max_length=100, blank=True, help_text="the model host that claimed it")
    engine = models.CharField(max_length=10, choices=Engine, blank=True)
    port = models.PositiveIntegerField(null=True, blank=True)
    pid = models.PositiveIntegerField(null=True, blank=True)
    log_path = models.CharField(max_length=400, blank=True)
    error = models.TextField(blank=True, help_text="why the checkpoint could not be served (the loader's words)")
    restarts = models.PositiveIntegerField(default=0, help_text="times its server died and was started again")
    restart_at = models.DateTimeField(null=True, blank=True, help_text="when a server that died starts again")
    wanted_until = models.DateTimeField(null=True, blank=True,
                                        help_text="someone asked for it on its page: served until then, used or not")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="its host's last sign of life")
    claimed_at = models.DateTimeField(null=True, blank=True)
    serving_since = models.DateTimeField(null=True, blank=True)
    first_served_at = models.DateTimeField(null=True, blank=True,
                                           help_text="when its endpoint first answered (checkpoint saved → served)")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"{self.version} · {self.get_state_display()}"
