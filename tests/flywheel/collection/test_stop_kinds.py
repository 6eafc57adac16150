"""The stop kind is stored beside the reason: the status comes from the kind, and rows stored before
the kind existed get theirs from their reason's words (migration 0012), once."""
import importlib

import pytest
from django.apps import apps

from flywheel.collection.engine import end_trajectory, policy_error_stop
from flywheel.models import Query, Trajectory
from flywheel.policies import PolicyError
from flywheel.rules.stops import Stop, StopKind

pytestmark = pytest.mark.django_db


def running(key="stops") -> Trajectory:
    query = Query.objects.create(key=f"{key}-{Query.objects.count()}", text="Open the settings", tier="L1")
    return Trajectory.objects.create(query=query, line="automatic", status="running")


@pytest.mark.parametrize(("stop", "status"), [
    (Stop(StopKind.SUCCESS, "terminate: success"), "completed"),
    (Stop(StopKind.BLOCKED, "blocked by the safety audit: a payment"), "completed"),
    (Stop(StopKind.LEASE_LOST, "lease lost"), "interrupted"),
    (Stop(StopKind.ENDPOINT_FAILED, "policy error: the endpoint failed 3 time(s); last: HTTP 503"), "interrupted"),
])
def test_the_engine_stores_the_kind_and_takes_the_status_from_it(stop, status):
    trajectory = running()
    assert end_trajectory(trajectory, stop)
    stored = Trajectory.objects.get(pk=trajectory.pk)
    assert (stored.status, stored.stop_kind, stored.stop_reason) == (status, stop.kind, stop.detail)
    assert not end_trajectory(trajectory, Stop(StopKind.WORKER_STOPPED, "interrupted: the worker stopped"))
    assert Trajectory.objects.get(pk=trajectory.pk).stop_kind == stop.kind  # ended once: kept


def test_a_failing_endpoint_is_a_kind_of_its_own():
    assert policy_error_stop(PolicyError("the endpoint failed 3 time(s)", endpoint_failed=True)) == Stop(
        StopKind.ENDPOINT_FAILED, "policy error: the endpoint failed 3 time(s)")
    assert policy_error_stop(PolicyError("the model's output does not follow the protocol: no JSON")).kind == \
        StopKind.POLICY_ERROR


OLD_REASONS = [
    ("completed", "terminate: success", StopKind.SUCCESS),
    ("completed", "terminate: failure", StopKind.FAILURE),
    ("completed", "call_user: payment needs you", StopKind.HANDOFF),
    ("completed", "maximum steps (25)", StopKind.MAX_STEPS),
    ("completed", "timeout (300 s)", StopKind.TIMEOUT),
    ("completed", "4 repeated actions", StopKind.REPEATED_ACTIONS),
    ("completed", "blocked by the safety audit: pay button", StopKind.BLOCKED),
    ("interrupted", "clarify: no answer from a person (replay)", StopKind.CLARIFY_UNANSWERED),
    ("completed", "clarify answered 'no': stopped", StopKind.CLARIFY_STOPPED),
    ("interrupted", "policy error: the endpoint answered HTTP 503", StopKind.ENDPOINT_FAILED),
    ("interrupted", "policy error: the endpoint answered HTTP 404", StopKind.POLICY_ERROR),
    ("interrupted", "action failed: adb said no", StopKind.ACTION_FAILED),
    ("interrupted", "lease lost: no request came within the lease", StopKind.LEASE_LOST),
    ("interrupted", "phone lost: adb went away", StopKind.PHONE_LOST),
    ("interrupted", "reset failed: no such app", StopKind.RESET_FAILED),
    ("interrupted", "cancelled", StopKind.CANCELLED),
    ("interrupted", "interrupted: the success check already passed before any action (x)", StopKind.ALREADY_DONE),
    ("interrupted", "interrupted: the worker stopped", StopKind.WORKER_STOPPED),
    ("interrupted", "interrupted: the replay worker stopped", StopKind.WORKER_STOPPED),
    ("interrupted", "interrupted: KeyError: 'x'", StopKind.CRASHED),
    ("completed", "closed by the client before the agent stopped", StopKind.CLOSED_BY_CLIENT),
    ("paused", "left the page", StopKind.LEFT_THE_PAGE),
    ("paused", "paused by the annotator", StopKind.PAUSED),
    ("not_executable", "the app asks for a login", StopKind.NOT_EXECUTABLE),
]


def test_the_migration_gives_old_rows_their_kind_from_their_words():
    migration = importlib.import_module("flywheel.migrations.0012_trajectory_stop_kind")
    trajectory = running()
    rows = [Trajectory.objects.create(query=trajectory.query, line="automatic", status=status, stop_reason=reason)
            for status, reason, _kind in OLD_REASONS]
    sample = Trajectory.objects.create(query=trajectory.query, line="ecdm", status="completed",
                                       stop_reason="ECDM step correction of #12")
    migration.kinds_from_reasons(apps, None)
    for row, (_status, reason, kind) in zip(rows, OLD_REASONS):
        assert Trajectory.objects.get(pk=row.pk).stop_kind == kind, reason
    assert Trajectory.objects.get(pk=sample.pk).stop_kind == StopKind.REPAIRED_SAMPLE
    assert Trajectory.objects.get(pk=trajectory.pk).stop_kind == ""  # still running: not stopped yet
