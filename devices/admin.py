from django.contrib import admin

from .models import Device, Lease


@admin.register(Device)
class DeviceAdmin(admin.ModelAdmin):
    list_display = ["serial", "adb_server", "model", "resolution", "status", "battery", "last_seen"]
    list_filter = ["status", "adb_server", "risk_level"]


@admin.register(Lease)
class LeaseAdmin(admin.ModelAdmin):
    list_display = ["device", "holder", "user", "acquired_at", "expires_at", "released_at"]
