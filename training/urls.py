"""Training pages; the project includes these at "training/"."""
from django.urls import path

from training import views

urlpatterns = [
    path("", views.training_home, name="training-home"),
    path("snapshots/", views.snapshot_create, name="training-snapshot-create"),
    path("snapshots/<int:snapshot_id>/", views.snapshot_detail, name="training-snapshot"),
    path("runs/", views.run_create, name="training-run-create"),
    path("runs/<int:run_id>/", views.run_detail, name="training-run"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="training-run-cancel"),
    path("runs/<int:run_id>/resume/", views.run_resume, name="training-run-resume"),
    path("models/<int:model_id>/", views.model_detail, name="training-model"),
    path("models/<int:model_id>/endpoint/", views.model_register_endpoint, name="training-model-endpoint"),
    path("models/<int:model_id>/serve/", views.model_serve, name="training-model-serve"),
    path("reward-models/", views.reward_model_create, name="training-reward-model-create"),
]
