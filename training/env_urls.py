"""The environment service's routes, included under api/env/ (docs/env-service.md).

A trailing slash is optional: programs POST to /api/env/reset as often as to /api/env/reset/, and
Django cannot redirect a POST to the slashed form."""
from django.urls import re_path

from training import env_views

urlpatterns = [
    re_path(r"^reset/?$", env_views.reset_view, name="env-reset"),
    re_path(r"^step/?$", env_views.step_view, name="env-step"),
    re_path(r"^close/?$", env_views.close_view, name="env-close"),
]
