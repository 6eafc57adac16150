"""The step-level reward model (issue #39): labels from the judged facts (hand-computed cases), the
band that makes eq. 4's reward, the dataset read from the database, the trainer, scoring, and the
pages (never offered as a policy; its model page reports held-out figures)."""
import html
import io
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from django.utils import timezone

from flywheel.blobs import store_blob
from flywheel.judging.pipeline import trajectory_view
from flywheel.judging.system_b import system_b_vote
from flywheel.models import Adjudication, App, Attribution, ModelVersion, Query, Step, Trajectory, Vote
from flywheel.policies import PolicyError, policy_for, unservable_reason
from training import reward_data
from training.reward_features import FEATURES, in_thousandths, recorded_size, screen_size
from training.reward_model import (
    launch_reward_model_training,
    metrics_of,
    page_summary,
    prm_step_accuracy,
    reward_model_step_rewards,
    train_reward_model,
)
from training.rules.process_reward import (
    JudgedStep,
    JudgedTrajectory,
    LabelSource,
    Outcome,
    StepLabel,
    judged_step_labels,
    process_reward,
    step_confusion,
)
from training.runs import RunError, create_run
from training.step_judge import judge_trajectory
from training.tasks import train_reward_model_task

SETTINGS, NOTES, LAUNCHER = "com.android.settings", "com.example.notes", "com.android.launcher3"
SCREEN = (1080, 2400)
S = [JudgedStep(i) for i in range(5)]
R = LabelSource


def right(source):
    return StepLabel(1, source)


def wrong(source):
    return StepLabel(-1, source)


# -- the labels, by hand -------------------------------------------------------------------------------

def test_every_unmasked_step_of_a_verified_success_is_right():
    steps = (JudgedStep(0), JudgedStep(1, masked=True), JudgedStep(2))
    assert judged_step_labels(JudgedTrajectory(steps, Outcome.VERIFIED_SUCCESS)) == {
        0: right(R.VERIFIED_SUCCESS), 2: right(R.VERIFIED_SUCCESS)}


def test_a_failure_labels_its_golden_prefix_its_first_error_and_a_later_milestone_only():
    facts = JudgedTrajectory(tuple(S), Outcome.FAILURE, milestone_steps=frozenset({0, 3}), first_error_step=2)
    assert judged_step_labels(facts) == {0: right(R.GOLDEN_PREFIX), 1: right(R.GOLDEN_PREFIX),
                                         2: wrong(R.FIRST_ERROR), 3: right(R.MILESTONE)}


def test_a_wrong_judgement_outweighs_a_right_one_on_the_same_step():
    facts = JudgedTrajectory(tuple(S[:3]), Outcome.FAILURE, milestone_steps=frozenset({1}), first_error_step=1)
    assert judged_step_labels(facts) == {0: right(R.GOLDEN_PREFIX), 1: wrong(R.FIRST_ERROR)}
    blocked = (JudgedStep(0), JudgedStep(1, blocked=True), JudgedStep(2))
    assert judged_step_labels(JudgedTrajectory(blocked, Outcome.ADJUDICATED_SUCCESS)) == {
        0: right(R.ADJUDICATED_SUCCESS), 1: wrong(R.SAFETY_VETO), 2: right(R.ADJUDICATED_SUCCESS)}


def test_a_success_claim_ending_a_failure_is_wrong_and_only_then():
    claimed = JudgedTrajectory(tuple(S[:3]), Outcome.FAILURE, first_error_step=1, claimed_success=True)
    assert judged_step_labels(claimed) == {0: right(R.GOLDEN_PREFIX), 1: wrong(R.FIRST_ERROR), 2: wrong(R.FALSE_CLAIM)}
    # no attribution yet: the verdict alone speaks about the last step
    assert judged_step_labels(JudgedTrajectory(tuple(S[:3]), Outcome.FAILURE, claimed_success=True)) == {
        2: wrong(R.FALSE_CLAIM)}
    # the attributed first error is the claim itself: one label, the attribution's
    assert judged_step_labels(JudgedTrajectory(tuple(S[:2]), Outcome.FAILURE, first_error_step=1,
                                               claimed_success=True)) == {0: right(R.GOLDEN_PREFIX), 1: wrong(R.FIRST_ERROR)}
    for outcome in (Outcome.VERIFIED_SUCCESS, Outcome.UNDECIDED, Outcome.ENVIRONMENT):
        assert R.FALSE_CLAIM not in {label.source for label in judged_step_labels(
            JudgedTrajectory(tuple(S[:3]), outcome, claimed_success=True)).values()}
    assert judged_step_labels(JudgedTrajectory((), Outcome.FAILURE, claimed_success=True)) == {}


