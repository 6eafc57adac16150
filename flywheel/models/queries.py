"""Queries: what a phone should be made to do, with everything needed to judge it (§2.2)."""
from django.conf import settings
from django.db import models


class Tier(models.TextChoices):
    L1 = "L1", "L1 step-by-step"
    L2 = "L2", "L2 explicit goal"
    L3 = "L3", "L3 ambiguous"


class Risk(models.TextChoices):
    LOW = "low", "Low"
    MEDIUM = "medium", "Medium"
    HIGH = "high", "High"


class Source(models.TextChoices):
    SYNTHESIZED = "synthesized", "Synthesized"
    EXTERNAL = "external", "External"
    DERIVED = "derived", "Derived"
    RQA = "rqa", "RQA rewrite"
    BADCASE = "badcase", "BadCase (failed real-user case)"
    BUSINESS = "business", "Business supplement"


class QueryLocked(Exception):
    """A query frozen into a benchmark version keeps its text, labels and checks."""


class Query(models.Model):
    class Status(models.TextChoices):
        READY = "ready", "Ready"
        IN_PROGRESS = "in_progress", "In progress"
        REVIEW = "review", "Needs review"
        DONE = "done", "Done"
        REJECTED = "rejected", "Rejected"

    key = models.CharField(max_length=200, unique=True)
    text = models.TextField()
    apps = models.ManyToManyField("flywheel.App", related_name="queries", through="QueryApp")
    functions = models.ManyToManyField("flywheel.FunctionNode", related_name="queries", blank=True,
                                       through="QueryFunction")
    tier = models.CharField(max_length=2, choices=Tier)
    subclass = models.CharField(max_length=60, blank=True)
    persona = models.CharField(max_length=60, blank=True)
    capabilities = models.JSONField(default=list, blank=True)
    labels = models.JSONField(default=dict, blank=True, help_text="Table 4 labels")
    risk = models.CharField(max_length=6, choices=Risk, default="low")
    prerequisites = models.JSONField(default=list, blank=True)
    requirements = models.JSONField(default=dict, blank=True,
                                    help_text="What a phone must offer: apps, accounts, resolution")
    source = models.CharField(max_length=12, choices=Source, default="synthesized")
    tags = models.JSONField(default=list, blank=True)
    known_path = models.JSONField(null=True, blank=True)
    reset = models.JSONField(default=dict, blank=True)
    verification = models.JSONField(default=dict,
                                    help_text="terminal checks (System A), milestones, veto, clarify")
    gate_results = models.JSONField(default=dict, blank=True,
                                    help_text="per gate: passed, scores, reason (a rejection keeps its gate)")
    generation_run = models.ForeignKey("flywheel.GenerationRun", null=True, blank=True,
                                       on_delete=models.SET_NULL, related_name="queries")
    gem_path = models.JSONField(default=list, blank=True,
                                help_text="GEM edge ids of the known path, in order (Env_ERROR feedback)")
    failure_class = models.ForeignKey(
        "flywheel.FailureClass", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="derived_queries", help_text="the recurring failure class this adversarial query targets")
    derived_from = models.ForeignKey(
        "flywheel.Trajectory", null=True, blank=True, on_delete=models.SET_NULL, related_name="rqa_queries",
        help_text="RQA: the trajectory whose golden prefix this query was rewritten to match")
    reviewed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="reviewed_queries")
    reviewed_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=12, choices=Status, default="ready", db_index=True)
    # Set by the benchmark (§4): a held-out query is for evaluation only and no collection run draws
    # it; a locked one is frozen into a benchmark version, so what it asks and how it is judged stay put.
    evaluation_only = models.BooleanField(default=False, db_index=True,
                                          help_text="held out for evaluation: no collection run draws it")
    locked = models.BooleanField(default=False, help_text="frozen into a benchmark version")
    status_reason = models.TextField(blank=True)
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                 on_delete=models.SET_NULL, related_name="assigned_queries")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["key"]
        verbose_name_plural = "queries"
        indexes = [
            models.Index(fields=["tier"], name="query_tier"),  # the dashboard's count by tier
            # The annotators' open pool (annotation/views.py): counted and listed by key.
            models.Index(fields=["key"], name="query_open_pool",
                         condition=models.Q(status="ready", assignee__isnull=True, evaluation_only=False)),
        ]

    def __str__(self):
        return self.key

    LOCKED_FIELDS = ("text", "tier", "labels", "known_path", "reset", "verification")

    def save(self, *args, **kwargs):
        if self.pk and self.locked:
            stored = Query.objects.filter(pk=self.pk, locked=True).values(*self.LOCKED_FIELDS).first()
            changed = [f for f in self.LOCKED_FIELDS if stored and stored[f] != getattr(self, f)]
            if changed:
                raise QueryLocked(f"query {self.key} is frozen into a benchmark version; "
                                  f"{', '.join(changed)} cannot change (derive a new version)")
        super().save(*args, **kwargs)

    @property
    def is_cross_app(self):
        return len(self.app_packages) > 1

    @property
    def app_packages(self):
        return [link.app.package for link in self.app_links.select_related("app")]

    def phone_requirements(self, recipes=None) -> dict:
        """What a phone must offer to run this query: its requirements plus every app it uses, and the
        accounts and apps of the recipes that meet its prerequisites (`recipes`: SetupRecipe.rules(),
        read once by a caller that asks for many queries)."""
        from flywheel.rules.prerequisites import phone_requirements, resolve

        requirements = dict(self.requirements or {})
        met = []
        if self.prerequisites:
            met, _ = resolve(self.prerequisites, SetupRecipe.rules() if recipes is None else recipes)
        needed = phone_requirements(met)
        requirements["apps"] = sorted(set(requirements.get("apps") or []) | set(self.app_packages)
                                      | set(needed.get("apps", [])))
        if needed.get("accounts"):
            requirements["accounts"] = sorted(set(requirements.get("accounts") or []) | set(needed["accounts"]))
        return requirements

    def set_apps(self, apps):
        """Keep the order given: the first app is where the task starts."""
        self.app_links.all().delete()
        QueryApp.objects.bulk_create(
            QueryApp(query=self, app=app, position=i) for i, app in enumerate(apps))

    def set_functions(self, nodes):
        self.function_links.all().delete()
        QueryFunction.objects.bulk_create(
            QueryFunction(query=self, function=node, position=i) for i, node in enumerate(nodes))


