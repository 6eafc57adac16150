"""How right the evaluation systems are, measured against the truth (§2.4.2's promise made a figure):
one evaluation = the judge-evaluation set replayed on a phone and judged by Systems A, B, C and HTSC;
one case = one labelled trajectory of the set, with every system's vote beside the truth."""
from django.conf import settings
from django.db import models


class ScreenKind(models.TextChoices):
    ORDINARY = "ordinary", "Ordinary screens"
    BLIND = "blind", "Dump-blind screens"
    TRAP = "trap", "Trap screens"


class JudgeEvaluation(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    set_version = models.CharField(max_length=40)
    set_sha256 = models.CharField(max_length=64, help_text="hash of the set file the cases came from")
    phone_serial = models.CharField(max_length=100, blank=True)
    real_phone = models.BooleanField(default=False, help_text="the phone answered only what a real phone answers")
    blind_share = models.FloatField(default=0.0, help_text="share of ordinary pages the farm made dump-blind")
    thresholds = models.JSONField(default=dict, blank=True, help_text="Systems B and C's thresholds used")
    status = models.CharField(max_length=10, choices=Status, default=Status.RUNNING)
    cases_total = models.PositiveIntegerField(default=0)
    error = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"judge evaluation #{self.pk} ({self.set_version})"


class JudgeCase(models.Model):
    evaluation = models.ForeignKey(JudgeEvaluation, on_delete=models.CASCADE, related_name="cases")
    key = models.CharField(max_length=200)
    task = models.CharField(max_length=200)
    skill = models.CharField(max_length=30, help_text="the generating policy's skill: expert, pseudo, near_miss…")
    screen_kind = models.CharField(max_length=10, choices=ScreenKind)
    truth = models.BooleanField(help_text="the farm's ground truth: the task was done")
    truth_detail = models.CharField(max_length=300, blank=True)
    steps = models.JSONField(default=list, help_text="[{index, screenshot, hierarchy, action, package}]: blob names")
    votes = models.JSONField(default=dict, help_text="{A|B|C: {vote, rationale}}")
    safety = models.CharField(max_length=300, blank=True, help_text="the shared safety veto, '' when none")
    outcome = models.CharField(max_length=15, help_text="HTSC's consensus")
    step_truth = models.JSONField(default=list, blank=True, help_text="per action: on_course | off_course | neutral")

    class Meta:
        ordering = ["evaluation", "key"]
        constraints = [models.UniqueConstraint(fields=["evaluation", "key"], name="judge_case_once_per_evaluation")]

    def __str__(self):
        return f"{self.key} ({self.outcome} vs {'true' if self.truth else 'false'})"
