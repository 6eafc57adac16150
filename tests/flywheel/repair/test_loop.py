"""The self-evolution loop (§2.5): its stage machine over the database (rollouts, verdicts,
attributions and repairs simulated), the round statistics and salvage yield, and its pages."""
import pytest
from django.core.exceptions import ValidationError
from django.db import transaction

from devices.models import WorkItem
from flywheel.collection.launch import refresh_progress
from flywheel.judging.destinations import route_trajectory
from flywheel.models import (
    Attribution,
    CollectionRun,
    EvolutionLoop,
    LoopRound,
    ModelVersion,
    Repair,
    RlQueryEntry,
    Trajectory,
)
from flywheel.repair import loop as loop_module
from flywheel.repair.loop import (
    NO_TRAINER,
    advance_loop,
    round_stats,
    salvage_path,
    start_loop,
    start_round,
)
from flywheel.repair.loop_control import cancel_loop
from tests.flywheel.collection.test_runs import make_query

# The pages, wherever the project includes them: this URLconf puts them at /loops/ on top of the site's.

pytestmark = pytest.mark.django_db


def pool_query(key, state="active"):
    query = make_query(key, tags=("loop",))
    RlQueryEntry.objects.create(query=query, state=state, channel="phase0")
    return query


def collect(run):
    """Every open work item of the run collected once (one trajectory each, not judged yet)."""
    made = {}
    for item in WorkItem.objects.filter(kind=f"collect:run:{run.pk}", status="queued").order_by("pk"):
        trajectory = Trajectory.objects.create(query_id=item.payload["query_id"], run=run, line="rl",
                                               status="completed", model_version=run.model_version)
        WorkItem.objects.filter(pk=item.pk).update(status="done", payload={**item.payload, "trajectories": [trajectory.pk]})
        made.setdefault(item.payload["query_id"], []).append(trajectory)
    return made


def attribute(trajectory, path="step"):
    return Attribution.objects.create(trajectory=trajectory, level=3, cause="perception_drift", first_bad_step=1,
                                      owner="ecdm", ecdm_path=path)


def repaired(trajectory, path="step", by="teacher", status="done", sample=True):
    """A repair of the trajectory; done ones with a sample (an ECDM-line trajectory)."""
    made = None
    if sample:
        made = Trajectory.objects.create(query=trajectory.query, line="ecdm", derived_from=trajectory,
                                         status="completed", verdict="true", destination="sft")
    return Repair.objects.create(trajectory=trajectory, path=path, step_index=1, status=status, sample=made,
                                 correction={"by": by, "action": {"action": "click", "x": 1, "y": 2}} if by else None)


def current_round(loop):
    return loop.rounds.order_by("-number").first()


@pytest.fixture(autouse=True)
def no_trainer(settings):
    """These tests drive the loop's stages by hand: no trainer unless a test plugs one in."""
    settings.EVOLUTION_TRAINER = ""


@pytest.fixture
def manager(role_users):
    return role_users["manager"]


@pytest.fixture
def two_queries():
    return pool_query("loop-a"), pool_query("loop-b")


def test_a_loop_needs_something_to_roll_out(manager):
    with pytest.raises(ValidationError, match="Bank Phase-0 queries"):
        start_loop(manager, None, {"rounds": 1})
    pool_query("retired", state="retired")
    with pytest.raises(ValidationError, match="no active or banked"):
        start_loop(manager, None, {"rounds": 1})
    with pytest.raises(ValidationError, match="group size must be 1–100"):
        start_loop(manager, None, {"group_size": 0})
    with pytest.raises(ValidationError, match="whole number"):
        start_loop(manager, None, {"rounds": "two"})
    assert not EvolutionLoop.objects.exists() and not CollectionRun.objects.exists()


