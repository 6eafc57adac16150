"""A session's outcome is what its annotator states (issue #31), through the views on the virtual farm:
an ending that is not a success is refused unstated; a stated failure goes to the ECDM, a task stated
infeasible becomes a refusal sample, and every page shows who stated it."""
import json

import pytest

from flywheel.collection import semi_auto
from flywheel.models import SftEntry, Trajectory
from tests.annotation.test_session_views import open_session, pending, prepare

pytestmark = pytest.mark.django_db

FAILURE = {"action": "terminate", "status": "failure"}


def send(client, trajectory, step, action, **extra):
    body = {"step": step.index, "action": action, "cot": step.cot, **extra}
    return client.post(f"/session/{trajectory.pk}/execute/", json.dumps(body), content_type="application/json")


def test_a_failure_accepted_without_confirmation_is_refused_and_nothing_runs(client_as, role_users, farm_devices,
                                                                             import_task):
    client, trajectory = open_session(client_as, role_users, farm_devices, import_task)
    prepare(client, trajectory)
    step = pending(trajectory)
    refused = send(client, trajectory, step, FAILURE)
    assert refused.status_code == 400 and "stated_outcome 'failure'" in refused.json()["error"]
    wrong = send(client, trajectory, step, FAILURE, stated_outcome="success")
    assert wrong.status_code == 400
    trajectory.refresh_from_db()
    assert trajectory.status == "running" and trajectory.verdict == "pending" and not trajectory.stated_outcome
    assert pending(trajectory).pk == step.pk                    # the step still waits, nothing executed
    # A call_user the task does not ask for is no success either.
    assert send(client, trajectory, step, {"action": "call_user", "reason": "pay?"}).status_code == 400
    # A success says so; stating it otherwise is refused.
    assert send(client, trajectory, step, {"action": "terminate", "status": "success"},
                stated_outcome="failure").status_code == 400


def test_a_stated_failure_is_routed_as_a_failure_with_the_person_behind_it(client_as, role_users, farm_devices,
                                                                           import_task):
    client, trajectory = open_session(client_as, role_users, farm_devices, import_task)
    prepare(client, trajectory)
    answer = send(client, trajectory, pending(trajectory), FAILURE, stated_outcome="failure").json()
    assert answer["ok"] and answer["finished"] and answer["destination"] == "ecdm", answer
    trajectory.refresh_from_db()
    annotator = role_users["annotator"]
    assert trajectory.status == "completed" and trajectory.verdict == "false" and trajectory.destination == "ecdm"
    assert trajectory.stated_outcome == "failure" and trajectory.stated_by == annotator and trajectory.stated_at
    assert not SftEntry.objects.filter(trajectory=trajectory).exists()
    session = client.get(f"/session/{trajectory.pk}/").content.decode()
    assert f"Stated by {annotator.username}: <strong>failure</strong>" in session and 'data-testid="to-ecdm"' in session
    assert 'data-testid="in-sft"' not in session
    page = client.get(f"/trajectories/{trajectory.pk}/").content.decode()
    assert f"Stated by {annotator.username}: <strong>failure</strong>" in page and "No verdict yet" not in page
    # The dashboard counts it as the False the annotator stated, not as True.
    rows = client_as("manager").get("/dashboard/counts/").context["counts"]["trajectory_rows"]
    semi = next(row for row in rows if row["line"] == "Semi-automatic")
    assert dict(zip(["pending", "true", "false"], semi["counts"])) == {"pending": 0, "true": 0, "false": 1}
    assert semi["verdicts_by"]


