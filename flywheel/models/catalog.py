"""Apps, their function trees (§2.2.1) and Global Environment Memory pages and edges (§2.2.5)."""
from django.db import models


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
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["package"]

    def __str__(self):
        return self.label or self.package


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

    class Meta:
        ordering = ["app", "path"]
        constraints = [models.UniqueConstraint(fields=["app", "path"], name="unique_function_path")]

    def __str__(self):
        return f"{self.app.package}:{self.path}"


class GemPage(models.Model):
    """A page of Global Environment Memory: what a screen is, keyed by perceptual hash."""

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="pages")
    name = models.CharField(max_length=200)
    phash = models.CharField(max_length=32, blank=True, db_index=True)
    layout_signature = models.CharField(max_length=64, blank=True)
    inputs = models.JSONField(default=list, blank=True)
    outputs = models.JSONField(default=list, blank=True)

    def __str__(self):
        return f"{self.app.package}/{self.name}"


class Edge(models.Model):
    class Kind(models.TextChoices):
        INTRA = "intra", "Intra-app"
        CROSS = "cross", "Cross-app"

    source = models.ForeignKey(GemPage, on_delete=models.CASCADE, related_name="out_edges")
    target = models.ForeignKey(GemPage, on_delete=models.CASCADE, related_name="in_edges")
    kind = models.CharField(max_length=5, choices=Kind, default="intra")
    action = models.JSONField(default=dict, blank=True)
    reachable = models.BooleanField(default=True)

    def __str__(self):
        return f"{self.source} → {self.target}"