def test_a_round_goes_rollout_judging_ecdm_and_stops_before_training(manager, two_queries):
    solved, hard = two_queries
    loop = start_loop(manager, None, {"rounds": 2, "group_size": 2, "max_queries": 10, "phones": 2})
    assert loop.status == "running" and loop.model_version.name  # the built-in offline policy
    first = current_round(loop)
    run = first.rollout_run
    assert first.number == 1 and first.stage == "rollout" and run.line == "rl"
    assert run.total == 4 and run.config["repeats"] == 2 and run.config["phones"] == 2
    assert run.model_version == loop.model_version and run.query_filter == {"pool": "rl", "limit": 10}
    assert "collected 0 of 4" in loop.state and "waiting for the phones" in loop.state

    for _ in range(3):  # beat asks again and again: still one round, one run
        advance_loop(loop.pk)
    assert LoopRound.objects.filter(loop=loop).count() == 1 and CollectionRun.objects.count() == 1

    made = collect(run)
    advance_loop(loop.pk)  # the run's progress is not refreshed yet: still rolling out
    assert current_round(loop).stage == "rollout"
    good, also_good = made[solved.pk]
    wrong, broken = made[hard.pk]
    route_trajectory(good, "true")
    route_trajectory(also_good, "true")
    route_trajectory(wrong, "false")
    route_trajectory(broken, "undetermined")
    refresh_progress(run.pk)  # the run is done; its groups metabolise where they can
    loop = advance_loop(loop.pk)
    first.refresh_from_db()
    assert first.stage == "judging"
    assert "1 Undetermined rollout(s) waiting for a person's adjudication" in loop.state
    assert "1 of 1 failures not attributed yet" in loop.state
    # a loop nobody attends (wait_for_people=0) does not wait for the adjudication; the rest holds it
    EvolutionLoop.objects.filter(pk=loop.pk).update(config={**loop.config, "wait_for_people": 0})
    loop = advance_loop(loop.pk)
    assert "Undetermined" not in loop.state and "1 of 1 failures not attributed yet" in loop.state
    EvolutionLoop.objects.filter(pk=loop.pk).update(config={**loop.config, "wait_for_people": 1})

    route_trajectory(broken, "env_error", reason="network off")  # a person: environment issue
    attribute(wrong)
    loop = advance_loop(loop.pk)
    assert "1 of 2 failures not attributed yet" in loop.state
    attribute(broken, path="env")
    step = repaired(wrong, status="pending", sample=False)
    env = repaired(broken, path="env", by=None, status="pending", sample=False)
    loop = advance_loop(loop.pk)
    first.refresh_from_db()
    assert first.stage == "ecdm" and "waiting for 2 repair(s)" in loop.state

    Repair.objects.filter(pk=env.pk).update(status="needs_human", human_fallback=True)
    sample = Trajectory.objects.create(query=hard, line="ecdm", derived_from=wrong, status="completed", verdict="true")
    Repair.objects.filter(pk=step.pk).update(status="done", sample=sample, correction={"by": "teacher"})
    loop = advance_loop(loop.pk)
    first.refresh_from_db()
    assert first.stage == "awaiting_training"
    assert NO_TRAINER in loop.state and "derived from" in loop.state and loop.status == "running"
    assert first.stats["failed"] == 2 and first.stats["salvaged"] == {"step": 1, "rqa": 0, "human": 0, "env": 0}
    assert first.stats["salvage_yield"] == 0.5 and first.stats["pools_at_start"]["rl_live"] == 2
    assert first.stats["metabolism"] == {"retire": 1}  # the other group waits for its re-collection
    assert first.pool_sizes["rl_retired"] == 1

    # A person repairs the pop-up case later: the round's yield grows while the loop waits.
    human_sample = Trajectory.objects.create(query=hard, line="ecdm", derived_from=broken, status="completed")
    Repair.objects.filter(pk=env.pk).update(status="done", sample=human_sample, correction={"by": "human"})
    advance_loop(loop.pk)
    first.refresh_from_db()
    assert first.stage == "awaiting_training" and first.stats["salvage_yield"] == 1.0
    assert first.stats["salvaged"]["env"] == 1

    # Training happened elsewhere: M(1), derived from M(0), starts round 2 on it.
    m1 = ModelVersion.objects.create(name="M1", kind="offline", parent=loop.model_version)
    loop = advance_loop(loop.pk)
    first.refresh_from_db()
    second = current_round(loop)
    assert first.stage == "done" and first.finished_at and "M(t+1) = M1" in first.detail
    assert second.number == 2 and second.model_version == m1 and second.rollout_run.model_version == m1
    assert loop.model_version == m1 and second.rollout_run.total == 2  # the solved query was retired
    assert CollectionRun.objects.count() == 2


