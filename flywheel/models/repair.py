"""The repair side of the loop (§2.5): failure classes, verifier-rule flags, calibration rounds and
the self-evolution loop's runs and rounds."""
from django.conf import settings
from django.db import models

from flywheel.models.exploration import RunStatus


class FailureClass(models.Model):
    """A recurring class of model failures (§2.5.2 counterfactual derivation): attribution level
    and cause, with the capability dimension it points to. Trajectories join it through their
    attribution; once it recurs across enough queries its features are induced and adversarial
    queries are derived from it (into the RL pool and query generation)."""

    class Status(models.TextChoices):
        WATCHING = "watching", "Watching (not recurring yet)"
        RECURRING = "recurring", "Recurring"
        DERIVED = "derived", "Adversarial queries derived"

    key = models.CharField(max_length=120, unique=True, help_text="level:cause:capability")
    level = models.PositiveSmallIntegerField(default=3)
    cause = models.CharField(max_length=60)
    capability = models.CharField(max_length=40, blank=True)
    label = models.CharField(max_length=200, blank=True, help_text="the class in words")
    features = models.JSONField(default=dict, blank=True,
                                help_text="induced: triggering scenarios, target flows, missing intuition")
    centroid = models.JSONField(null=True, blank=True, help_text="mean text embedding of the failure features")
    trajectory_count = models.PositiveIntegerField(default=0)
    query_count = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=10, choices=Status, default="watching", db_index=True)
    derived_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-trajectory_count", "key"]
        verbose_name_plural = "failure classes"

    def __str__(self):
        return self.label or self.key


class RuleFlag(models.Model):
    """A verification-rule defect (§2.5.1 Level 2): a rule that failed a correctly completed
    trajectory. The rule is fixed (the query's verification spec), then the trajectory re-enters
    evaluation."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        FIXED = "fixed", "Fixed, re-evaluated"
        DISMISSED = "dismissed", "Dismissed (the rule was right)"

    query = models.ForeignKey("flywheel.Query", on_delete=models.CASCADE, related_name="rule_flags")
    trajectory = models.ForeignKey("flywheel.Trajectory", on_delete=models.CASCADE, related_name="rule_flags")
    system = models.CharField(max_length=1, help_text="the system whose rule failed it (A, B or C)")
    rule = models.JSONField(default=dict, blank=True, help_text="the failing check, as written in the spec")
    reason = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status, default="open", db_index=True)
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    resolved_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"rule flag on {self.query_id} (system {self.system}, {self.status})"


class CalibrationRound(models.Model):
    """One retroactive calibration of the evaluation systems by adjudicators' decisions (§2.4.2):
    the rule thresholds chosen, the judge prompts' examples, and how agreement and the consensus
    rate moved."""

    number = models.PositiveIntegerField(unique=True)
    adjudications_used = models.PositiveIntegerField(default=0)
    thresholds = models.JSONField(default=dict, blank=True, help_text="per system: parameter → value")
    examples = models.JSONField(default=list, blank=True, help_text="adjudicated cases for the judge prompts")
    agreement_before = models.JSONField(default=dict, blank=True)
    agreement_after = models.JSONField(default=dict, blank=True)
    consensus_rate = models.FloatField(null=True, blank=True,
                                       help_text="share of verdicts not Undetermined since the previous round")
    verdicts_counted = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-number"]

    def __str__(self):
        return f"calibration round {self.number}"


class EvolutionLoop(models.Model):
    """The self-evolution loop (§2.5): rounds of rollout → HTSC + attribution → ECDM → training →
    re-rollout, over the RL query pool."""

    Status = RunStatus

    name = models.CharField(max_length=200)
    model_version = models.ForeignKey("flywheel.ModelVersion", null=True, blank=True, on_delete=models.PROTECT,
                                      help_text="the current model M(t)")
    config = models.JSONField(default=dict, blank=True, help_text="rounds, group size G, queries, phones")
    status = models.CharField(max_length=10, choices=Status, default="queued", db_index=True)
    state = models.CharField(max_length=300, blank=True, help_text="what the loop is doing or waiting for")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name or f"loop #{self.pk}"


class LoopRound(models.Model):
    class Stage(models.TextChoices):
        ROLLOUT = "rollout", "Rollout of M(t) on the RL pool"
        JUDGING = "judging", "HTSC + attribution"
        ECDM = "ecdm", "ECDM repair"
        TRAINING = "training", "Training"
        AWAITING_TRAINING = "awaiting_training", "Stopped before training (no training available)"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    loop = models.ForeignKey(EvolutionLoop, on_delete=models.CASCADE, related_name="rounds")
    number = models.PositiveIntegerField()
    model_version = models.ForeignKey("flywheel.ModelVersion", null=True, blank=True, on_delete=models.PROTECT)
    rollout_run = models.ForeignKey("flywheel.CollectionRun", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="loop_rounds")
    stage = models.CharField(max_length=20, choices=Stage, default="rollout")
    detail = models.CharField(max_length=300, blank=True)
    pool_sizes = models.JSONField(default=dict, blank=True, help_text="sft, cpt, rl live at the round's end")
    stats = models.JSONField(default=dict, blank=True, help_text="failed, salvaged by path, salvage yield")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["loop", "number"]
        constraints = [models.UniqueConstraint(fields=["loop", "number"], name="unique_loop_round")]

    def __str__(self):
        return f"round {self.number} of {self.loop}"
