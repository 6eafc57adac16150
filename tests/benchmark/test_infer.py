"""Evaluation runs end to end on the virtual farm: infer → judge → metric, and what is not scored."""
import pytest

from benchmark import versions
from benchmark.infer import EvaluationRefused, launch_evaluation, resume_evaluation
from benchmark.judges import record_expert_verdict, rejudge_evaluation
from benchmark.models import BenchmarkItem, EvalResult, EvalRun, FrozenBenchmark
from devices.models import Device
from devices.registry import discover_devices
from flywheel.collection.driver import drive_host
from flywheel.collection.launch import launch_run, select_queries
from flywheel.models import CollectionRun, ModelVersion, Query, QueryLocked, SftEntry, Trajectory
from flywheel.policies import default_policy_version
from tests.benchmark.conftest import make_benchmark_query

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def phones(farm_settings, db):
    from devices.phone import PhoneConnection

    for serial in farm_settings.serials:
        PhoneConnection(farm_settings.address, serial).shell("settings put global bluetooth_on 0")
    discover_devices()
    return Device.objects.filter(adb_server=farm_settings.address)


def frozen_version(queries, manager, split="held_out", name="bt-bench"):
    benchmark = versions.create_version(name, "v1", {"size": len(queries)})
    for item in versions.add_queries(benchmark, queries, split=split):
        versions.review_item(item, manager, note="checked", decision="approve")
    return versions.freeze(benchmark, manager)


def test_a_run_infers_judges_unanimously_and_scores_without_touching_the_pools(phones, farm_settings, role_users):
    manager = role_users["manager"]
    queries = [make_benchmark_query(f"bt-{i}") for i in range(2)]
    benchmark = frozen_version(queries, manager)
    # Held out: no collection run draws these queries any more, whatever its filter says.
    assert not select_queries({"keys": ["bt-0", "bt-1"]}).exists()
    assert launch_run("automatic", {"keys": ["bt-0"]}, dispatch=False).total == 0

    evaluation = launch_evaluation(benchmark, default_policy_version(), split="held_out",
                                   config={"max_steps": 8, "phones": 2}, user=manager, dispatch=False)
    config = evaluation.config
    assert config["benchmark"]["content_hash"] == benchmark.content_hash
    assert config["model"]["name"] == default_policy_version().name and config["prompt_version"].startswith("protocol-")
    assert [j["name"] for j in config["judges"]] == ["terminal-state", "milestones", "path"]
    assert config["infer"]["anomaly_rates"] == {} and config["infer"]["teacher_takeover_after"] == 0
    assert {p["serial"] for p in config["phone_profiles"]} >= set(phones.values_list("serial", flat=True))

    drive_host(evaluation.collection_run_id, farm_settings.address, 2)
    evaluation.refresh_from_db()
    assert evaluation.status == "done" and evaluation.completed == 2, evaluation.scores
    results = list(evaluation.results.all())
    assert len(results) == 2
    for result in results:
        assert result.state == "scored", (result.votes, result.not_scored_reason)
        assert {v["judge"]: v["vote"] for v in result.votes} == {
            "terminal-state": "success", "milestones": "success", "path": "success"}
        assert result.outcome == "success" and result.partial_credit == 1.0
        assert all(r["passed"] for r in result.evidence["terminal"])
    assert evaluation.scores["sr"] == 1.0 and evaluation.scores["judge_agreement"] == 1.0
    assert evaluation.scores["by_dimension"]["explicitness"]["implicit"]["n"] == 2
    trajectories = Trajectory.objects.filter(run=evaluation.collection_run)
    assert trajectories.count() == 2 and {t.line for t in trajectories} == {"benchmark"}
    assert not SftEntry.objects.filter(trajectory__in=trajectories).exists()    # never into a pool
    # Their own destination, from the moment the run created them: never "not routed yet", never a
    # failure of the ledger, the dashboard or the salvage yield (issue #31).
    assert {t.destination for t in trajectories} == {"benchmark"}

    # Re-judging reads what inference stored: no new trajectory, the same verdicts, a new round.
    report = rejudge_evaluation(evaluation)
    assert report["judged"] == 2 and report["round"] == 2
    assert Trajectory.objects.filter(run=evaluation.collection_run).count() == 2
    assert {r.outcome for r in EvalResult.objects.filter(eval_run=evaluation)} == {"success"}
    assert EvalRun.objects.get(pk=evaluation.pk).config["rejudged"][0]["round"] == 2

    # An expert can override; the run's SR follows, and the override rate is reported.
    record_expert_verdict(results[0], "failure", manager, note="wrong page in fact")
    scores = EvalRun.objects.get(pk=evaluation.pk).scores
    assert scores["sr"] == 0.5 and scores["expert_override_rate"] == 1.0