def test_the_loop_ends_after_its_rounds_or_when_the_pool_is_exhausted(manager, two_queries):
    loop = start_loop(manager, None, {"rounds": 1, "group_size": 1})
    run = current_round(loop).rollout_run
    for trajectories in collect(run).values():
        route_trajectory(trajectories[0], "true")
    refresh_progress(run.pk)  # both queries mastered: retired
    loop = advance_loop(loop.pk)
    assert current_round(loop).stage == "awaiting_training"
    assert current_round(loop).stats["salvage_yield"] is None  # no failures to salvage
    ModelVersion.objects.create(name="M1 only", parent=loop.model_version)
    loop = advance_loop(loop.pk)
    assert loop.status == "done" and "done: 1 round" in loop.state and "M1 only" in loop.state
    assert advance_loop(loop.pk).status == "done" and loop.rounds.count() == 1

    with pytest.raises(ValidationError):  # every query retired: nothing to start on
        start_loop(manager, None, {"rounds": 3, "group_size": 1})
    pool_query("loop-c")
    again = start_loop(manager, None, {"rounds": 3, "group_size": 1})
    run = current_round(again).rollout_run
    route_trajectory(next(iter(collect(run).values()))[0], "true")
    refresh_progress(run.pk)
    ModelVersion.objects.create(name="M1b", parent=again.model_version)
    again = advance_loop(again.pk)
    assert again.status == "done" and "RL pool is exhausted" in again.state and again.rounds.count() == 1


def test_a_crash_while_launching_leaves_nothing_and_the_next_step_launches(manager, two_queries, monkeypatch):
    real = loop_module.launch_run

    def broken(*args, **kwargs):
        real(*args, **kwargs)
        raise RuntimeError("broker went away")

    monkeypatch.setattr(loop_module, "launch_run", broken)
    loop = start_loop(manager, None, {"rounds": 1, "group_size": 1})
    assert loop.status == "queued" and "broker went away" in loop.state and "tried again" in loop.state
    assert not LoopRound.objects.exists() and not CollectionRun.objects.exists() and not WorkItem.objects.exists()
    monkeypatch.setattr(loop_module, "launch_run", real)
    loop = advance_loop(loop.pk)
    assert loop.status == "running" and LoopRound.objects.count() == 1 and CollectionRun.objects.count() == 1


def test_a_round_number_is_made_once_with_its_one_run(manager, two_queries):
    loop = start_loop(manager, None, {"rounds": 2, "group_size": 1})
    assert loop.rounds.count() == 1 and CollectionRun.objects.count() == 1
    # Another step that read the loop before round 1 existed tries to make it too.
    assert start_round(loop, 1, loop.model_version) is None
    assert loop.rounds.count() == 1 and CollectionRun.objects.count() == 1 and WorkItem.objects.count() == 2


def trainable():
    """A model with weights a trainer could train (the rule policy has none)."""
    return ModelVersion.objects.create(name="m0-weights", kind="compact", artifact="/tmp/m0-weights")


def fake_trainer(loop_round):
    """A trainer plugged in by settings.EVOLUTION_TRAINER (the training issue's contract)."""
    fake_trainer.calls.append(loop_round.pk)
    if len(fake_trainer.calls) == 1:
        return {"status": "running", "detail": "SFT on 3 new samples, epoch 1"}
    if len(fake_trainer.calls) == 2:
        raise ConnectionError("trainer host down")
    model = ModelVersion.objects.create(name=f"trained-{loop_round.pk}", parent=loop_round.model_version)
    return {"status": "done", "model_version": model.pk}