class QueryApp(models.Model):
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="app_links")
    app = models.ForeignKey("flywheel.App", on_delete=models.PROTECT)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["query", "app"], name="unique_query_app")]

    def __str__(self):
        return f"query #{self.query_id} → app #{self.app_id}"


class QueryFunction(models.Model):
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="function_links")
    function = models.ForeignKey("flywheel.FunctionNode", on_delete=models.PROTECT)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["query", "function"],
                                               name="unique_query_function")]

    def __str__(self):
        return f"query #{self.query_id} → function #{self.function_id}"


class SetupRecipe(models.Model):
    """How prerequisites are met before a task (flywheel/rules/prerequisites.py): the phrases it
    meets, an account the phone must hold, and known-path steps run, audited, after the reset."""

    key = models.SlugField(max_length=80, unique=True)
    label = models.CharField(max_length=200)
    phrases = models.JSONField(default=list, help_text="the prerequisites it meets, as queries carry them")
    account = models.CharField(max_length=200, blank=True,
                               help_text="a piece of an account the phone must hold, e.g. com.google")
    apps = models.JSONField(default=list, blank=True, help_text="packages the phone must have")
    steps = models.JSONField(default=list, blank=True, help_text="known-path steps run after the reset")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["key"]

    def __str__(self):
        return self.label

    def as_rule(self):
        from flywheel.rules.prerequisites import Recipe

        return Recipe.from_row({"key": self.key, "phrases": self.phrases, "account": self.account, "apps": self.apps,
                                "steps": self.steps})

    @classmethod
    def rules(cls):
        return [recipe.as_rule() for recipe in cls.objects.all()]
