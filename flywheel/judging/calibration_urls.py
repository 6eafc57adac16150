"""Included by flywheel/urls.py at "calibration/"."""
from django.urls import path

from flywheel.judging import calibration_views as views

urlpatterns = [
    path("", views.calibration, name="calibration"),
    path("run/", views.calibration_run, name="calibration-run"),
]
