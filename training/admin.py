"""Snapshots and runs are records of their workflows: the admin shows them, never edits them."""
from django.contrib import admin

from accounts.read_only_admin import ReadOnlyAdmin
from training.models import DataSnapshot, TrainingRun


@admin.register(TrainingRun)
class TrainingRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "stage", "status", "snapshot", "base_model", "produced_model", "created_at")
    list_filter = ("stage", "status")


@admin.register(DataSnapshot)
class DataSnapshotAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "status", "row_count", "content_hash", "created_at")
    list_filter = ("kind", "status")