def test_no_label_is_invented():
    milestone = frozenset({1})
    assert judged_step_labels(JudgedTrajectory(tuple(S), Outcome.ENVIRONMENT, milestone, 2)) == {}
    assert judged_step_labels(JudgedTrajectory(tuple(S), Outcome.FAILURE)) == {}
    assert judged_step_labels(JudgedTrajectory(tuple(S), Outcome.UNDECIDED, milestone, 3)) == {1: right(R.MILESTONE)}
    # an attribution older than a success (re-judged True after a rule fix) locates no error
    assert set(judged_step_labels(JudgedTrajectory(tuple(S[:2]), Outcome.VERIFIED_SUCCESS, first_error_step=1))
               .values()) == {right(R.VERIFIED_SUCCESS)}
    masked_prefix = (JudgedStep(0, masked=True), JudgedStep(1), JudgedStep(2))
    assert judged_step_labels(JudgedTrajectory(masked_prefix, Outcome.FAILURE, first_error_step=2)) == {
        1: right(R.GOLDEN_PREFIX), 2: wrong(R.FIRST_ERROR)}


def test_the_band_maps_a_probability_to_eq_4s_reward():
    assert [process_reward(p) for p in (1.0, 0.65, 0.649, 0.5, 0.351, 0.35, 0.0)] == [1, 1, 0, 0, 0, -1, -1]
    assert process_reward(0.5, band=(0.5, 0.5)) == 1
    with pytest.raises(ValueError):
        process_reward(1.2)
    with pytest.raises(ValueError):
        process_reward(0.5, band=(0.7, 0.3))


def test_the_confusion_counts_labels_against_rewards():
    result = step_confusion([1, 1, 1, -1, -1], [1, 0, -1, -1, 0])
    assert result["counts"] == {"1": {"1": 1, "0": 1, "-1": 1}, "-1": {"1": 0, "0": 1, "-1": 1}}
    assert result["decided"] == 3 and result["accuracy_decided"] == round(2 / 3, 4) and result["coverage"] == 0.6
    assert step_confusion([], [])["accuracy_decided"] is None
    with pytest.raises(ValueError):
        step_confusion([0], [1])


def test_the_held_out_split_is_by_query_and_seeded():
    ids = list(range(10, 30))
    held = reward_data.split_by_query(ids + ids, 0.2, seed=3)   # a query's rows count once
    assert len(held) == 4 and held <= set(ids) and held == reward_data.split_by_query(ids, 0.2, seed=3)
    assert held != reward_data.split_by_query(ids, 0.2, seed=4)
    assert len(reward_data.split_by_query([1, 2], 0.9)) == 1 and reward_data.split_by_query([1], 0.5) == set()


def test_the_screen_size_is_the_recorded_one_else_the_dumps():
    assert screen_size([720, 1600], "") == (720, 1600) and recorded_size([0, 5]) is None
    assert screen_size(None, screen(NOTES, "New note")) == SCREEN and screen_size("x", "") == (1080, 2400)


def test_points_become_thousandths_of_the_screen():
    assert in_thousandths({"action": "click", "point": [540, 1200]}, SCREEN)["point"] == [500, 500]
    kept = {"action": "click", "point": [5, 6], "coords": "thousandths"}
    assert in_thousandths(kept, SCREEN) == kept


# -- the database side ---------------------------------------------------------------------------------

def button(package, text, top):
    return (f'<node text="{text}" resource-id="" class="android.widget.Button" package="{package}" content-desc="" '
            f'clickable="true" enabled="true" bounds="[0,{top}][1080,{top + 200}]" />')


def screen(package, *texts):
    nodes = "".join(button(package, text, 300 + 200 * i) for i, text in enumerate(texts))
    return (f'<hierarchy rotation="0"><node text="" resource-id="" class="android.widget.FrameLayout" '
            f'package="{package}" content-desc="" clickable="false" enabled="true" bounds="[0,0][1080,2400]">'
            f'{nodes}</node></hierarchy>')


