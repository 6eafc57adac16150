from accounts.api import role_viewset
from accounts.roles import ADMIN, MANAGER
from benchmark.models import Benchmark, EvalRun

BenchmarkViewSet = role_viewset(Benchmark, read_roles=(MANAGER,), write_roles=(MANAGER, ADMIN))
EvalRunViewSet = role_viewset(EvalRun, read_roles=(MANAGER,), write_roles=(MANAGER, ADMIN),
                              filter_fields=("benchmark", "status"))


def register(router):
    router.register("benchmarks", BenchmarkViewSet, basename="benchmarks")
    router.register("eval-runs", EvalRunViewSet, basename="eval-runs")