def test_a_task_stated_infeasible_becomes_a_refusal_sample_never_a_success(client_as, role_users, farm_devices,
                                                                           import_task):
    client, trajectory = open_session(client_as, role_users, farm_devices, import_task)
    prepare(client, trajectory)
    step = pending(trajectory)
    cot = {**step.cot, "Decision": "terminate(status=failure): this phone has no dark theme"}
    body = {"step": step.index, "action": FAILURE, "cot": cot, "stated_outcome": "infeasible",
            "stated_reason": "the phone offers no dark theme"}
    answer = client.post(f"/session/{trajectory.pk}/execute/", json.dumps(body), content_type="application/json").json()
    assert answer["ok"] and answer["finished"], answer
    trajectory.refresh_from_db()
    assert trajectory.verdict == "infeasible" and trajectory.verdict != "true"
    assert trajectory.stated_outcome == "infeasible" and trajectory.stated_reason == "the phone offers no dark theme"
    assert trajectory.consistency_issues == [] and trajectory.destination == "sft"
    assert list(SftEntry.objects.filter(trajectory=trajectory).values_list("intake", flat=True)) == [
        "semi_auto_refusal"]                                      # kept apart from the verified successes
    page = client.get(f"/trajectories/{trajectory.pk}/").content.decode()
    assert "<strong>infeasible</strong> (the phone offers no dark theme)" in page


def test_a_success_is_stated_by_the_annotator_who_executed_it(client_as, role_users, farm_devices, import_task):
    client, trajectory = open_session(client_as, role_users, farm_devices, import_task)
    prepare(client, trajectory)
    step = pending(trajectory)
    answer = send(client, trajectory, step, {"action": "terminate", "status": "success"}).json()
    assert answer["ok"] and answer["finished"]
    trajectory.refresh_from_db()
    assert trajectory.stated_outcome == "success" and trajectory.stated_by == role_users["annotator"]
    assert trajectory.verdict == "true"


def test_a_session_ended_before_outcomes_were_stated_is_never_fixed_into_the_sft_pool_as_a_success(
        client_as, role_users, farm_devices, import_task):
    """An old session that ended with terminate:failure and waits on the gate: fixing its reasoning
    routes it as the failure it is."""
    client, trajectory = open_session(client_as, role_users, farm_devices, import_task)
    prepare(client, trajectory)
    step = pending(trajectory)
    assert send(client, trajectory, step, FAILURE, stated_outcome="failure").json()["ok"]
    Trajectory.objects.filter(pk=trajectory.pk).update(stated_outcome="", stated_by=None, verdict="pending",
                                                      destination="")  # as it was stored before #31
    trajectory.refresh_from_db()
    assert semi_auto.stated_outcome_of(trajectory) == "failure"
    assert semi_auto.route_verified(trajectory) == []
    trajectory.refresh_from_db()
    assert trajectory.verdict == "false" and trajectory.destination == "ecdm"
    assert not SftEntry.objects.filter(trajectory=trajectory).exists()


def test_the_migration_takes_old_failures_out_of_the_sft_pool_and_names_the_person(role_users):
    import importlib

    from django.apps import apps as django_apps

    from flywheel.models import Query

    migration = importlib.import_module("flywheel.migrations.0013_stated_outcomes_and_benchmark_destination")
    annotator = role_users["annotator"]
    query = Query.objects.create(key="m", text="x", tier="L1", verification={})
    pay = Query.objects.create(key="p", text="pay", tier="L1", verification={"handoff": "call_user"})

    def old(stop_kind, on=query):
        trajectory = Trajectory.objects.create(query=on, line="semi_auto", annotator=annotator, status="completed",
                                               stop_kind=stop_kind, verdict="true", destination="sft")
        SftEntry.objects.create(trajectory=trajectory, intake="semi_auto_verified")
        return trajectory

    failed, handed, ok, paid = old("terminate_failure"), old("call_user"), old("terminate_success"), old("call_user", pay)
    migration.sessions_get_their_stated_outcome(django_apps, None)
    for trajectory in (failed, handed):
        trajectory.refresh_from_db()
        assert (trajectory.verdict, trajectory.destination, trajectory.stated_outcome) == ("false", "ecdm", "failure")
        assert trajectory.stated_by == annotator and not trajectory.sft_entries.exists()
    for trajectory in (ok, paid):
        trajectory.refresh_from_db()
        assert (trajectory.verdict, trajectory.destination, trajectory.stated_outcome) == ("true", "sft", "success")
        assert trajectory.stated_by == annotator and trajectory.sft_entries.count() == 1