def test_a_plugged_trainer_trains_each_round_and_the_next_round_rolls_its_model_out(manager, two_queries, settings):
    settings.EVOLUTION_TRAINER = "tests.flywheel.repair.test_loop.fake_trainer"
    fake_trainer.calls = []
    loop = start_loop(manager, trainable(), {"rounds": 2, "group_size": 1, "max_queries": 1})  # round 2: loop-b
    run = current_round(loop).rollout_run
    for trajectories in collect(run).values():
        route_trajectory(trajectories[0], "true")
    refresh_progress(run.pk)
    loop = advance_loop(loop.pk)
    first = current_round(loop)
    assert first.stage == "training" and "SFT on 3 new samples" in loop.state
    assert first.stats["training"]["status"] == "running"
    loop = advance_loop(loop.pk)
    assert "the trainer failed (ConnectionError: trainer host down); asked again" in loop.state
    assert current_round(loop).number == 1
    loop = advance_loop(loop.pk)
    first.refresh_from_db()
    assert first.stage == "done" and loop.model_version.name == f"trained-{first.pk}"
    assert current_round(loop).number == 2 and current_round(loop).rollout_run.model_version == loop.model_version
    assert fake_trainer.calls == [first.pk] * 3


def pausing_trainer(loop_round):
    """A trainer that needs a person once (a checkpoint that cannot be served), then trains."""
    pausing_trainer.calls.append(loop_round.pk)
    if len(pausing_trainer.calls) == 1:
        return {"status": "paused", "detail": "M1 cannot be served: config.json is missing"}
    model = ModelVersion.objects.create(name=f"served-{loop_round.pk}", parent=loop_round.model_version)
    return {"status": "done", "model_version": model}


def test_a_trainer_pauses_the_loop_with_its_reason_and_a_person_resumes_it(manager, two_queries, settings, client,
                                                                          role_users):
    settings.EVOLUTION_TRAINER = "tests.flywheel.repair.test_loop.pausing_trainer"
    pausing_trainer.calls = []
    loop = start_loop(manager, trainable(), {"rounds": 1, "group_size": 1, "max_queries": 1})
    run = current_round(loop).rollout_run
    for trajectories in collect(run).values():
        route_trajectory(trajectories[0], "true")
    refresh_progress(run.pk)
    loop = advance_loop(loop.pk)
    assert loop.status == "paused" and "config.json is missing" in loop.state
    assert current_round(loop).stage == "training"
    for _ in range(2):  # beat does not move a paused loop, nor ask its trainer again
        loop = advance_loop(loop.pk)
    assert loop.status == "paused" and pausing_trainer.calls == [current_round(loop).pk]
    client.force_login(manager)
    page = client.get(f"/loops/{loop.pk}/").content.decode()
    assert 'data-testid="loop-resume"' in page and "config.json is missing" in page
    answer = client.post(f"/loops/{loop.pk}/resume/", follow=True).content.decode()
    loop.refresh_from_db()
    assert loop.status == "done" and "served-" in loop.state and "resumed" in answer
    again = client.post(f"/loops/{loop.pk}/resume/", follow=True).content.decode()
    assert "not paused" in again
    for role in ("annotator", "adjudicator", None):
        client.force_login(role_users[role])
        assert client.post(f"/loops/{loop.pk}/resume/").status_code == 403


def test_a_paused_loop_can_be_cancelled(manager, two_queries, settings):
    settings.EVOLUTION_TRAINER = "tests.flywheel.repair.test_loop.pausing_trainer"
    pausing_trainer.calls = []
    loop = start_loop(manager, trainable(), {"rounds": 2, "group_size": 1, "max_queries": 1})
    run = current_round(loop).rollout_run
    for trajectories in collect(run).values():
        route_trajectory(trajectories[0], "true")
    refresh_progress(run.pk)
    assert advance_loop(loop.pk).status == "paused"
    loop = cancel_loop(loop, user=manager)
    assert loop.status == "cancelled" and current_round(loop).stage == "failed"


