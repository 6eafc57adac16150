"""What ended a benchmark rollout, read from its stop kind: scored (the model's own doing), or not
scored and why (benchmark/infer.py classify_stop)."""
import pytest

from benchmark.infer import classify_stop
from flywheel.rules.stops import StopKind

EXPECTED = {
    StopKind.ALREADY_DONE: "initial_state",
    StopKind.ENDPOINT_FAILED: "endpoint",
    StopKind.PREREQUISITE_UNMET: "not_executable",
    StopKind.PHONE_LOST: "phone_lost", StopKind.WORKER_STOPPED: "phone_lost",
    StopKind.CANCELLED: "cancelled",
    StopKind.RESET_FAILED: "environment", StopKind.ACTION_FAILED: "environment", StopKind.LEASE_LOST: "environment",
    StopKind.BLOCKED: "environment", StopKind.CRASHED: "environment",
}


@pytest.mark.parametrize("kind", sorted(StopKind))
def test_every_kind_of_stop_has_its_benchmark_class(kind):
    # Everything else is the model's own doing, scored: its endings, the budgets, a policy that gave
    # no usable output (not the endpoint failing), a clarify nobody answered.
    assert classify_stop(kind) == EXPECTED.get(kind, "finished")
    assert classify_stop(kind.value) == classify_stop(kind)


def test_a_rollout_without_a_kind_is_scored_as_finished():
    assert classify_stop("") == "finished"