# Each screen: its package and buttons; the right tap is the first button, the wrong one the last.
HOME = (LAUNCHER, "Settings", "Clock", "Notes")
MAIN = (SETTINGS, "Network", "Display", "Notes backup")
WLAN = (SETTINGS, "Advanced", "Saved networks", "Share to Notes")
MAC = (SETTINGS, "MAC address 02:00:00:44:55:66", "IP address")
NOTEPAD = (NOTES, "New note", "All notes")
PATH = [HOME, MAIN, WLAN, MAC]
MILESTONES = {"milestones": [{"name": "network", "text": "Advanced"}, {"name": "mac", "text_contains": "MAC address"}]}
SUCCESS, FAILURE = {"action": "terminate", "status": "success"}, {"action": "terminate", "status": "failure"}


def tap(shown, which):
    return {"action": "click", "point": [540, 300 + 200 * which + 100]}   # pixels, as the executor records


def make_query(key, **fields):
    query = Query.objects.create(key=key, text=f"Show the phone's MAC address in Settings ({key})", tier="L2",
                                 verification=MILESTONES, **fields)
    query.set_apps([App.objects.get_or_create(package=SETTINGS)[0]])
    return query


def trajectory(query, verdict, steps, line="automatic", **fields):
    """steps: (screen, action) or (screen, action, "blocked")."""
    fields.setdefault("status", "completed")
    made = Trajectory.objects.create(query=query, line=line, verdict=verdict, **fields)
    for index, (shown, action, *blocked) in enumerate(steps):
        Step.objects.create(trajectory=made, index=index, hierarchy=store_blob(screen(*shown).encode(), "xml"),
                            foreground_package=shown[0], timings={"screen": list(SCREEN)},
                            cot={"Decision": f"step {index}"}, proposed_action=action,
                            executed_action=None if blocked else action,
                            audit={"blocked": bool(blocked)})
    vote = system_b_vote(trajectory_view(made))   # the real System B binds the milestones to screens
    Vote.objects.create(trajectory=made, system="B", vote=vote.vote, details=vote.details or {})
    return made


def successful(query):
    return trajectory(query, "true", [(PATH[i], tap(PATH[i], 0)) for i in range(3)] + [(MAC, SUCCESS)])


def failed(query, at):
    """Right taps before step `at`, then the wrong one (to Notes), then a failure: attributed at `at`."""
    steps = [(PATH[i], tap(PATH[i], 0)) for i in range(at)] + [(PATH[at], tap(PATH[at], 2)), (NOTEPAD, FAILURE)]
    made = trajectory(query, "false", steps)
    Attribution.objects.create(trajectory=made, level=3, cause="state_tracking", first_bad_step=at)
    return made


@pytest.fixture
def world(db, settings, tmp_path):
    """Three queries with successes and failures the ECDM attributed, plus trajectories no label may come from."""
    settings.TRAINING_ROOT = tmp_path / "training"
    made = {"success": [], "failure": []}
    for q in range(3):
        query = make_query(f"mac-{q}")
        for n in range(4):
            made["success"].append(successful(query))
            made["failure"].append(failed(query, at=n % 3))
    query = made["success"][0].query
    undetermined = trajectory(query, "true", [(HOME, tap(HOME, 0)), (MAIN, tap(MAIN, 1), "blocked"),
                                              (MAIN, tap(MAIN, 0)), (WLAN, tap(WLAN, 0)), (MAC, SUCCESS)])
    Adjudication.objects.create(trajectory=undetermined, decision="correct", decided_at=timezone.now())
    made["adjudicated"] = undetermined
    # not judged yet: only System B's milestone speaks (step 1 made "Advanced" show)
    made["pending"] = trajectory(query, "pending", [(HOME, tap(HOME, 0)), (MAIN, tap(MAIN, 0)), (WLAN, tap(WLAN, 2)),
                                                    (NOTEPAD, FAILURE)])
    made["excluded"] = [
        trajectory(query, "env_error", [(HOME, tap(HOME, 0)), (MAIN, FAILURE)]),
        trajectory(query, "true", [(HOME, tap(HOME, 0)), (MAIN, SUCCESS)], line="ecdm"),
        trajectory(make_query("held-out", evaluation_only=True), "true", [(HOME, tap(HOME, 0)), (MAIN, SUCCESS)]),
        trajectory(query, "true", [(HOME, tap(HOME, 0)), (MAIN, SUCCESS)], status="running"),
    ]
    return made