def test_a_loop_set_to_train_elsewhere_waits_for_a_model_even_with_a_trainer(manager, two_queries, settings):
    settings.EVOLUTION_TRAINER = "tests.flywheel.repair.test_loop.fake_trainer"
    fake_trainer.calls = []
    loop = start_loop(manager, None, {"rounds": 1, "group_size": 1, "train": 0})
    run = current_round(loop).rollout_run
    for trajectories in collect(run).values():
        route_trajectory(trajectories[0], "true")
    refresh_progress(run.pk)
    loop = advance_loop(loop.pk)
    assert current_round(loop).stage == "awaiting_training" and "trained outside it" in loop.state
    assert fake_trainer.calls == []


def test_a_missing_trainer_is_said_clearly(manager, two_queries, settings):
    settings.EVOLUTION_TRAINER = "no.such.module.train"
    loop = start_loop(manager, None, {"rounds": 1, "group_size": 1})
    run = current_round(loop).rollout_run
    for trajectories in collect(run).values():
        route_trajectory(trajectories[0], "true")
    refresh_progress(run.pk)
    loop = advance_loop(loop.pk)
    assert current_round(loop).stage == "awaiting_training" and "does not import" in loop.state


def test_cancelling_stops_the_rollout_and_a_cancelled_run_fails_its_round(manager, two_queries):
    loop = start_loop(manager, None, {"rounds": 2, "group_size": 1})
    run = current_round(loop).rollout_run
    loop = cancel_loop(loop, user=manager)
    run.refresh_from_db()
    assert loop.status == "cancelled" and "cancelled by manager-user in round 1" in loop.state
    assert run.status == "cancelled" and not WorkItem.objects.filter(status="queued").exists()
    assert current_round(loop).stage == "failed" and "Rollout" in current_round(loop).detail
    assert advance_loop(loop.pk).status == "cancelled" and CollectionRun.objects.count() == 1

    other = start_loop(manager, None, {"rounds": 2, "group_size": 1})
    from flywheel.collection.launch import cancel_run

    cancel_run(current_round(other).rollout_run)  # someone cancelled the run on the runs page
    other = advance_loop(other.pk)
    assert other.status == "failed" and "was cancelled" in other.state and current_round(other).stage == "failed"


def test_salvage_counts_each_failure_once_under_its_first_repair_with_a_sample(manager):
    query = pool_query("stats")
    loop = start_loop(manager, None, {"rounds": 1, "group_size": 6})
    run = current_round(loop).rollout_run
    t = collect(run)[query.pk]
    for trajectory, verdict in zip(t, ["false", "false", "env_error", "false", "false", "true"]):
        route_trajectory(trajectory, verdict)
    repaired(t[0], "step", "teacher")
    repaired(t[0], "rqa", None)                       # a second sample of the same failure: not counted again
    repaired(t[1], "step", "human")                   # a person corrected the step
    repaired(t[2], "env", None)
    repaired(t[3], "rqa", None, status="failed", sample=False)
    repaired(t[3], "counterfactual", None, sample=False)
    repaired(t[4], "step", "teacher", status="needs_human", sample=False)
    Trajectory.objects.create(query=query, run=run, line="ecdm", status="completed", verdict="false")  # not a rollout
    stats = round_stats(current_round(loop))
    assert stats["rollouts"] == 6 and stats["failed"] == 5
    assert stats["salvaged"] == {"step": 1, "human": 1, "env": 1, "rqa": 0} and stats["salvaged_total"] == 3
    assert stats["salvage_yield"] == 0.6 and stats["yield_by_path"]["human"] == 0.2
    assert stats["repairs"] == {"done": 5, "failed": 1, "needs_human": 1}
    assert stats["dispatched"]["counterfactual"] == 1 and stats["attributed"] == 0
    assert salvage_path("step", "human") == "human" and salvage_path("step", None) == "step"
    assert salvage_path("rqa", "teacher") == "rqa" and salvage_path("env", "human") == "env"


# Pages -------------------------------------------------------------------------------------------

def test_the_pages_are_for_managers_only(client, role_users):
    for role in ("annotator", "adjudicator", None):
        client.force_login(role_users[role])
        assert client.get("/loops/").status_code == 403
        assert client.post("/loops/", {"rounds": "1"}).status_code == 403
    client.logout()
    assert client.get("/loops/").status_code == 302
    assert not EvolutionLoop.objects.exists()


