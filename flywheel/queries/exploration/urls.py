from django.urls import path

from flywheel.queries.exploration import views

urlpatterns = [
    path("", views.exploration_list, name="exploration-list"),
    path("<int:run_id>/", views.exploration_detail, name="exploration-detail"),
    path("<int:run_id>/cancel/", views.exploration_cancel, name="exploration-cancel"),
]
