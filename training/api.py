from accounts.api import role_viewset
from accounts.roles import ADMIN, MANAGER
from training.models import TrainingRun

TrainingRunViewSet = role_viewset(TrainingRun, read_roles=(MANAGER,), write_roles=(MANAGER, ADMIN),
                                  filter_fields=("stage", "status"))


def register(router):
    router.register("training-runs", TrainingRunViewSet, basename="training-runs")
