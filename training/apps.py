from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "training"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        _track_decisions()


def _track_decisions():
    """A pool released to training (a data snapshot) in the one history (accounts/history.py), and
    the training pages of the model versions and snapshots the history names."""
    from django.urls import reverse

    from accounts import history
    from flywheel.models import ModelVersion
    from training.models import DataSnapshot

    history.track(DataSnapshot, ["kind", "name", "config", "created_by"])
    history.link(DataSnapshot, lambda pks: {pk: reverse("training-snapshot", args=[pk]) for pk in pks})
    history.link(ModelVersion, lambda pks: {pk: reverse("training-model", args=[pk]) for pk in pks})