def test_the_empty_page_says_how_to_start_and_refuses_an_empty_pool(client, manager):
    client.force_login(manager)
    page = client.get("/loops/").content.decode()
    assert "No loops yet" in page and "Bank Phase-0 queries" in page and "Start loop" in page
    assert "manage.py" not in page and 'data-testid="nothing-to-bank"' in page
    assert 'data-testid="empty-pool"' in page and NO_TRAINER in page
    answer = client.post("/loops/", {"rounds": "2", "group_size": "2"}, follow=True).content.decode()
    assert "Not started" in answer and "no active or banked query" in answer
    assert not EvolutionLoop.objects.exists()


def test_starting_watching_and_cancelling_a_loop_from_the_pages(client, manager, two_queries):
    client.force_login(manager)
    m0 = ModelVersion.objects.create(name="policy-m0", kind="offline")
    answer = client.post("/loops/", {"model_version": str(m0.pk), "rounds": "2", "group_size": "3",
                                     "max_queries": "1", "phones": "1", "max_steps": "10"})
    loop = EvolutionLoop.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/loops/{loop.pk}/"
    assert loop.model_version == m0 and loop.config["group_size"] == 3 and loop.created_by == manager
    run = current_round(loop).rollout_run
    assert run.total == 3  # one query (max_queries) × G = 3

    page = client.get(f"/loops/{loop.pk}/").content.decode()
    assert 'data-testid="round-1"' in page and f"run #{run.pk}" in page and "Cancel loop" in page
    assert 'hx-trigger="every 3s"' in page and "no failures" in page

    t = collect(run)
    for trajectory, verdict in zip(next(iter(t.values())), ["false", "false", "true"]):
        route_trajectory(trajectory, verdict)
        if verdict == "false":
            attribute(trajectory)
    repaired(Trajectory.objects.filter(run=run, verdict="false").first(), "step", "teacher")
    refresh_progress(run.pk)
    advance_loop(loop.pk)
    page = client.get(f"/loops/{loop.pk}/").content.decode()
    assert "Stopped before training" in page and NO_TRAINER in page and "50%" in page

    listing = client.get("/loops/").content.decode()
    assert str(loop) in listing and "No loops yet" not in listing

    client.post(f"/loops/{loop.pk}/cancel/")
    loop.refresh_from_db()
    assert loop.status == "cancelled"
    assert client.get(f"/loops/{loop.pk}/", HTTP_HX_REQUEST="true").status_code == 286  # htmx stops polling
    assert client.get("/loops/999999/").status_code == 404
    bad = client.post("/loops/", {"model_version": "abc"}, follow=True).content.decode()
    assert "no model version" in bad and EvolutionLoop.objects.count() == 1


def test_advancing_inside_an_outer_transaction_keeps_the_launch_atomic(manager, two_queries):
    with transaction.atomic():
        loop = start_loop(manager, None, {"rounds": 1, "group_size": 1})
    assert loop.rounds.get().rollout_run.total == 2


def test_a_loop_over_the_rule_policy_waits_for_a_model_made_elsewhere_even_with_a_trainer(manager, two_queries,
                                                                                        settings):
    settings.EVOLUTION_TRAINER = "tests.flywheel.repair.test_loop.fake_trainer"
    fake_trainer.calls = []
    loop = start_loop(manager, None, {"rounds": 1, "group_size": 1})   # M(0): the built-in offline policy
    run = current_round(loop).rollout_run
    for trajectories in collect(run).values():
        route_trajectory(trajectories[0], "true")
    refresh_progress(run.pk)
    loop = advance_loop(loop.pk)
    assert current_round(loop).stage == "awaiting_training" and "rule policy" in loop.state
    assert fake_trainer.calls == []


def test_the_page_says_how_rounds_train_when_a_trainer_is_set(client, manager, settings):
    settings.EVOLUTION_TRAINER = "tests.flywheel.repair.test_loop.fake_trainer"
    client.force_login(manager)
    page = client.get("/loops/").content.decode()
    assert "a served model trains by SFT on the round's snapshot" in page and NO_TRAINER not in page
