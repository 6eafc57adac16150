"""Votes, verdicts, human adjudication, failure attribution and repairs (§2.4, §2.5)."""
from django.conf import settings
from django.db import models

from .trajectories import VERDICTS

VOTES = [("true", "True"), ("false", "False"), ("env_error", "Env_ERROR"), ("abstain", "Abstain")]


class Vote(models.Model):
    SYSTEMS = [("A", "A · terminal state"), ("B", "B · milestones"), ("C", "C · path plausibility")]
    trajectory = models.ForeignKey("flywheel.Trajectory", on_delete=models.CASCADE, related_name="votes")
    system = models.CharField(max_length=1, choices=SYSTEMS)
    vote = models.CharField(max_length=10, choices=VOTES)
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
    outcome = models.CharField(max_length=12, choices=VERDICTS)
    safety_vetoed = models.BooleanField(default=False)
    rationale = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.outcome} for #{self.trajectory_id}"


class Adjudication(models.Model):
    DECISIONS = [("correct", "Correct → SFT"), ("wrong", "Wrong → ECDM"),
                 ("environment", "Environment issue → Env_ERROR branch")]
    trajectory = models.ForeignKey("flywheel.Trajectory", on_delete=models.CASCADE,
                                   related_name="adjudications")
    adjudicator = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    claimed_until = models.DateTimeField(null=True, blank=True)
    decision = models.CharField(max_length=12, choices=DECISIONS, blank=True)
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

    PATHS = [("step", "Step-level correction"), ("rqa", "Retroactive query alignment"),
             ("counterfactual", "Counterfactual derivation")]
    STATUSES = [("pending", "Pending"), ("needs_human", "Needs human"), ("done", "Done"),
                ("failed", "Failed")]
    trajectory = models.ForeignKey("flywheel.Trajectory", on_delete=models.CASCADE,
                                   related_name="repairs")
    path = models.CharField(max_length=15, choices=PATHS)
    step_index = models.PositiveIntegerField(null=True, blank=True)
    teacher_output = models.JSONField(null=True, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    human_fallback = models.BooleanField(default=False)
    repaired_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL)
    derived_query = models.ForeignKey("flywheel.Query", null=True, blank=True,
                                      on_delete=models.SET_NULL, related_name="derived_from_repairs")
    status = models.CharField(max_length=12, choices=STATUSES, default="pending")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.path} repair of #{self.trajectory_id}"
