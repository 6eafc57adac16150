"""Apps, their function trees (§2.2.1) and Global Environment Memory pages and edges (§2.2.5)."""
from django.conf import settings
from django.db import models

from flywheel.rules.app_names import display_name


class App(models.Model):
    class Category(models.TextChoices):
        SYSTEM = "system", "System tools"
        SOCIAL = "social", "Social & communication"
        SHOPPING = "shopping", "Shopping"
        FOOD = "food", "Food & delivery"
        TRAVEL = "travel", "Travel"
        NAVIGATION = "navigation", "Maps & navigation"
        VIDEO = "video", "Video"
        MUSIC = "music", "Music & audio"
        NEWS = "news", "News & reading"
        PRODUCTIVITY = "productivity", "Productivity & notes"
        PHOTO = "photo", "Photo & gallery"
        LIFE = "life", "Life services"

    package = models.CharField(max_length=200, unique=True)
    label = models.CharField(max_length=200, blank=True)
    category = models.CharField(max_length=20, choices=Category, blank=True)
    is_system = models.BooleanField(default=False)
    page_identity = models.JSONField(
        default=dict, blank=True,
        help_text="per-app same-page thresholds: {phash_distance, layout_distance} (else settings)")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["package"]

    def __str__(self):
        return self.display_label

    @property
    def display_label(self) -> str:
        """The app's name for people and generated queries: never the package id."""
        return display_name(self.package, self.label)

    @classmethod
    def display_labels(cls, packages) -> dict[str, str]:
        """{package: name for people} for many packages in one read (a page's rows)."""
        packages = {p for p in packages if p}
        labels = dict(cls.objects.filter(package__in=packages).values_list("package", "label"))
        return {p: display_name(p, labels.get(p, "")) for p in packages}


class FunctionNode(models.Model):
    """A node of an app's function tree; `path` is slash-separated from the app's root."""

    class Status(models.TextChoices):
        PROPOSED = "proposed", "Proposed"
        APPROVED = "approved", "Approved"
        PRUNED = "pruned", "Pruned"

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="function_nodes")
    path = models.CharField(max_length=500)
    label = models.CharField(max_length=200, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE,
                               related_name="children")
    is_leaf = models.BooleanField(default=False)
    reuse_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="reused_by",
                                 help_text="Same functionality reached by another path (§2.2.1)")
    status = models.CharField(max_length=10, choices=Status, default="approved")

    class Origin(models.TextChoices):
        DECLARED = "declared", "Declared (app data / import)"
        EXPLORED = "explored", "Built from exploration"
        VLM = "vlm", "Semantic extraction (VLM)"
        MANUAL = "manual", "Added by a person"

    origin = models.CharField(max_length=10, choices=Origin, default="declared")
    description = models.TextField(blank=True)
    position = models.PositiveIntegerField(default=0)
    page = models.ForeignKey("flywheel.GemPage", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="functions", help_text="the page where the function is done")
    merged_into = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="merged_from")
    exercised_at = models.DateTimeField(null=True, blank=True,
                                        help_text="first successful trajectory that exercised it")
    updated_at = models.DateTimeField(auto_now=True, null=True)

    class Meta:
        ordering = ["app", "path"]
        constraints = [models.UniqueConstraint(fields=["app", "path"], name="unique_function_path")]

    def __str__(self):
        return f"{self.app.package}:{self.path}"


