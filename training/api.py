"""Training runs: managers define them; what a run produces (status, progress, model) is read-only."""
from accounts.api import model_serializer, role_viewset
from accounts.roles import ADMIN, MANAGER
from training.models import TrainingRun

_TrainingRunBase = role_viewset(
    TrainingRun, read_roles=(MANAGER,), write_roles=(MANAGER, ADMIN), filter_fields=("stage", "status"),
    serializer=model_serializer(TrainingRun, read_only=(
        "status", "progress", "produced_model", "created_by", "finished_at")))


class TrainingRunViewSet(_TrainingRunBase):
    def perform_create(self, serializer):
        serializer.save(created_by=self.request.user)


def register(router):
    router.register("training-runs", TrainingRunViewSet, basename="training-runs")
