"""The self-evolution loop's pages (managers); the project includes them at "loops/"."""
from django.urls import path

from flywheel.repair import loop_views as views

urlpatterns = [
    path("", views.loop_list, name="loop-list"),
    path("bank/", views.loop_bank, name="loop-bank"),
    path("<int:loop_id>/", views.loop_detail, name="loop-detail"),
    path("<int:loop_id>/cancel/", views.loop_cancel, name="loop-cancel"),
    path("<int:loop_id>/resume/", views.loop_resume, name="loop-resume"),
]
