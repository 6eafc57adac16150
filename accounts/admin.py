"""The People page's log: shown in Django admin, never edited (users and groups stay editable there)."""
from django.contrib import admin

from accounts.models import PeopleEvent
from accounts.read_only_admin import ReadOnlyAdmin


@admin.register(PeopleEvent)
class PeopleEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "actor", "action", "target_username", "roles")
    list_filter = ("action",)