def test_the_facts_come_from_the_votes_attributions_and_adjudications(world):
    failure = world["failure"][2]            # wrong at step 2: steps 0, 1 right; Advanced first held on screen 2
    steps = list(failure.steps.order_by("index"))
    facts = reward_data.judged_facts(failure, steps)
    assert facts.outcome == Outcome.FAILURE and facts.first_error_step == 2 and facts.milestone_steps == {1}
    assert judged_step_labels(facts) == {0: right(R.GOLDEN_PREFIX), 1: right(R.GOLDEN_PREFIX), 2: wrong(R.FIRST_ERROR)}
    adjudicated = world["adjudicated"]
    labels = judged_step_labels(reward_data.judged_facts(adjudicated, list(adjudicated.steps.order_by("index"))))
    assert labels[1] == wrong(R.SAFETY_VETO) and labels[0] == labels[4] == right(R.ADJUDICATED_SUCCESS)


def test_the_dataset_holds_every_labelled_step_and_nothing_else(world):
    dataset = reward_data.build_dataset()
    excluded = {t.pk for t in world["excluded"]}
    assert not excluded & set(dataset.trajectory.tolist())
    # 12 successes × 4 steps; 12 failures, wrong at step 0, 1, 2, 0 of each query: prefixes 3 × (0 + 1 + 2 + 0);
    # the adjudicated one: 4 right steps, 1 blocked; the pending one: its milestone step
    assert dataset.stats["sources"] == {"first_error": 12, "safety_veto": 1, "false_claim": 0, "adjudicated_success": 4,
                                        "verified_success": 48, "golden_prefix": 9, "milestone": 1}
    assert dataset.x.shape == (75, FEATURES) and np.isfinite(dataset.x).all()
    assert sorted(set(dataset.label.tolist())) == [-1, 1] and dataset.stats["trajectories_labelled"] == 26
    assert not dataset.stats["truncated"]
    newest = reward_data.build_dataset(max_steps=3)     # newest first, whole trajectories only
    assert newest.stats["truncated"] and len(set(newest.trajectory.tolist())) == 2 and len(newest.label) == 1 + 5
    assert set(newest.trajectory.tolist()) == {world["pending"].pk, world["adjudicated"].pk}


def test_a_reward_model_is_never_offered_as_a_policy(world, client_as):
    version = ModelVersion.objects.create(name="prm-x", kind=ModelVersion.Kind.REWARD_MODEL, artifact="/nowhere")
    assert not version.is_policy and "rates steps" in unservable_reason(version)
    assert version not in ModelVersion.objects.policies()
    with pytest.raises(PolicyError):
        policy_for(version)
    client = client_as("manager")
    assert "prm-x" not in client.get("/runs/").content.decode()
    page = client.post("/runs/", {"line": "automatic", "model_version": version.pk}, follow=True).content.decode()
    assert "it rates steps, it does not act" in html.unescape(page)


def test_its_model_page_is_for_managers_and_says_when_it_is_not_trained(world, client_as, settings):
    version = launch_reward_model_training("prm-untrained", launch=False)
    for role in ("annotator", None):
        assert client_as(role).get(f"/training/models/{version.pk}/").status_code == 403
    page = client_as("manager").get(f"/training/models/{version.pk}/").content.decode()
    assert "Queued on the training workers." in page and 'hx-get=' in page   # the card follows the training
    assert Path(version.artifact).parent == settings.TRAINING_ROOT / "reward_models"
    (Path(version.artifact) / "status.json").unlink()
    page = client_as("manager").get(f"/training/models/{version.pk}/").content.decode()
    assert 'data-testid="reward-empty"' in page and 'data-testid="reward-accuracy"' not in page
    with pytest.raises(Exception, match="not trained"):
        reward_model_step_rewards(version, list(world["success"][0].steps.all()))


