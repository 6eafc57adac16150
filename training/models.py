"""Training runs over the pools; each produces a flywheel.ModelVersion."""
from django.conf import settings
from django.db import models


class TrainingRun(models.Model):
    STAGES = [("cpt", "Continual pre-training"), ("sft", "Supervised fine-tuning"), ("rl", "Agentic RL")]
    STATUSES = [("queued", "Queued"), ("running", "Running"), ("done", "Done"), ("failed", "Failed"),
                ("cancelled", "Cancelled")]
    stage = models.CharField(max_length=3, choices=STAGES)
    base_model = models.ForeignKey("flywheel.ModelVersion", null=True, blank=True,
                                   on_delete=models.PROTECT, related_name="training_runs_from")
    produced_model = models.ForeignKey("flywheel.ModelVersion", null=True, blank=True,
                                       on_delete=models.SET_NULL, related_name="produced_by")
    config = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=STATUSES, default="queued")
    progress = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"{self.get_stage_display()} run #{self.pk}"
