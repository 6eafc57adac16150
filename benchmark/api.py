"""Benchmarks and evaluation runs: managers define them; what an evaluation produces is read-only."""
from accounts.api import model_serializer, role_viewset
from accounts.roles import ADMIN, MANAGER
from benchmark.models import Benchmark, EvalRun

BenchmarkViewSet = role_viewset(Benchmark, read_roles=(MANAGER,), write_roles=(MANAGER, ADMIN))
_EvalRunBase = role_viewset(
    EvalRun, read_roles=(MANAGER,), write_roles=(MANAGER, ADMIN), filter_fields=("benchmark", "status"),
    serializer=model_serializer(EvalRun, read_only=(
        "status", "trajectories", "scores", "created_by", "finished_at")))


class EvalRunViewSet(_EvalRunBase):
    def perform_create(self, serializer):
        serializer.save(created_by=self.request.user)


def register(router):
    router.register("benchmarks", BenchmarkViewSet, basename="benchmarks")
    router.register("eval-runs", EvalRunViewSet, basename="eval-runs")
