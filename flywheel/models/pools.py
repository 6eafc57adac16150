"""The three data pools (§2.4.3): CPT and SFT accumulate, the RL query pool metabolises."""
from django.db import models

from flywheel.rules.handback import CLASSES as HANDBACK_CLASSES
from flywheel.rules.handback import Behaviour


class CptEntry(models.Model):
    """A single-step screenshot–action sample; append-only."""

    step = models.OneToOneField("flywheel.Step", on_delete=models.PROTECT, related_name="cpt_entry")
    screenshot = models.FileField(max_length=200)
    action = models.JSONField()
    phash = models.CharField(max_length=32, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "CPT pool entry"
        verbose_name_plural = "CPT pool"
        indexes = [models.Index(fields=["created_at"], name="cpt_entry_created")]  # tallies' live rows

    def __str__(self):
        return f"CPT sample of step #{self.step_id}"


class SftEntry(models.Model):
    # Semi-automatic trajectories are verified by a person at every step and go straight to the
    # SFT pool (§2.3.1) without HTSC. They get their own intake so the three HTSC intakes stay
    # pure: provenance (human-verified gold vs. judged data) survives into training exports, and
    # statistics of the HTSC routing are not inflated by trajectories HTSC never saw.
    class Intake(models.TextChoices):
        HTSC_TRUE = "htsc_true", "HTSC True"
        ADJUDICATED = "adjudicated", "Adjudicated correct"
        ECDM_REPAIRED = "ecdm_repaired", "ECDM repaired"
        SEMI_AUTO_VERIFIED = "semi_auto_verified", "Semi-automatic, verified"
        # The annotator stated the task infeasible: a refusal sample (its last action refuses).
        SEMI_AUTO_REFUSAL = "semi_auto_refusal", "Semi-automatic, refusal (task infeasible)"
        # The right behaviour at a state a person must handle or a page that can be skipped (§2.3.7).
        HANDBACK = "handback", "Hand-back sample"

    trajectory = models.ForeignKey("flywheel.Trajectory", on_delete=models.PROTECT,
                                   related_name="sft_entries")
    intake = models.CharField(max_length=20, choices=Intake)
    repair = models.ForeignKey("flywheel.Repair", null=True, blank=True, on_delete=models.PROTECT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "SFT pool entry"
        verbose_name_plural = "SFT pool"
        indexes = [models.Index(fields=["created_at"], name="sft_entry_created")]  # tallies' live rows
        constraints = [models.UniqueConstraint(fields=["trajectory", "intake"],
                                               name="one_sft_entry_per_intake")]

    def __str__(self):
        return f"SFT: trajectory #{self.trajectory_id} ({self.intake})"


class RlQueryEntry(models.Model):
    class State(models.TextChoices):
        BANKED = "banked", "Banked (Phase 0)"
        # Phase 1 (§2.4.3): a new query waits here until G rollouts of the current policy are
        # judged; the uniform gate then makes it active or refused. It is never rolled out for training.
        MEASURING = "measuring", "Awaiting measurement (Phase 1)"
        ACTIVE = "active", "Active"
        RETIRED = "retired", "Retired"
        LEFT = "left", "Left the pool"
        REFUSED = "refused", "Refused by the Phase-1 gate"

    class Channel(models.TextChoices):
        """How a query came to the pool (§2.4.3's intake channels)."""
        PHASE0 = "phase0", "Cold-start screening (Phase 0)"
        ROUTING = "routing", "Data-pipeline routing"
        GENERATED = "generated", "Generated and approved"
        DERIVED = "derived", "Counterfactual derivation"
        BUSINESS = "business", "Business supplement"
        BADCASE = "badcase", "BadCase (failed real-user case)"

    query = models.OneToOneField("flywheel.Query", on_delete=models.PROTECT, related_name="rl_entry")
    state = models.CharField(max_length=10, choices=State, default="banked", db_index=True)
    channel = models.CharField(max_length=30, choices=Channel, default=Channel.PHASE0)
    phase0_features = models.JSONField(default=dict, blank=True)
    success_rate = models.FloatField(null=True, blank=True)
    measurement_run = models.ForeignKey("flywheel.CollectionRun", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+", help_text="the RL run measuring the current policy on it")
    note = models.CharField(max_length=300, blank=True, help_text="why it waits, was admitted or was refused")
    updated_at = models.DateTimeField(auto_now=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "RL query pool entry"
        verbose_name_plural = "RL query pool"

    def __str__(self):
        return f"RL pool: query #{self.query_id} ({self.state})"


class RlRollout(models.Model):
    """One group of G rollouts of a model version over an RL-pool query, and what it decided."""

    entry = models.ForeignKey(RlQueryEntry, on_delete=models.CASCADE, related_name="rollouts")
    model_version = models.ForeignKey("flywheel.ModelVersion", null=True, on_delete=models.SET_NULL)
    run = models.ForeignKey("flywheel.CollectionRun", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="rl_rollouts", help_text="the RL run whose group this is")
    outcomes = models.JSONField(default=list, help_text="per-rollout verdicts")
    decision = models.CharField(max_length=8, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["created_at"], name="rl_rollout_created")]  # the pools page's newest
        # A run's group over one query is metabolised once, however many verdicts arrive late.
        constraints = [models.UniqueConstraint(fields=["entry", "run"], condition=models.Q(run__isnull=False),
                                               name="one_metabolism_per_run_and_query")]

    def __str__(self):
        return f"{len(self.outcomes)} rollouts of RL entry #{self.entry_id}: {self.decision or 'pending'}"


HANDBACK_STATES = [(klass.key, klass.label) for klass in HANDBACK_CLASSES]


class HandbackSample(models.Model):
    """One targeted sample of the hand-back channel (§2.3.7): a collected trajectory met a state a
    real farm cannot inject (flywheel/rules/handback.py) at `step_index`; `sample` is the trajectory
    of the Hand-back line that teaches the right behaviour there (its SFT intake: handback)."""

    class Behaviour(models.TextChoices):
        HAND_BACK = Behaviour.HAND_BACK.value, "Hand back to the user"
        BYPASS = Behaviour.BYPASS.value, "Close or bypass"

    source = models.ForeignKey("flywheel.Trajectory", on_delete=models.PROTECT, related_name="handback_sources")
    sample = models.OneToOneField("flywheel.Trajectory", on_delete=models.PROTECT, related_name="handback_sample")
    step_index = models.PositiveIntegerField(help_text="the source's step whose screen showed the state")
    state = models.CharField(max_length=30, choices=HANDBACK_STATES, db_index=True)
    behaviour = models.CharField(max_length=10, choices=Behaviour)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        # A trajectory gives at most one sample per state: the first screen that showed it.
        constraints = [models.UniqueConstraint(fields=["source", "state"], name="one_handback_sample_per_state")]

    def __str__(self):
        return f"hand-back sample of {self.state} from trajectory #{self.source_id}"
