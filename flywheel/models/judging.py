"""Votes, verdicts, human adjudication, failure attribution and repairs (§2.4, §2.5)."""
from django.conf import settings
from django.db import models

from flywheel.models.trajectories import Outcome


class VoteValue(models.TextChoices):
    TRUE = "true", "True"
    FALSE = "false", "False"
    ENV_ERROR = "env_error", "Env_ERROR"
    ABSTAIN = "abstain", "Abstain"


class Vote(models.Model):
    class System(models.TextChoices):
        A = "A", "A · terminal state"
        B = "B", "B · milestones"
        C = "C", "C · path plausibility"

    trajectory = models.ForeignKey("flywheel.Trajectory", on_delete=models.CASCADE, related_name="votes")
    system = models.CharField(max_length=1, choices=System)
    vote = models.CharField(max_length=10, choices=VoteValue)
    safety_violation = models.CharField(max_length=200, blank=True)
    rationale = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.system}={self.vote} on #{self.trajectory_id}"


class Verdict(models.Model):
    """The outcome of HTSC for one evaluation of a trajectory."""

    trajectory = models.ForeignKey("flywheel.Trajectory", on_delete=models.CASCADE,
                                   related_name="verdicts")
    outcome = models.CharField(max_length=12, choices=Outcome)
    safety_vetoed = models.BooleanField(default=False)
    rationale = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.outcome} for #{self.trajectory_id}"


class Adjudication(models.Model):
    class Decision(models.TextChoices):
        CORRECT = "correct", "Correct → SFT"
        WRONG = "wrong", "Wrong → ECDM"
        ENVIRONMENT = "environment", "Environment issue → Env_ERROR branch"

    trajectory = models.ForeignKey("flywheel.Trajectory", on_delete=models.CASCADE,
                                   related_name="adjudications")
    adjudicator = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    claimed_until = models.DateTimeField(null=True, blank=True)
    decision = models.CharField(max_length=12, choices=Decision, blank=True)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"adjudication of #{self.trajectory_id}: {self.decision or 'open'}"


class Attribution(models.Model):
    """Cascaded failure attribution (§2.5.1): environment, then task/verifier, then model."""

    LEVELS = [(1, "1 · environment"), (2, "2 · task / verifier defect"), (3, "3 · model")]
    trajectory = models.ForeignKey("flywheel.Trajectory", on_delete=models.CASCADE,
                                   related_name="attributions")
    level = models.PositiveSmallIntegerField(choices=LEVELS)
    cause = models.CharField(max_length=60)
    first_bad_step = models.PositiveIntegerField(null=True, blank=True)
    features = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"L{self.level} {self.cause} (#{self.trajectory_id})"


class Repair(models.Model):
    """An ECDM repair (§2.5.2): step-level correction, RQA, or counterfactual derivation."""

    class Path(models.TextChoices):
        STEP = "step", "Step-level correction"
        RQA = "rqa", "Retroactive query alignment"
        COUNTERFACTUAL = "counterfactual", "Counterfactual derivation"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        NEEDS_HUMAN = "needs_human", "Needs human"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    trajectory = models.ForeignKey("flywheel.Trajectory", on_delete=models.CASCADE,
                                   related_name="repairs")
    path = models.CharField(max_length=15, choices=Path)
    step_index = models.PositiveIntegerField(null=True, blank=True)
    teacher_output = models.JSONField(null=True, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    human_fallback = models.BooleanField(default=False)
    repaired_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL)
    derived_query = models.ForeignKey("flywheel.Query", null=True, blank=True,
                                      on_delete=models.SET_NULL, related_name="derived_from_repairs")
    status = models.CharField(max_length=12, choices=Status, default="pending")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.path} repair of #{self.trajectory_id}"