class GemPage(models.Model):
    """A page of Global Environment Memory: what a screen is, keyed by perceptual hash + layout."""

    class Kind(models.TextChoices):
        PAGE = "page", "App page"
        DIALOG = "dialog", "Dialog"
        LAUNCHER = "launcher", "Launcher (Home)"
        RECENTS = "recents", "Recents"
        SHARE_SHEET = "share_sheet", "Share sheet"

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="pages")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=12, choices=Kind, default="page")
    title = models.CharField(max_length=300, blank=True)
    activity = models.CharField(max_length=300, blank=True)
    phash = models.CharField(max_length=32, blank=True, db_index=True)
    layout_signature = models.CharField(max_length=64, blank=True, db_index=True)
    layout_shape = models.JSONField(default=list, blank=True,
                                    help_text="structure tokens the layout distance compares")
    texts = models.JSONField(default=list, blank=True, help_text="visible texts (headers first)")
    elements = models.JSONField(default=list, blank=True,
                                help_text="actionable elements: selector, text, class, bounds")
    node_count = models.PositiveIntegerField(default=0)
    # Blob names from flywheel/blobs.py store_blob (content-addressed by their sha256).
    screenshot_sha = models.CharField(max_length=200, blank=True)
    hierarchy_sha = models.CharField(max_length=200, blank=True)
    depth = models.PositiveSmallIntegerField(default=0, help_text="taps from the app's start page")
    is_start = models.BooleanField(default=False)
    inputs = models.JSONField(default=list, blank=True, help_text='what it consumes: ["text: search keyword"]')
    outputs = models.JSONField(default=list, blank=True, help_text='what it yields: ["text: product title"]')
    description = models.TextField(blank=True)
    explored_by = models.ForeignKey("flywheel.ExplorationRun", null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="pages")
    visits = models.PositiveIntegerField(default=0)
    first_seen_at = models.DateTimeField(auto_now_add=True, null=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["app", "depth", "id"]
        indexes = [models.Index(fields=["app", "phash"], name="gem_page_app_phash")]

    def __str__(self):
        return f"{self.app.package}/{self.name}"


class Edge(models.Model):
    class Kind(models.TextChoices):
        INTRA = "intra", "Intra-app"
        CROSS = "cross", "Cross-app"

    source = models.ForeignKey(GemPage, on_delete=models.CASCADE, related_name="out_edges")
    target = models.ForeignKey(GemPage, on_delete=models.CASCADE, related_name="in_edges")
    class Via(models.TextChoices):
        TAP = "tap", "Tap / gesture on the page"
        BACK = "back", "Back"
        LAUNCH = "launch", "Launch from Home"
        HOME = "home", "Home key"
        RECENTS = "recents", "Recents panel"
        SHARE = "share", "Share sheet"
        CLIPBOARD = "clipboard", "Clipboard"

    kind = models.CharField(max_length=5, choices=Kind, default="intra")
    via = models.CharField(max_length=10, choices=Via, default="tap")
    action = models.JSONField(default=dict, blank=True,
                              help_text="the replayable step (query-format step with a target selector)")
    action_key = models.CharField(max_length=64, blank=True, help_text="hash of via + action")
    reachable = models.BooleanField(default=True)
    unreachable_until = models.DateTimeField(null=True, blank=True)
    unreachable_reason = models.TextField(blank=True)
    failures = models.PositiveIntegerField(default=0)
    last_checked_at = models.DateTimeField(null=True, blank=True)
    explored_by = models.ForeignKey("flywheel.ExplorationRun", null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="edges")
    created_at = models.DateTimeField(auto_now_add=True, null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "target", "action_key"],
                                               name="unique_gem_edge")]

    def __str__(self):
        return f"{self.source} → {self.target}"


class DevicePrior(models.Model):
    """Device/system knowledge an admin enters (§2.2.5, second source): whether a function exists
    on a phone model / OS version, and the exact settings path to it."""

    device_model = models.CharField(max_length=200, blank=True, help_text="blank: every model")
    os_version = models.CharField(max_length=50, blank=True, help_text="blank: every version")
    app = models.ForeignKey(App, null=True, blank=True, on_delete=models.CASCADE, related_name="priors")
    function = models.CharField(max_length=300, help_text="function path or name")
    exists = models.BooleanField(default=True)
    settings_path = models.JSONField(default=list, blank=True,
                                     help_text="exact path: query-format steps or labels in order")
    note = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["app", "function", "device_model", "os_version"]

    def __str__(self):
        return f"{self.function} on {self.device_model or 'any'} / {self.os_version or 'any'}"
