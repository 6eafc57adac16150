"""The ECDM's entry: routing starts it, each failure is attributed once per verdict, dispatched by
its attribution, and the sweep picks up what a dead worker left (nothing is lost)."""
from datetime import timedelta

import pytest
from django.utils import timezone

from flywheel import tasks
from flywheel.blobs import store_blob
from flywheel.judging.destinations import route_trajectory
from flywheel.models import App, Attribution, Query, Repair, Step, Trajectory, Verdict
from flywheel.repair import ecdm

pytestmark = pytest.mark.django_db(transaction=True)

SCREEN = ('<?xml version="1.0" ?><hierarchy rotation="0"><node index="0" text="Bluetooth" '
          'resource-id="com.android.settings:id/bluetooth" class="android.widget.TextView" '
          'package="com.android.settings" content-desc="" clickable="true" bounds="[0,300][1080,450]" />'
          '</hierarchy>')


def failed_trajectory(key="q-1", verdict="false", line="automatic", minutes_ago=5):
    query = Query.objects.create(key=key, text="Open the Bluetooth settings", tier="L2",
                                 verification={"milestones": [{"name": "bt", "text": "Bluetooth"}]})
    query.set_apps([App.objects.get_or_create(package="com.android.settings")[0]])
    trajectory = Trajectory.objects.create(query=query, line=line, status="completed", verdict=verdict,
                                           destination="ecdm", finished_at=timezone.now() - timedelta(minutes=minutes_ago))
    Verdict.objects.create(trajectory=trajectory, outcome=verdict)
    for index, action in enumerate([{"action": "click", "point": [540, 100]},
                                    {"action": "terminate", "status": "failure"}]):
        Step.objects.create(trajectory=trajectory, index=index, hierarchy=store_blob(SCREEN.encode(), "xml"),
                            executed_action=action)
    return trajectory


@pytest.fixture
def fake_cascade(monkeypatch):
    """The attribution a test wants, and records of the runners and tasks called."""
    calls = {"attribute": [], "run": [], "tasks": [], "facts": {"level": 3, "cause": "perception_drift",
                                                               "first_bad_step": 0, "good_prefix": 0,
                                                               "wrong_steps": 1, "correctable": True}}

    def attribute(trajectory, skip_verifier=False):
        calls["attribute"].append(trajectory.pk)
        facts = calls["facts"]
        return Attribution.objects.create(trajectory=trajectory, level=facts["level"], cause=facts["cause"],
                                          first_bad_step=facts["first_bad_step"], features={"facts": facts})

    monkeypatch.setattr("flywheel.repair.attribution.attribute", attribute, raising=False)
    monkeypatch.setattr("flywheel.repair.counterfactual.assign_class", lambda attribution: None, raising=False)
    monkeypatch.setattr(tasks.repair_run, "delay", lambda repair_id: calls["tasks"].append(("run", repair_id)))
    monkeypatch.setattr(tasks.repair_trajectory, "delay",
                        lambda trajectory_id: calls["tasks"].append(("attribute", trajectory_id)))
    monkeypatch.setattr(tasks.repair_derive_recurring, "delay", lambda: calls["tasks"].append(("derive",)))

    def correct_step(repair):
        calls["run"].append(repair.pk)
        Repair.objects.filter(pk=repair.pk).update(status="done")
        return repair

    monkeypatch.setattr("flywheel.repair.step_correction.correct_step", correct_step, raising=False)
    return calls


def test_routing_a_failure_starts_the_ecdm_only_when_it_is_on(settings, fake_cascade):
    trajectory = failed_trajectory(verdict="pending")
    settings.ECDM_AUTOMATIC = True
    route_trajectory(trajectory, "false", reason="A failed")
    route_trajectory(failed_trajectory("q-2", verdict="pending"), "true")
    assert fake_cascade["tasks"] == [("attribute", trajectory.pk)]
    settings.ECDM_AUTOMATIC = False
    route_trajectory(failed_trajectory("q-3", verdict="pending"), "false")
    assert len(fake_cascade["tasks"]) == 1


def test_a_failure_is_attributed_once_per_verdict_and_its_repair_dispatched(fake_cascade):
    trajectory = failed_trajectory()
    attribution = ecdm.process_failure(trajectory.pk)
    assert attribution.ecdm_path == "step"
    repair = Repair.objects.get(trajectory=trajectory)
    assert (repair.path, repair.step_index, repair.attribution_id, repair.status) == ("step", 0, attribution.pk, "pending")
    assert ("run", repair.pk) in fake_cascade["tasks"]
    # a second delivery of the same task (or a Level-1 re-route) attributes nothing again
    assert ecdm.process_failure(trajectory.pk) is None
    assert fake_cascade["attribute"] == [trajectory.pk]
    # a new verdict (re-evaluated after a rule fix) asks for a new attribution
    Verdict.objects.create(trajectory=trajectory, outcome="false")
    assert ecdm.process_failure(trajectory.pk) is not None
    assert fake_cascade["attribute"] == [trajectory.pk, trajectory.pk]


