"""The RL step judge (§3.3.2) rates steps from the frames they led to: a pixel-reading stub's ratings
follow the pixels; blank frames rated the same way discard the pass; a lost frame leaves the rules."""
from types import SimpleNamespace

import pytest
from django.core.files.storage import default_storage

from flywheel.blobs import store_blob
from flywheel.judging.trajectory_view import StepView, TrajectoryView
from flywheel.models import App, ModelVersion, Query, Step, Trajectory
from tests.flywheel.judging.pixel_judge import PixelJudge, frame, images_of, is_uniform, text_of
from training.step_judge import DID_NOT_LOOK, RATED_FRAMES, Conditions, judge_trajectory, rating_frame_loaders

pytestmark = pytest.mark.django_db
APP = "com.android.settings"
NO_CONDITIONS = Conditions([], "verdict")     # no milestones: the judge's ratings decide the steps


def screen(*texts):
    nodes = "".join(f'<node index="{i}" text="{t}" resource-id="" class="android.widget.TextView" package="{APP}" '
                    f'content-desc="" bounds="[0,{i * 100}][1080,{i * 100 + 100}]" />' for i, t in enumerate(texts))
    return f'<?xml version="1.0" ?><hierarchy rotation="0">{nodes}</hierarchy>'


def rollout(frames: list[bytes]):
    """Four steps on the same dump text (three taps, then giving up); only the frames differ."""
    query = Query.objects.create(key=f"q{Query.objects.count()}", text="Turn on dark mode", tier="L1", verification={})
    query.set_apps([App.objects.get_or_create(package=APP)[0]])
    trajectory = Trajectory.objects.create(query=query, line="rl", status="completed", verdict="false")
    actions = [{"action": "click", "point": [100 * i + 50, 300]} for i in range(3)]
    actions.append({"action": "terminate", "status": "failure"})
    for index, (png, action) in enumerate(zip(frames, actions)):
        Step.objects.create(trajectory=trajectory, index=index, foreground_package=APP,
                            hierarchy=store_blob(screen("Display", f"Option {index}").encode(), "xml"),
                            screenshot=store_blob(png, "png"), executed_action=action, proposed_action=action)
    return trajectory


@pytest.fixture
def judge():
    def register(stub):
        return ModelVersion.objects.get_or_create(name=f"vlm-{id(stub)}", kind="endpoint", endpoint_url=stub.url,
                                                  served_model_name=stub.model, sampling={"temperature": 0})[0]
    return register


def test_the_ratings_follow_the_frame_after_each_step(judge):
    done, plain = frame(True), frame(False)
    with PixelJudge() as stub:
        judged = judge_trajectory(rollout([plain, done, plain, done]), passes=1, judge=judge(stub),
                                  conditions=NO_CONDITIONS)
    # after step 0 the marker shows (step 1's frame), after step 1 it does not, after step 2 it does;
    # the last step has no frame after it: its own (the marker) is what it left on screen
    assert judged.step_rewards == [1, -1, 1, 1] and judged.notes == []
    asked, probe = stub.requests
    assert len(images_of(asked)) == 4 and all(is_uniform(png) for png in images_of(probe))
    assert "1. the screen after step 0; 2. the screen after step 1" in text_of(asked)
    assert "Step 0: screen shows: Display | Option 0" in text_of(asked) and text_of(probe) == text_of(asked)
    assert asked["seed"] == probe["seed"] == 0


def test_a_judge_that_rates_blank_frames_the_same_loses_its_pass(judge):
    done, plain = frame(True), frame(False)
    with PixelJudge(looks=False) as stub:
        judged = judge_trajectory(rollout([plain, done, plain, done]), passes=2, judge=judge(stub),
                                  conditions=NO_CONDITIONS)
    assert judged.step_rewards == [0, 0, 0, 0]          # the rules' pass: nothing off course, nothing advanced
    assert len(judged.notes) == 2 and all(DID_NOT_LOOK in note and "discarded" in note for note in judged.notes)
    assert len(stub.requests) == 4


def test_a_frame_missing_from_the_store_leaves_every_pass_to_the_rules(judge):
    lost = frame(True, size=(1080, 2401))               # a frame of its own, so deleting it deletes no other
    trajectory = rollout([frame(False), frame(True), lost, frame(True)])
    default_storage.delete(trajectory.steps.get(index=2).screenshot.name)
    with PixelJudge() as stub:
        judged = judge_trajectory(trajectory, passes=3, judge=judge(stub), conditions=NO_CONDITIONS)
    assert judged.notes == ["the judge was not asked: frame of step 2 is missing from the store; "
                            "the rules rated every pass"]
    assert judged.step_rewards == [0, 0, 0, 0] and judged.judge == "" and not stub.requests


def test_a_pass_sees_the_frames_after_the_latest_rated_steps_only():
    steps = [StepView(index=i, hierarchy="", action={"action": "click"}, screenshot=f"frame {i}") for i in range(12)]
    samples = [SimpleNamespace(index=i) for i in range(12)]
    chosen = rating_frame_loaders(TrajectoryView(goal="g", steps=steps), samples)
    assert len(chosen) == RATED_FRAMES == 8
    assert chosen[0] == (4, 5, "frame 5") and chosen[-1] == (11, 11, "frame 11")