def test_a_frozen_version_and_its_queries_do_not_change(db, role_users):
    manager = role_users["manager"]
    query = make_benchmark_query("frozen-q")
    benchmark = frozen_version([query], manager, split="open")
    with pytest.raises(FrozenBenchmark):
        benchmark.purpose = "changed"
        benchmark.save()
    item = BenchmarkItem.objects.get(benchmark=benchmark)
    with pytest.raises(FrozenBenchmark):
        item.labels = {"path_complexity": "complex"}
        item.save()
    with pytest.raises(FrozenBenchmark):
        item.delete()
    with pytest.raises(FrozenBenchmark):
        versions.add_queries(benchmark, [make_benchmark_query("late")])
    query = Query.objects.get(pk=query.pk)
    assert query.locked and item.snapshot["sha256"] and item.snapshot["text"] == query.text
    query.text = "Something else"
    with pytest.raises(QueryLocked):
        query.save()
    query.refresh_from_db()
    query.status = "done"
    query.save()  # what the query asks is locked, not its workflow state
    from annotation import review

    query.status = "review"
    query.save()
    with pytest.raises(review.ReviewConflict, match="frozen into a benchmark version"):
        review.edit(query.pk, review.version_of(query), manager, {"text": "Something else"})


def test_evaluation_refuses_a_draft_and_unknown_settings(db, role_users):
    manager = role_users["manager"]
    draft = versions.create_version("draft-bench", "v1", {})
    versions.add_queries(draft, [make_benchmark_query("d-1")])
    with pytest.raises(EvaluationRefused, match="not frozen"):
        launch_evaluation(draft, default_policy_version(), dispatch=False)
    with pytest.raises(versions.VersionError, match="not reviewed"):
        versions.freeze(draft, manager)
    frozen = frozen_version([make_benchmark_query("d-2")], manager, name="other")
    with pytest.raises(EvaluationRefused, match="unknown evaluation setting"):
        launch_evaluation(frozen, default_policy_version(), config={"temperature": 2}, dispatch=False)


def test_a_running_evaluation_is_scored_at_most_every_few_seconds_and_always_once_it_stops(db, role_users, monkeypatch):
    """Scoring reads every result of the run and a running run is refreshed twice per rollout; its scores
    are brought up to date every SCORE_EVERY_S (the beat's sweep always), and always when it stops."""
    from benchmark import infer, metric

    manager = role_users["manager"]
    benchmark = frozen_version([make_benchmark_query("sc-1")], manager, name="scoring")
    evaluation = launch_evaluation(benchmark, default_policy_version(), config={"phones": 1}, user=manager,
                                   dispatch=False)
    scored = []
    real = metric.score_evaluation
    monkeypatch.setattr(metric, "score_evaluation", lambda pk: scored.append(pk) or real(pk))
    clock = [1000.0]
    monkeypatch.setattr(infer.time, "monotonic", lambda: clock[0])

    infer.refresh_evaluation(evaluation.pk)
    assert EvalRun.objects.get(pk=evaluation.pk).status == "running" and len(scored) == 1
    infer.refresh_evaluation(evaluation.pk)          # a second rollout at once: not scored again yet
    assert len(scored) == 1
    infer.sweep_evaluations()                        # the sweep brings the scores up to date
    assert len(scored) == 2
    clock[0] += infer.SCORE_EVERY_S
    infer.refresh_evaluation(evaluation.pk)
    assert len(scored) == 3
    infer.refresh_evaluation(evaluation.pk)
    assert len(scored) == 3
    EvalRun.objects.filter(pk=evaluation.pk).update(status="paused")
    infer.refresh_evaluation(evaluation.pk)          # no longer running: scored every time
    infer.refresh_evaluation(evaluation.pk)
    assert len(scored) == 5 and EvalRun.objects.get(pk=evaluation.pk).scores["scored"] == 0


