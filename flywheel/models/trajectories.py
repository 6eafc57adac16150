"""Trajectories and their steps: everything that happened on a phone, persisted as it happens."""
from functools import cached_property

from django.conf import settings
from django.db import models

from flywheel.models.catalog import App
from flywheel.rules.app_names import agent_may_open
from flywheel.rules.stated_outcome import Stated
from flywheel.rules.stops import StopKind

# "" until it stops; the kinds are defined once, in the pure rules (flywheel/rules/stops.py).
STOP_KINDS = [("", "Not stopped yet"), *((kind.value, kind.label) for kind in StopKind)]
STATED = [("", "Not stated"), (Stated.SUCCESS.value, "Success"), (Stated.FAILURE.value, "Failure"),
          (Stated.INFEASIBLE.value, "Infeasible")]


class Line(models.TextChoices):
    SEMI_AUTO = "semi_auto", "Semi-automatic"
    AUTOMATIC = "automatic", "Automatic"
    SCHEMA = "schema", "Schema-guided"
    EXTERNAL = "external", "External replay"
    RL = "rl", "RL rollout"
    BENCHMARK = "benchmark", "Benchmark"
    # A sample the ECDM made from a failed trajectory (prefix + correction, or RQA's short chain):
    # its own line, so no line's success rate or RL group ever counts it as a rollout.
    ECDM = "ecdm", "ECDM repaired sample"
    # A sample of the right behaviour at a state a real farm cannot inject (§2.3.7): a stored step's
    # screen with call_user or the tap that closes a skippable page; never a rollout either.
    HANDBACK = "handback", "Hand-back sample"


# The lines whose policy is given the query's apps: the schema-guided line (its known path starts
# there) and the semi-automatic one (a person works that query with the policy). Every other line is
# goal-only (§2.3.4): the automatic, RL and benchmark policies find their apps from the goal.
GUIDED_LINES = (Line.SCHEMA, Line.SEMI_AUTO)


class Outcome(models.TextChoices):
    PENDING = "pending", "Pending"
    TRUE = "true", "True"
    FALSE = "false", "False"
    ENV_ERROR = "env_error", "Env_ERROR"
    UNDETERMINED = "undetermined", "Undetermined"
    # Stated by an annotator: the task cannot be done. A refusal sample, neither a success nor a
    # failure for the ECDM to repair (flywheel/rules/stated_outcome.py).
    INFEASIBLE = "infeasible", "Infeasible"


class Destination(models.TextChoices):
    NONE = "", "Not routed yet"
    SFT = "sft", "SFT pool"
    ECDM = "ecdm", "ECDM queue"
    ENV_HEALING = "env_healing", "Env self-healing + re-collection"
    ADJUDICATION = "adjudication", "Adjudication queue"
    # A benchmark evaluation's rollout: scored by the benchmark's judges, never training data nor
    # a failure for the ECDM (its held-out query must stay out of every pool).
    BENCHMARK = "benchmark", "Benchmark evaluation"


class LabelGate(models.TextChoices):
    """What SFT intake's bi-directional consistency gate (§2.3.6, flywheel/pools/sft.py) made of an
    executed step. A step that is not a training label stays in its trajectory (its history, its
    frames) but gives no SFT sample."""
    UNCHECKED = "", "Not checked"
    PASSED = "passed", "Passed"
    REGENERATED = "regenerated", "Passed after its reasoning was regenerated"
    REGENERATING = "regenerating", "Not a training label yet: its reasoning is being regenerated"
    INCONSISTENT = "inconsistent", "Not a training label: inconsistent after regeneration"
    TEACHER_FAILS = "teacher_fails", "Not a training label: the Teacher's own reasoning fails the gate"
    NO_REGENERATOR = "no_regenerator", "Not a training label: no model answered to regenerate its reasoning"


NOT_TRAINING_LABELS = (LabelGate.REGENERATING, LabelGate.INCONSISTENT, LabelGate.TEACHER_FAILS,
                       LabelGate.NO_REGENERATOR)