def test_launched_from_the_page_trained_by_the_task_then_scores_steps(world, client_as, torch,
                                                                     django_capture_on_commit_callbacks):
    client = client_as("manager")
    assert client.post("/training/reward-models/", {"name": "", "seed": "0"}, follow=True).status_code == 200
    assert not ModelVersion.objects.filter(kind="reward_model").exists()
    with django_capture_on_commit_callbacks(execute=False) as queued:
        reply = client.post("/training/reward-models/", {"name": "prm-1", "seed": "0"})
    version = ModelVersion.objects.get(name="prm-1")
    assert reply.status_code == 302 and version.kind == "reward_model" and len(queued) == 1
    assert train_reward_model_task.apply((version.pk,)).get() == "done"   # the task, run here as a worker would
    metrics = metrics_of(version)
    held = metrics["held_out"]
    assert metrics["labelled_steps"] == 75 and metrics["sources"]["first_error"] == 12
    assert metrics["queries"] == {"train": 2, "held_out": 1}   # held out by task: one of the three, whole
    assert held["steps"] == sum(sum(row.values()) for row in held["counts"].values()) > 0
    assert held["accuracy"] >= held["majority_share"] and held["counts"]["-1"]["-1"] >= 1
    summary = page_summary(version)
    assert summary["state"] == "done" and not summary["live"]
    page = html.unescape(client.get(f"/training/models/{version.pk}/").content.decode())
    assert f"{held['accuracy']:.3f}" in page and 'data-testid="reward-confusion"' in page and "before the first error (right)" in page and "golden_prefix" not in page
    assert "vllm serve" not in page and 'data-testid="model-evaluations"' not in page   # it is no policy
    polled = client.get(f"/training/models/{version.pk}/", HTTP_HX_REQUEST="true")
    assert polled.status_code == 286 and b'data-testid="reward-figures"' in polled.content   # the poll stops
    # a trajectory no one judged: the right tap, then the one that leaves Settings for Notes
    fresh = Trajectory.objects.create(query=world["success"][0].query, line="rl", status="completed")
    for index, (shown, action) in enumerate([(HOME, tap(HOME, 0)), (MAIN, tap(MAIN, 2)), (NOTEPAD, FAILURE)]):
        Step.objects.create(trajectory=fresh, index=index, hierarchy=store_blob(screen(*shown).encode(), "xml"),
                            foreground_package=shown[0], timings={"screen": list(SCREEN)}, executed_action=action)
    steps = list(fresh.steps.order_by("index"))
    rewards = reward_model_step_rewards(version, steps[:2])
    assert rewards == [1, -1]
    assert prm_step_accuracy(seed=0) == held["accuracy"]         # the script's figure: the same training


def test_with_no_judged_step_the_training_fails_with_the_reason(db, settings, tmp_path):
    settings.TRAINING_ROOT = tmp_path / "training"
    version = launch_reward_model_training("prm-empty", launch=False)
    assert train_reward_model(version.pk) == "failed"
    summary = page_summary(version)
    assert summary["state"] == "failed" and "no judged step" in summary["status"]["error"] and not summary["live"]
    with pytest.raises(ValueError, match="exists already"):
        launch_reward_model_training("prm-empty", launch=False)


def test_the_command_trains_here_and_prints_the_held_out_figures(world, torch):
    out = io.StringIO()
    call_command("train_reward_model", "prm-cli", "--inline", "--seed", "1", stdout=out)
    version = ModelVersion.objects.get(name="prm-cli")
    assert metrics_of(version)["seed"] == 1 and "prm-cli: trained; held-out steps" in out.getvalue()


def test_a_trained_reward_model_rates_an_rl_rollouts_steps_and_runs_name_it(world, torch):
    """Eq. 4's step rewards from the model (the step-reward source "reward_model"); an RL run names a
    trained step reward model, checked when it is created."""
    call_command("train_reward_model", "prm-rl", "--inline", stdout=io.StringIO())
    version = ModelVersion.objects.get(name="prm-rl")
    fresh = Trajectory.objects.create(query=world["success"][0].query, line="rl", status="completed", verdict="false")
    for index, (shown, action) in enumerate([(HOME, tap(HOME, 0)), (MAIN, tap(MAIN, 2)), (NOTEPAD, FAILURE)]):
        Step.objects.create(trajectory=fresh, index=index, hierarchy=store_blob(screen(*shown).encode(), "xml"),
                            foreground_package=shown[0], timings={"screen": list(SCREEN)}, executed_action=action)
    judged = judge_trajectory(fresh, judge=None, step_reward_source="reward_model", reward_model=version)
    assert judged.step_rewards == reward_model_step_rewards(version, judged.samples) and judged.judge == "prm-rl"
    assert judged.step_rewards[:2] == [1, -1] and judged.step_reward_source == "reward_model"
    base = {"model": {"tiny": {}}, "rl_run": 1, "step_reward_source": "reward_model"}
    policy = ModelVersion.objects.create(name="a-policy", kind="offline")
    for name, why in (("nope", "no model version is named 'nope'"), (policy.name, "not a step reward model")):
        with pytest.raises(RunError, match=why):
            create_run("rl", {**base, "step_reward_model": name}, launch=False)
    untrained = launch_reward_model_training("prm-queued", launch=False)
    with pytest.raises(RunError, match="prm-queued cannot rate steps yet"):
        create_run("rl", {**base, "step_reward_model": untrained.name}, launch=False)
    run = create_run("rl", {**base, "step_reward_model": "prm-rl"}, launch=False)
    assert run.config["step_reward_model"] == "prm-rl"