def test_a_task_already_done_before_acting_is_flagged_and_not_scored(phones, farm_settings, role_users):
    # The success check passes right after the reset, before any action: android_world's known flaw.
    query = make_benchmark_query("already", text="Turn Bluetooth off", verification={
        "terminal": [{"check": "settings", "namespace": "global", "key": "bluetooth_on", "equals": "0"}],
        "milestones": []})
    benchmark = frozen_version([query], role_users["manager"])
    evaluation = launch_evaluation(benchmark, default_policy_version(), split="held_out",
                                   config={"max_steps": 4, "phones": 1}, dispatch=False)
    drive_host(evaluation.collection_run_id, farm_settings.address, 1)
    result = EvalResult.objects.get(eval_run=evaluation)
    assert result.state == "not_scored" and "initial-state check" in result.not_scored_reason
    evaluation.refresh_from_db()
    assert evaluation.scores["scored"] == 0 and evaluation.scores["sr"] is None
    assert evaluation.scores["not_scored"] == {"initial_state": 1}


def test_an_item_whose_environment_cannot_be_set_up_is_not_executable_not_failed(phones, farm_settings, role_users):
    # The item's preconditions are the query's prerequisites: enforced at evaluation, on every rollout.
    query = make_benchmark_query("needs-card", prerequisites=["a bank card bound"])
    benchmark = frozen_version([query], role_users["manager"])
    assert benchmark.items.get().environment["preconditions"][0]["text"] == "a bank card bound"
    evaluation = launch_evaluation(benchmark, default_policy_version(), split="held_out",
                                   config={"max_steps": 4, "phones": 1}, dispatch=False)
    drive_host(evaluation.collection_run_id, farm_settings.address, 1)
    result = EvalResult.objects.get(eval_run=evaluation)
    assert result.state == "not_scored" and result.outcome == ""
    assert result.not_scored_reason == "not executable here: no setup recipe meets: a bank card bound"
    assert result.trajectory.status == "not_executable" and result.trajectory.steps.count() == 0
    evaluation.refresh_from_db()
    assert evaluation.scores["scored"] == 0 and evaluation.scores["not_scored"] == {"not_executable": 1}