class Trajectory(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        PAUSED = "paused", "Paused"
        COMPLETED = "completed", "Completed"
        INTERRUPTED = "interrupted", "Interrupted"
        NOT_EXECUTABLE = "not_executable", "Not executable"

    query = models.ForeignKey("flywheel.Query", on_delete=models.PROTECT, related_name="trajectories")
    run = models.ForeignKey("flywheel.CollectionRun", null=True, blank=True,
                            on_delete=models.SET_NULL, related_name="trajectories")
    device = models.ForeignKey("devices.Device", null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="trajectories")
    line = models.CharField(max_length=10, choices=Line, db_index=True)
    model_version = models.ForeignKey("flywheel.ModelVersion", null=True, blank=True,
                                      on_delete=models.PROTECT, related_name="trajectories")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                  on_delete=models.SET_NULL, related_name="trajectories")
    status = models.CharField(max_length=15, choices=Status, default="running", db_index=True)
    stop_kind = models.CharField(max_length=20, choices=STOP_KINDS, blank=True, default="",
                                 help_text="how it stopped, as code reads it (stop_reason: the words a person reads)")
    stop_reason = models.CharField(max_length=200, blank=True)
    verdict = models.CharField(max_length=12, choices=Outcome, default="pending", db_index=True)
    destination = models.CharField(max_length=12, choices=Destination, blank=True, db_index=True)
    # The person behind a semi-automatic session's verdict: what the annotator stated, who, when.
    stated_outcome = models.CharField(max_length=10, choices=STATED, blank=True, default="",
                                      help_text="the outcome the annotator stated when ending the session")
    stated_reason = models.CharField(max_length=300, blank=True, help_text="why (e.g. why it is infeasible)")
    stated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="stated_outcomes")
    stated_at = models.DateTimeField(null=True, blank=True)
    memory = models.JSONField(default=list, blank=True, help_text="take_notes items")
    setup = models.JSONField(default=dict, blank=True,
                             help_text="what ran before the task: each prerequisite's recipe and its actions, "
                                       "or why one could not be met")
    consistency_issues = models.JSONField(
        default=list, blank=True, help_text="open findings of the bi-directional consistency gate (§2.3.6)")
    teacher_assisted = models.BooleanField(
        default=False, help_text="the Teacher took over at one or more steps: never the policy's own success")
    recollection_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="recollections",
        help_text="the Env_ERROR trajectory whose query this one collects again (§2.4.2)")
    derived_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="derived_samples",
        help_text="the failed trajectory this ECDM sample was repaired from (§2.5.2)")
    judging_since = models.DateTimeField(
        null=True, blank=True, help_text="claimed for judging (one judge per trajectory, once)")
    flag = models.CharField(max_length=300, blank=True,
                            help_text="why a person must look at it instead of HTSC (a malformed spec, a task "
                                      "already done before any action)")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]
        verbose_name_plural = "trajectories"
        # What the dashboard, the ledger and coverage count at scale (issue #17): each is an
        # index-only scan or an index probe instead of a pass over every trajectory.
        indexes = [models.Index(fields=["line", "verdict"], name="trajectory_line_verdict"),
                   models.Index(fields=["query", "verdict"], name="trajectory_query_verdict"),
                   models.Index(fields=["run", "destination"], name="trajectory_run_destination"),
                   models.Index(fields=["line", "finished_at"], name="trajectory_line_finished"),
                   # The few Teacher-assisted ones, counted apart from the policy's own successes.
                   models.Index(fields=["line", "verdict"], name="trajectory_teacher_assisted",
                                condition=models.Q(teacher_assisted=True))]

    def __str__(self):
        return f"trajectory #{self.pk} ({self.query_id})"

    @cached_property
    def policy_apps(self) -> list[str]:
        """The apps the policy may open, read once per instance (its input carries them at every
        step): the query's own on a guided line (GUIDED_LINES); on a goal-only line the phone's
        apps the console knows (launchers and the system UI left out; Settings is an app), so the agent finds the apps a
        goal needs from the goal, as with a user's request (the query's list is not a hint)."""
        if self.line in GUIDED_LINES:
            return self.query.app_packages
        apps = App.objects.all()
        installed = self.device.installed_apps if self.device_id else []
        if installed:  # a phone whose packages were never read is offered every app the console knows
            apps = apps.filter(package__in=installed)
        return sorted(p for p in apps.values_list("package", flat=True) if agent_may_open(p))

    @cached_property
    def policy_app_labels(self) -> dict[str, str]:
        return App.display_labels(self.policy_apps)


class Step(models.Model):
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()
    screenshot = models.FileField(blank=True, max_length=200)
    hierarchy = models.FileField(blank=True, max_length=200)
    foreground_package = models.CharField(max_length=200, blank=True)
    activity_stack = models.JSONField(default=list, blank=True)
    cot = models.JSONField(default=dict, blank=True,
                           help_text="[Observation] [Reflection] [Plan] [Decision] [Memory]")
    proposed_action = models.JSONField(null=True, blank=True)
    executed_action = models.JSONField(null=True, blank=True)
    edit = models.JSONField(null=True, blank=True, help_text="how the annotator changed the proposal")
    confidence = models.FloatField(null=True, blank=True)
    model_io = models.JSONField(null=True, blank=True, help_text="raw request/response")
    sampled = models.JSONField(
        default=dict, blank=True,
        help_text="what the policy sampled, when its server said: temperature, top_p, top_k, the "
                  "completion's tokens and their log-probabilities (the RL trainer's π_old check)")
    anomaly = models.JSONField(null=True, blank=True, help_text="anomaly injected before this step")
    audit = models.JSONField(null=True, blank=True, help_text="safety audit decision")
    label_masked = models.BooleanField(default=False, help_text="repetition-to-reflection mask")
    score = models.FloatField(null=True, blank=True,
                              help_text="step score that Teacher takeover watches (Xiaomi-GUI-0 §3.4)")
    takeover = models.BooleanField(default=False,
                                   help_text="the Teacher acted at this step: a recovery demonstration")
    label_gate = models.CharField(max_length=15, choices=LabelGate, blank=True, default="",
                                  help_text="the consistency gate's verdict at SFT intake (§2.3.6)")
    label_issues = models.JSONField(default=list, blank=True,
                                    help_text="the gate's rules this step still fails (consistency.py's rule names)")
    timings = models.JSONField(default=dict, blank=True)
    executing_since = models.DateTimeField(
        null=True, blank=True, help_text="claimed for execution (one request runs a step's action, once)")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["trajectory", "index"]
        # A redelivered task rewrites the same (trajectory, index): step writes are idempotent.
        constraints = [models.UniqueConstraint(fields=["trajectory", "index"], name="unique_step_index")]
        # The pool page counts the steps that are no training labels: a few among a million.
        indexes = [models.Index(fields=["label_gate"], name="step_not_training_label",
                                condition=models.Q(label_gate__in=NOT_TRAINING_LABELS))]

    def __str__(self):
        return f"step {self.index} of trajectory #{self.trajectory_id}"

    @property
    def not_a_training_label(self) -> bool:
        return self.label_gate in NOT_TRAINING_LABELS

    @property
    def reasoning_regenerated(self) -> bool:
        return self.label_gate == LabelGate.REGENERATED
