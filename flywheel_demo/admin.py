"""Demo runs are written by flywheel_demo/orchestrator.py only: the admin shows them, never edits them."""
from django.contrib import admin

from accounts.read_only_admin import ReadOnlyAdmin
from flywheel_demo.models import DemoRun


@admin.register(DemoRun)
class DemoRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "status", "stage", "created_by", "created_at", "finished_at")
    list_filter = ("status",)
