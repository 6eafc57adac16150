"""Phones and who holds them. This layer knows nothing of queries or pools."""
from django.conf import settings
from django.db import models
from django.db.models.functions import Now
from django.utils import timezone


class Device(models.Model):
    class Status(models.TextChoices):
        IDLE = "idle", "Idle"
        LEASED = "leased", "Leased"
        OFFLINE = "offline", "Offline"
        UNHEALTHY = "unhealthy", "Unhealthy"
        QUARANTINED = "quarantined", "Quarantined"

    class RiskLevel(models.TextChoices):
        LOW = "low", "Low"
        MEDIUM = "medium", "Medium"
        HIGH = "high", "High"

    serial = models.CharField(max_length=100)
    adb_server = models.CharField(max_length=100, help_text="host:port of the ADB server")
    model = models.CharField(max_length=100, blank=True)
    device_type = models.CharField(max_length=30, default="phone")
    resolution = models.CharField(max_length=20, blank=True, help_text="WIDTHxHEIGHT")
    os_version = models.CharField(max_length=20, blank=True)
    installed_apps = models.JSONField(default=list, blank=True)
    accounts = models.JSONField(default=list, blank=True)
    battery = models.PositiveSmallIntegerField(null=True, blank=True)
    network = models.JSONField(default=dict, blank=True)
    risk_level = models.CharField(max_length=6, choices=RiskLevel, default="low")
    status = models.CharField(max_length=12, choices=Status, default="idle", db_index=True)
    health = models.JSONField(default=dict, blank=True, help_text="last check and its findings")
    baseline = models.JSONField(default=dict, blank=True,
                                help_text="global settings restored on every reset (devices/baseline.py)")
    baseline_accounts = models.JSONField(default=list, blank=True,
                                         help_text="the accounts it held when its baseline was recorded")
    tasks_since_teardown = models.PositiveIntegerField(default=0)
    last_teardown = models.JSONField(default=dict, blank=True, help_text="when, why and what the last teardown did")
    consecutive_failures = models.PositiveSmallIntegerField(default=0)
    last_seen = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["adb_server", "serial"]
        constraints = [models.UniqueConstraint(fields=["adb_server", "serial"],
                                               name="unique_device_per_server")]

    def __str__(self):
        return f"{self.serial}@{self.adb_server}"

    @property
    def readiness_profile(self):
        return {
            "device_type": self.device_type, "resolution": self.resolution,
            "installed_apps": self.installed_apps, "accounts": self.accounts,
            "risk_level": self.risk_level,
        }


class LeaseQuerySet(models.QuerySet):
    def live(self):
        """Open and not yet expired, on the database's clock (hosts' clocks may drift)."""
        return self.filter(released_at__isnull=True, expires_at__gt=Now())


class Lease(models.Model):
    """Exactly one live lease per phone; it expires unless its holder keeps it alive."""

    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="leases")
    holder = models.CharField(max_length=200, help_text="who controls it: a session or a job id")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.SET_NULL, related_name="leases")
    purpose = models.CharField(max_length=200, blank=True)
    acquired_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True, blank=True)

    objects = LeaseQuerySet.as_manager()

    class Meta:
        ordering = ["-acquired_at"]
        constraints = [
            # The database, not the code, guarantees one open lease per phone.
            models.UniqueConstraint(fields=["device"], condition=models.Q(released_at__isnull=True),
                                    name="one_open_lease_per_device"),
        ]

    def __str__(self):
        return f"{self.device} held by {self.holder}"

    @property
    def is_live(self):
        return self.released_at is None and self.expires_at > timezone.now()


class WorkItemQuerySet(models.QuerySet):
    def open(self):
        """Queued or assigned: work not finished yet (its phone may still be driving it)."""
        return self.filter(status__in=WorkItem.OPEN)


class WorkItem(models.Model):
    """Work waiting for a phone. An idle phone pulls the next item its profile satisfies."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        ASSIGNED = "assigned", "Assigned"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    OPEN = (Status.QUEUED, Status.ASSIGNED)

    kind = models.CharField(max_length=40, help_text="what the holder will do, e.g. 'collect'")
    payload = models.JSONField(default=dict, blank=True, help_text="opaque to this layer")
    requirements = models.JSONField(default=dict, blank=True,
                                    help_text="apps, accounts, resolution class, device type")
    priority = models.IntegerField(default=0)
    status = models.CharField(max_length=10, choices=Status, default="queued", db_index=True)
    device = models.ForeignKey(Device, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="work_items")
    preferred_device = models.ForeignKey(Device, null=True, blank=True, on_delete=models.SET_NULL,
                                         related_name="+")
    attempts = models.PositiveSmallIntegerField(default=0)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    assigned_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = WorkItemQuerySet.as_manager()

    class Meta:
        ordering = ["-priority", "created_at"]
        # A run's progress and cancel read its items by kind (one kind per run).
        indexes = [models.Index(fields=["kind", "status"], name="work_item_kind_status")]

    def __str__(self):
        return f"{self.kind} #{self.pk} ({self.status})"


class SafetyRule(models.Model):
    """A rule of the safety audit (§3.3.1). Rules are data: admins edit them in the admin."""

    class Category(models.TextChoices):
        PAYMENT = "payment", "Payment"
        PRIVACY = "privacy", "Private data"
        IRREVERSIBLE = "irreversible", "Irreversible operation"
        PERMISSION = "permission", "Sensitive permission"
        PROHIBITED = "prohibited", "Prohibited content"

    name = models.CharField(max_length=100, unique=True)
    category = models.CharField(max_length=15, choices=Category)
    enabled = models.BooleanField(default=True)
    action_types = models.JSONField(default=list, blank=True,
                                    help_text="actions it applies to; empty = every screen-touching action")
    element_patterns = models.JSONField(default=list, blank=True,
                                        help_text="regexes over the hit element's text/desc/resource-id")
    page_patterns = models.JSONField(default=list, blank=True,
                                     help_text="regexes over the page's text; all must match")
    typed_text_patterns = models.JSONField(default=list, blank=True,
                                           help_text="regexes over text being typed or noted")
    reason = models.CharField(max_length=200)

    class Meta:
        ordering = ["category", "name"]

    def __str__(self):
        return self.name


class AuditEvent(models.Model):
    """A decision of the safety audit that blocked an action (allowed actions are on their step)."""

    device = models.ForeignKey(Device, null=True, on_delete=models.SET_NULL, related_name="audit_events")
    holder = models.CharField(max_length=200, blank=True)
    action = models.JSONField()
    rule = models.ForeignKey(SafetyRule, null=True, on_delete=models.SET_NULL)
    reason = models.CharField(max_length=300)
    element = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"blocked {self.action.get('action', '?') if isinstance(self.action, dict) else '?'}: {self.reason}"


class PhoneHost(models.Model):
    """A machine with an ADB server and the one worker that drives its phones (on one machine,
    `make up`'s worker serves every ADB server listed). The worker says it is alive every few
    seconds; the database's clock judges who is silent."""

    name = models.CharField(max_length=100, unique=True,
                            help_text="how the console knows it: its phones' adb_server and its queue")
    machine = models.CharField(max_length=200, help_text="hostname of the worker's machine")
    instance = models.CharField(max_length=120, help_text="the worker process serving it now")
    pid = models.IntegerField(null=True, blank=True)
    queue = models.CharField(max_length=120)
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name
