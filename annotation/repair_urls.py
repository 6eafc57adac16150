"""The human repair queue (/repairs/): repairs the Teacher could not make, set right by a person."""
from django.urls import path

from annotation import repair_views

urlpatterns = [
    path("", repair_views.repair_queue_page, name="repair-queue"),
    path("next/", repair_views.repair_next, name="repair-next"),
    path("<int:pk>/", repair_views.repair_page, name="repair"),
    path("<int:pk>/claim/", repair_views.repair_claim, name="repair-claim"),
    path("<int:pk>/submit/", repair_views.repair_submit, name="repair-submit"),
    path("<int:pk>/release/", repair_views.repair_release, name="repair-release"),
    path("<int:pk>/cannot/", repair_views.repair_cannot, name="repair-cannot"),
]
