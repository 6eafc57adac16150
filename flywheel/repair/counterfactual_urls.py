"""Included by flywheel/urls.py at "ecdm/classes/"."""
from django.urls import path

from flywheel.repair import counterfactual_views as views

urlpatterns = [
    path("", views.failure_classes, name="failure-classes"),
    path("derive/", views.derive_all, name="failure-classes-derive"),
    path("<int:class_id>/", views.failure_class, name="failure-class"),
    path("<int:class_id>/derive/", views.derive_one, name="failure-class-derive"),
]
