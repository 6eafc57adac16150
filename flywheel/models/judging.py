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

    class Meta:
        indexes = [models.Index(fields=["created_at"], name="verdict_created")]  # tallies' live rows

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
    """Cascaded failure attribution (§2.5.1): environment, then task/verifier, then model.

    `evidence` keeps every level's conclusion in the fixed order (what was checked, what was
    found), so a reader sees why the cascade stopped where it did. The newest one of a trajectory
    is its attribution; an earlier one stays as history (a re-evaluation after a rule fix).
    """

    LEVELS = [(1, "1 · environment"), (2, "2 · task / verifier defect"), (3, "3 · model")]

    class Owner(models.TextChoices):
        ENVIRONMENT = "environment", "Environment maintenance (self-healing + re-collection)"
        QUERY_REVIEW = "query_review", "Query generation revision (back to query review)"
        RULE_FIX = "rule_fix", "Evaluation revision (the rule is fixed, then re-judged)"
        ECDM = "ecdm", "ECDM repair"

    trajectory = models.ForeignKey("flywheel.Trajectory", on_delete=models.CASCADE,
                                   related_name="attributions")
    level = models.PositiveSmallIntegerField(choices=LEVELS)
    cause = models.CharField(max_length=60)
    first_bad_step = models.PositiveIntegerField(null=True, blank=True)
    features = models.JSONField(default=dict, blank=True)
    evidence = models.JSONField(default=list, blank=True,
                                help_text="per level, in order: conclusion and what it rests on")
    capability = models.CharField(max_length=40, blank=True,
                                  help_text="capability dimension the failure points to (§2.2.4)")
    owner = models.CharField(max_length=14, choices=Owner, blank=True,
                             help_text="who this conclusion goes to")
    ecdm_path = models.CharField(max_length=15, blank=True,
                                 help_text="the ECDM path dispatched from this attribution (empty: none)")
    failure_class = models.ForeignKey("flywheel.FailureClass", null=True, blank=True,
                                      on_delete=models.SET_NULL, related_name="attributions")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        # A trajectory's newest attribution, for the ledger (flywheel/pools/ledger.py).
        indexes = [models.Index(fields=["trajectory", "created_at", "id"], name="attribution_newest")]

    def __str__(self):
        return f"L{self.level} {self.cause} (#{self.trajectory_id})"


class Repair(models.Model):
    """An ECDM repair (§2.5.2): step-level correction, RQA, counterfactual derivation, or the
    Env_ERROR "close the pop-up and resume" synthesis (§2.4.2).

    A repair that yields supervision points at its `sample`: a trajectory of the ECDM line made of
    the kept prefix and the correction (and the continuation collected on a phone, when the prefix
    replayed), which is what enters the SFT pool as `ecdm_repaired`. A human-queue repair is
    claimed like the other queues (`claimed_by` until `claimed_until`).
    """

    class Path(models.TextChoices):
        STEP = "step", "Step-level correction"
        RQA = "rqa", "Retroactive query alignment"
        COUNTERFACTUAL = "counterfactual", "Counterfactual derivation"
        ENV = "env", "Env_ERROR pop-up repair"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        NEEDS_HUMAN = "needs_human", "Needs human"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    trajectory = models.ForeignKey("flywheel.Trajectory", on_delete=models.CASCADE,
                                   related_name="repairs")
    attribution = models.ForeignKey(Attribution, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="repairs")
    path = models.CharField(max_length=15, choices=Path)
    step_index = models.PositiveIntegerField(null=True, blank=True)
    teacher_output = models.JSONField(null=True, blank=True,
                                      help_text="the Teacher's attempt: action, cot, confidence, source, model_io")
    confidence = models.FloatField(null=True, blank=True)
    human_fallback = models.BooleanField(default=False)
    human_reason = models.CharField(max_length=300, blank=True,
                                    help_text="why a person must repair it (low confidence, hard scenario, error)")
    correction = models.JSONField(null=True, blank=True,
                                  help_text="the step that was written: action, cot, by (teacher or human)")
    replay = models.JSONField(default=dict, blank=True,
                              help_text="prefix replay on a phone: status, reason, continuation steps")
    repaired_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL)
    claimed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="claimed_repairs")
    claimed_until = models.DateTimeField(null=True, blank=True)
    derived_query = models.ForeignKey("flywheel.Query", null=True, blank=True,
                                      on_delete=models.SET_NULL, related_name="derived_from_repairs")
    failure_class = models.ForeignKey("flywheel.FailureClass", null=True, blank=True,
                                      on_delete=models.SET_NULL, related_name="repairs")
    sample = models.OneToOneField("flywheel.Trajectory", null=True, blank=True, on_delete=models.PROTECT,
                                  related_name="repair_sample_of",
                                  help_text="the repaired sample (ECDM line) that entered the SFT pool")
    status = models.CharField(max_length=12, choices=Status, default="pending", db_index=True)
    reason = models.TextField(blank=True, help_text="what happened: a failure's cause, a note")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["status", "created_at", "id"], name="repair_queue_order")]  # /repairs/

    def __str__(self):
        return f"{self.path} repair of #{self.trajectory_id}"