def test_successes_samples_and_missing_trajectories_are_not_the_ecdms(fake_cascade):
    assert ecdm.process_failure(failed_trajectory("ok", verdict="true").pk) is None
    assert ecdm.process_failure(failed_trajectory("sample", line="ecdm").pk) is None
    assert ecdm.process_failure(999_999) is None
    held_out = failed_trajectory("held-out", line="benchmark")  # measured, never made into training data
    Query.objects.filter(pk=held_out.query_id).update(evaluation_only=True)
    assert ecdm.process_failure(held_out.pk) is None and ecdm.sweep()["attributed"] == 0
    assert fake_cascade["attribute"] == []


def test_level_two_is_not_repaired_and_level_one_without_a_known_interruption_only_heals(fake_cascade):
    fake_cascade["facts"] = {"level": 2, "cause": "ambiguous_query", "first_bad_step": None}
    attribution = ecdm.process_failure(failed_trajectory("ambiguous").pk)
    assert attribution.ecdm_path == "" and not Repair.objects.exists()
    fake_cascade["facts"] = {"level": 1, "cause": "popup", "first_bad_step": 1, "interruption_known": True}
    attribution = ecdm.process_failure(failed_trajectory("popup", verdict="env_error").pk)
    assert attribution.ecdm_path == "env"
    assert Repair.objects.get().path == "env"


def test_a_repair_runs_once_and_a_broken_one_goes_to_a_person(fake_cascade, monkeypatch):
    trajectory = failed_trajectory()
    ecdm.process_failure(trajectory.pk)
    repair = Repair.objects.get()
    assert ecdm.run_repair(repair.pk).status == "done"
    assert ecdm.run_repair(repair.pk) is None  # not pending any more: nobody runs it twice
    assert fake_cascade["run"] == [repair.pk]

    def broken(repair):
        raise RuntimeError("dump unreadable")

    monkeypatch.setattr("flywheel.repair.step_correction.correct_step", broken)
    other = failed_trajectory("q-broken")
    ecdm.process_failure(other.pk)
    repair = Repair.objects.get(trajectory=other)
    repair = ecdm.run_repair(repair.pk)
    assert repair.status == "needs_human" and repair.human_fallback
    assert "dump unreadable" in repair.human_reason and repair.claimed_until is None


def test_the_sweep_finds_what_a_dead_worker_left(fake_cascade):
    forgotten = failed_trajectory("forgotten")
    fresh = failed_trajectory("fresh", minutes_ago=0)
    result = ecdm.sweep()
    assert result["attributed"] == 1
    assert fake_cascade["attribute"] == [forgotten.pk]
    assert not fresh.attributions.exists()
    # a pending repair whose worker died (its claim expired) runs again
    repair = Repair.objects.get(trajectory=forgotten)
    Repair.objects.filter(pk=repair.pk).update(created_at=timezone.now() - timedelta(minutes=5),
                                               claimed_until=timezone.now() - timedelta(seconds=1))
    assert ecdm.sweep()["repairs_run"] == 1
    assert Repair.objects.get(pk=repair.pk).status == "done"


def test_a_replay_that_found_no_phone_is_tried_again_a_few_times(fake_cascade, monkeypatch):
    queued = []
    monkeypatch.setattr(tasks.repair_replay, "delay", queued.append)
    trajectory = failed_trajectory("no-phone")
    sample = failed_trajectory("the-sample", verdict="true", line="ecdm")
    repair = Repair.objects.create(trajectory=trajectory, path="step", status="done", sample=sample,
                                   finished_at=timezone.now() - timedelta(minutes=5),
                                   replay={"status": "skipped", "reason": "no idle phone"})
    assert ecdm.requeue_replays() == 1
    assert queued == [repair.pk]
    assert Repair.objects.get(pk=repair.pk).replay == {"status": "queued", "attempts": 2}
    Repair.objects.filter(pk=repair.pk).update(replay={"status": "skipped", "reason": "no idle phone",
                                                       "attempts": ecdm.REPLAY_ATTEMPTS})
    assert ecdm.requeue_replays() == 0  # tried enough: it stays skipped, the sample stays


def test_a_continuation_whose_replay_worker_died_is_finished_and_routed(fake_cascade, monkeypatch):
    judged = []
    monkeypatch.setattr("flywheel.collection.engine.evaluate_trajectory",
                        lambda trajectory, phone=None: judged.append(trajectory.pk))
    original = failed_trajectory("original")
    Repair.objects.create(trajectory=original, path="step", status="done")
    continuation = Trajectory.objects.create(query=original.query, line="ecdm", derived_from=original,
                                             status="running")
    Trajectory.objects.filter(pk=continuation.pk).update(started_at=timezone.now() - timedelta(minutes=5))
    assert ecdm.close_dead_continuations() == 1
    continuation.refresh_from_db()
    assert continuation.status == "interrupted" and "replay worker stopped" in continuation.stop_reason
    assert judged == [continuation.pk]