def test_an_environment_break_is_re_collected_not_scored(phones, farm_settings, role_users):
    query = make_benchmark_query("env-break")
    benchmark = frozen_version([query], role_users["manager"])
    evaluation = launch_evaluation(benchmark, default_policy_version(), split="held_out",
                                   config={"max_steps": 8, "phones": 1}, dispatch=False)
    # The first rollout meets a reset that fails (the environment, not the model).
    from flywheel.collection import engine

    original = engine.reset_phone
    calls = {"n": 0}

    def failing_once(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise engine.ResetError("the launcher did not come back")
        return original(*args, **kwargs)

    engine.reset_phone = failing_once
    try:
        drive_host(evaluation.collection_run_id, farm_settings.address, 1)
    finally:
        engine.reset_phone = original
    results = list(EvalResult.objects.filter(eval_run=evaluation).order_by("attempt"))
    assert [r.state for r in results] == ["not_scored", "scored"], [r.not_scored_reason for r in results]
    assert results[0].superseded and "re-collected" in results[0].not_scored_reason
    assert results[1].trajectory.recollection_of_id == results[0].trajectory_id
    evaluation.refresh_from_db()
    assert evaluation.status == "done" and evaluation.scores["scored"] == 1
    assert evaluation.scores["recollected"] == 1 and evaluation.scores["sr"] == 1.0


OPEN_SETTINGS = ("[Observation] The home screen\n[Plan] open Settings\n[Decision] Open the Settings app\n"
                 "[Memory]\n<tool_call>{\"action\": \"open\", \"app\": \"Settings\"}</tool_call>")
DONE = ("[Observation] The Settings list\n[Plan] done\n[Decision] The task is complete\n[Memory]\n"
        "<tool_call>{\"action\": \"terminate\", \"status\": \"success\"}</tool_call>")
SETTINGS_OPEN = {"terminal": [{"check": "foreground", "package": "com.android.settings"}],
                 "milestones": [{"name": "settings list", "text": "Bluetooth"}]}


def serve_on(port, stub_class):
    """A fresh stub bound to the port the dead one used (the endpoint comes back at the same URL)."""
    from http.server import ThreadingHTTPServer

    stub = stub_class()
    handler = stub.server.RequestHandlerClass
    stub.server.server_close()
    ThreadingHTTPServer.allow_reuse_address = True
    stub.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    import threading

    stub.thread = threading.Thread(target=stub.server.serve_forever, daemon=True)
    return stub


def test_a_model_endpoint_that_dies_mid_run_pauses_the_run_and_it_resumes(phones, farm_settings, role_users):
    from tests.flywheel.openai_stub import StubOpenAI

    queries = [make_benchmark_query(f"ep-{i}", text="Open Settings", verification=SETTINGS_OPEN) for i in range(2)]
    benchmark = frozen_version(queries, role_users["manager"])
    stub = StubOpenAI().__enter__()
    port = stub.server.server_address[1]
    version = ModelVersion.objects.create(name="dying-policy", kind="endpoint", endpoint_url=stub.url,
                                          served_model_name=stub.model, sampling={"retries": 0, "timeout_s": 5})
    stub.replies += [(200, stub.chat_reply(OPEN_SETTINGS), 0), (200, stub.chat_reply(DONE), 0)]
    evaluation = launch_evaluation(benchmark, version, split="held_out", config={"max_steps": 4, "phones": 1},
                                   dispatch=False)
    original_finish = __import__("benchmark.infer", fromlist=["x"]).refresh_evaluation

    def die_after_the_first_rollout(evaluation_id):
        original_finish(evaluation_id)
        if stub.thread.is_alive() and EvalResult.objects.filter(eval_run_id=evaluation_id).exists():
            stub.__exit__(None, None, None)          # the endpoint dies mid-run

    import benchmark.infer as infer

    infer.refresh_evaluation = die_after_the_first_rollout
    try:
        drive_host(evaluation.collection_run_id, farm_settings.address, 1)
    finally:
        infer.refresh_evaluation = original_finish
    evaluation.refresh_from_db()
    assert evaluation.status == "paused" and "endpoint" in evaluation.status_reason
    assert CollectionRun.objects.get(pk=evaluation.collection_run_id).status == "paused"
    results = list(EvalResult.objects.filter(eval_run=evaluation).order_by("pk"))
    assert len(results) == 2 and results[0].state in ("scored", "split"), results[0].votes
    assert results[1].state == "not_scored" and "stopped answering" in results[1].not_scored_reason
    assert "still does not answer" in resume_evaluation(evaluation)         # the endpoint is still down
    assert drive_host(evaluation.collection_run_id, farm_settings.address, 1)["phones"] == 0   # paused: no work

    with serve_on(port, StubOpenAI) as revived:
        revived.replies += [(200, revived.chat_reply(OPEN_SETTINGS), 0), (200, revived.chat_reply(DONE), 0)]
        assert resume_evaluation(evaluation) == ""
        drive_host(evaluation.collection_run_id, farm_settings.address, 1)
    evaluation.refresh_from_db()
    assert evaluation.status == "done", (evaluation.status, evaluation.scores)
    current = EvalResult.objects.filter(eval_run=evaluation, superseded=False)
    assert current.count() == 2 and not current.filter(state__in=["running", "not_scored"]).exists()
    assert evaluation.scores["not_scored"] == {} and evaluation.scores["recollected"] == 1


def test_a_phone_lost_mid_task_is_re_collected_on_another_phone_not_scored_as_a_failure(
        phones, farm_settings, role_users, monkeypatch):
    import threading
    import time

    from django.db import connection

    import flywheel.collection.driver as driver
    from flywheel.policies import policy_for
    from tests.flywheel.collection.test_worker import farm_control, wait_for

    class Slow:  # the offline policy, one second a step, so the phone can drop mid-task
        def __init__(self, inner):
            self.inner = inner
            self.name = getattr(inner, "name", "slow")

        def propose(self, state):
            time.sleep(1.0)
            return self.inner.propose(state)

    monkeypatch.setattr(driver, "policy_for", lambda version, **options: Slow(policy_for(version, **options)))
    benchmark = frozen_version([make_benchmark_query("lost")], role_users["manager"])
    evaluation = launch_evaluation(benchmark, default_policy_version(), split="held_out",
                                   config={"max_steps": 8, "phones": 1}, dispatch=False)
    first, second = phones.order_by("serial")[:2]
    Device.objects.filter(pk__in=[d.pk for d in phones if d.pk != first.pk]).update(status="offline")

    def drop_when_started():
        try:
            wait_for(lambda: Trajectory.objects.filter(run_id=evaluation.collection_run_id, device=first,
                                                       steps__index__gte=1).exists(), what="the first phone to act")
            farm_control(farm_settings, f"host:sim-disconnect:{first.serial}")
        finally:
            connection.close()

    dropper = threading.Thread(target=drop_when_started)
    dropper.start()
    try:
        drive_host(evaluation.collection_run_id, farm_settings.address, 1)
        dropper.join(60)
        lost = EvalResult.objects.get(eval_run=evaluation)
        assert lost.state == "not_scored" and "phone lost" in lost.not_scored_reason
        assert Device.objects.get(pk=first.pk).status == "quarantined"
        Device.objects.filter(pk=second.pk).update(status="idle")
        drive_host(evaluation.collection_run_id, farm_settings.address, 1)
    finally:
        farm_control(farm_settings, f"host:sim-connect:{first.serial}")
    evaluation.refresh_from_db()
    results = list(EvalResult.objects.filter(eval_run=evaluation).order_by("attempt"))
    assert [r.attempt for r in results] == [1, 2] and results[0].superseded
    assert results[1].state == "scored" and results[1].trajectory.device_id == second.pk
    assert evaluation.status == "done" and evaluation.scores["scored"] == 1 and evaluation.scores["sr"] == 1.0


def test_a_launched_evaluation_is_carried_out_by_a_real_worker(phones, farm_settings, role_users,
                                                               celery_worker_process):
    from tests.flywheel.collection.test_worker import wait_for

    benchmark = frozen_version([make_benchmark_query(f"w-{i}") for i in range(2)], role_users["manager"])
    evaluation = launch_evaluation(benchmark, default_policy_version(), split="held_out",
                                   config={"max_steps": 8, "phones": 2}, user=role_users["manager"])
    wait_for(lambda: EvalRun.objects.get(pk=evaluation.pk).status == "done", timeout=120, what="the evaluation")
    evaluation.refresh_from_db()
    assert evaluation.completed == 2 and evaluation.scores["scored"] == 2
    assert evaluation.started_at and evaluation.finished_at


def test_a_rollout_left_by_a_dead_worker_is_recovered_and_the_run_resumes(phones, farm_settings, role_users,
                                                                           monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from devices import scheduling
    from flywheel.collection.recovery import recover_interrupted

    benchmark = frozen_version([make_benchmark_query("dead-worker")], role_users["manager"])
    evaluation = launch_evaluation(benchmark, default_policy_version(), split="held_out",
                                   config={"max_steps": 8, "phones": 1}, dispatch=False)
    run = evaluation.collection_run
    # A worker took the item, started the rollout and died (no lease is alive any more).
    from devices import leases
    from devices.models import Lease

    device = phones.first()
    lease = leases.acquire(device, holder=f"collection:run:{run.pk}", ttl=timedelta(seconds=30), purpose="test")
    Lease.objects.filter(pk=lease.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    item = scheduling.pull_next(device, kinds=[run.work_kind])
    orphan = Trajectory.objects.create(query=item and benchmark.items.get().query, run=run, device=device,
                                       line="benchmark", model_version=run.model_version, status="running")
    Trajectory.objects.filter(pk=orphan.pk).update(started_at=timezone.now() - timedelta(minutes=10))
    # Recovery sends the run's driver again; this test drives the host itself below, so the
    # dispatch is recorded rather than sent (a Celery worker another test left running would race it).
    from flywheel.collection import launch
    dispatched = []
    monkeypatch.setattr(launch, "dispatch_run", dispatched.append)
    assert recover_interrupted()["redispatched"] == [run.pk]
    assert dispatched == [run]
    orphan.refresh_from_db()
    assert orphan.status == "interrupted" and orphan.destination == "benchmark"  # recorded by its evaluation
    first = EvalResult.objects.get(trajectory=orphan)
    assert first.state == "not_scored" and "re-collected" in first.not_scored_reason
    assert run.work_items().filter(status="queued").exists()
    drive_host(run.pk, farm_settings.address, 1)
    evaluation.refresh_from_db()
    assert evaluation.status == "done" and evaluation.scores["scored"] == 1, evaluation.scores


def test_held_out_queries_are_drawn_by_no_line(db, role_users):
    from flywheel.collection.semi_auto import next_query_for
    from flywheel.pools.rl import bank_phase0

    held = make_benchmark_query("held", known_path={"steps": [{"action": "click"}] * 12})
    open_query = make_benchmark_query("open", known_path={"steps": [{"action": "click"}] * 12})
    benchmark = versions.create_version("split-bench", "v1", {})
    versions.add_queries(benchmark, [held], split="held_out")
    versions.add_queries(benchmark, [open_query], split="open")
    assert Query.objects.get(pk=held.pk).evaluation_only and not Query.objects.get(pk=open_query.pk).evaluation_only
    assert set(select_queries({}).values_list("key", flat=True)) == {"open"}
    for line in ("automatic", "schema", "external", "rl"):
        assert launch_run(line, {"keys": ["held"]}, dispatch=False).total == 0
    assert next_query_for(role_users["annotator"]).key == "open"
    assert next_query_for(role_users["annotator"]) is None          # the held-out one is never handed out
    from flywheel.models import RlQueryEntry

    bank_phase0()
    assert not RlQueryEntry.objects.filter(query=held).exists()


def test_a_vlm_judge_added_later_rejudges_without_inference_and_a_split_goes_to_an_expert(
        phones, farm_settings, role_users, settings):
    import json

    from benchmark.judges import judge_roster
    from tests.flywheel.openai_stub import StubOpenAI

    benchmark = frozen_version([make_benchmark_query("vlm-q")], role_users["manager"])
    evaluation = launch_evaluation(benchmark, default_policy_version(), split="held_out",
                                   config={"max_steps": 8, "phones": 1}, dispatch=False)
    drive_host(evaluation.collection_run_id, farm_settings.address, 1)
    assert EvalRun.objects.get(pk=evaluation.pk).scores["sr"] == 1.0
    with StubOpenAI() as stub:
        ModelVersion.objects.create(name="vlm-judge", kind="endpoint", endpoint_url=stub.url,
                                    served_model_name=stub.model)
        settings.BENCHMARK_VLM_JUDGES = ["vlm-judge"]
        assert [j["name"] for j in judge_roster()][-1] == "vlm:vlm-judge"
        stub.replies.append((200, stub.chat_reply(json.dumps({"vote": "false", "rationale": "wrong page"})), 0))
        report = rejudge_evaluation(evaluation)
    assert report["judged"] == 1 and len(stub.requests) == 1
    assert Trajectory.objects.filter(run=evaluation.collection_run).count() == 1   # no inference again
    result = EvalResult.objects.get(eval_run=evaluation)
    assert result.state == "split" and result.judge_verdict == "split"
    assert {v["judge"]: v["vote"] for v in result.votes}["vlm:vlm-judge"] == "failure"
    evaluation.refresh_from_db()
    assert evaluation.scores["waiting_for_expert"] == 1 and evaluation.scores["sr"] is None
    assert evaluation.scores["judge_agreement"] == 0.0
    assert [j["name"] for j in evaluation.config["judges"]][-1] == "vlm:vlm-judge"   # the new roster is pinned
    from flywheel.access import trajectories_visible_to

    # The expert (an adjudicator) may open the split trajectory; an annotator may not.
    assert trajectories_visible_to(role_users["adjudicator"]).filter(pk=result.trajectory_id).exists()
    assert not trajectories_visible_to(role_users["annotator"]).filter(pk=result.trajectory_id).exists()
    record_expert_verdict(result, "success", role_users["adjudicator"], note="the page is right")
    evaluation.refresh_from_db()
    assert evaluation.scores["sr"] == 1.0 and evaluation.scores["expert_override_rate"] == 0
