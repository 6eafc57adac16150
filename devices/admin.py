from django.contrib import admin

from devices.models import AuditEvent, Device, Lease, SafetyRule, WorkItem


@admin.register(Device)
class DeviceAdmin(admin.ModelAdmin):
    list_display = ["serial", "adb_server", "model", "resolution", "status", "battery", "last_seen"]
    list_filter = ["status", "adb_server", "risk_level"]


@admin.register(Lease)
class LeaseAdmin(admin.ModelAdmin):
    list_display = ["device", "holder", "user", "acquired_at", "expires_at", "released_at"]


@admin.register(WorkItem)
class WorkItemAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "status", "device", "priority", "attempts", "created_at"]
    list_filter = ["status", "kind"]


@admin.register(SafetyRule)
class SafetyRuleAdmin(admin.ModelAdmin):
    list_display = ["name", "category", "enabled", "reason"]
    list_filter = ["category", "enabled"]
    list_editable = ["enabled"]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "device", "holder", "reason"]
    readonly_fields = ["device", "holder", "action", "rule", "reason", "element", "created_at"]
