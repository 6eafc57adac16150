"""Stored screenshots and dumps, behind a role check (filesystem storage only)."""
from django.urls import path

from flywheel.console import views

urlpatterns = [path("media/<path:path>", views.media, name="media")]
