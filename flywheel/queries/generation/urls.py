from django.urls import path

from flywheel.queries.generation import high_frequency_views, views

urlpatterns = [
    path("", views.generation_list, name="generation-list"),
    path("<int:run_id>/", views.generation_detail, name="generation-detail"),
    path("<int:run_id>/cancel/", views.generation_cancel, name="generation-cancel"),
    path("high-frequency/", high_frequency_views.high_frequency, name="generation-high-frequency"),
]
