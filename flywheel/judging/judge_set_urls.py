"""Included by flywheel/urls.py at "judges/"."""
from django.urls import path

from flywheel.judging import judge_set_views as views

urlpatterns = [
    path("", views.judge_evaluations, name="judge-evaluations"),
]
