"""Training runs over the pools; each produces a flywheel.ModelVersion."""
from django.conf import settings
from django.db import models


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

    stage = models.CharField(max_length=3, choices=Stage)
    base_model = models.ForeignKey("flywheel.ModelVersion", null=True, blank=True,
                                   on_delete=models.PROTECT, related_name="training_runs_from")
    produced_model = models.ForeignKey("flywheel.ModelVersion", null=True, blank=True,
                                       on_delete=models.SET_NULL, related_name="produced_by")
    config = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=Status, default="queued")
    progress = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"{self.get_stage_display()} run #{self.pk}"
