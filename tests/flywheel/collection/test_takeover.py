"""Teacher takeover on the virtual farm (Xiaomi-GUI-0 §3.4): after K low step scores the Teacher
acts for a bounded number of steps on the automatic line, and its steps are recorded as recovery
demonstrations; the RL line is never taken over."""
import pytest

from devices.models import Device
from devices.registry import discover_devices
from flywheel.collection import driver
from flywheel.collection.driver import drive_host
from flywheel.collection.engine import CollectionConfig
from flywheel.collection.launch import launch_run
from flywheel.models import App, Query, Trajectory
from flywheel.policies.base import Proposal
from flywheel.policies.protocol import describe_action

pytestmark = pytest.mark.django_db(transaction=True)
BLUETOOTH_PATH = {"mode": "tap", "summary": "Settings → Bluetooth", "steps": [
    {"action": "open", "app": "com.android.settings"},
    {"action": "click", "target": {"text": "Bluetooth"}},
    {"action": "terminate", "status": "success"}]}
CHECKS = {"terminal": [{"check": "foreground", "package": "com.android.settings"},
                       {"check": "screen", "contains": "bluetooth_switch"}],
          "milestones": [{"name": "bluetooth page", "resource_id": "com.android.settings:id/bluetooth_switch"}]}


class Dawdler:
    """A policy that waits, unsure, until the Bluetooth page is on screen, then finishes."""

    name = "dawdler"

    def propose(self, state):
        if "bluetooth_switch" in state.hierarchy_xml:
            action, confidence = {"action": "terminate", "status": "success"}, 0.9
        else:
            action, confidence = {"action": "wait", "seconds": 0}, 0.2
        cot = {"Observation": "A screen.", "Reflection": "", "Plan": "Wait and see.",
               "Decision": describe_action(action), "Memory": ""}
        return Proposal(cot=cot, action=action, confidence=confidence, policy=self.name)


@pytest.fixture
def phone_and_query(farm_settings, monkeypatch):
    discover_devices()
    first = Device.objects.get(serial=farm_settings.serials[0])
    Device.objects.exclude(pk=first.pk).update(status=Device.Status.OFFLINE)
    query = Query.objects.create(key="bt-takeover", text="Open the Bluetooth settings", tier="L1",
                                 known_path=BLUETOOTH_PATH, verification=CHECKS,
                                 reset={"force_stop": ["com.android.settings"], "clear": [], "home": True})
    query.set_apps([App.objects.get_or_create(package="com.android.settings")[0]])
    monkeypatch.setattr(driver, "policy_for", lambda version=None, line="": Dawdler())
    return first, query


def collect(line, config, farm_settings):
    run = launch_run(line, {"keys": ["bt-takeover"]}, config={"phones": 1, **config}, dispatch=False)
    drive_host(run.pk, farm_settings.address, 1)
    trajectory = Trajectory.objects.get(run=run)
    return trajectory, [s for s in trajectory.steps.order_by("index") if s.executed_action]


def test_the_teacher_takes_over_after_k_low_scores_and_its_steps_are_recorded(phone_and_query, farm_settings):
    trajectory, steps = collect("automatic", {}, farm_settings)      # the defaults: K = 3, M = 5
    actions = [s.executed_action["action"] for s in steps]
    assert actions == ["wait", "wait", "wait", "open", "click", "terminate"], (actions, trajectory.stop_reason)
    assert [s.takeover for s in steps] == [False, False, False, True, True, False]
    assert all(s.score is not None for s in steps)
    assert all(s.score < 0.4 for s in steps[:3]) and all(s.score >= 0.4 for s in steps[3:])
    for step in steps[3:5]:                         # recovery demonstrations: the Teacher's own reasoning
        assert step.model_io["teacher"]["source"] == "known_path"
        assert step.cot["Plan"].startswith("Follow the task's path") and step.cot["Decision"]
        assert step.confidence >= 0.85
    # the Teacher never ends the trajectory: the policy itself terminated, on the page it was led to
    assert steps[-1].model_io is None and steps[-1].cot["Plan"] == "Wait and see."
    assert trajectory.stop_reason == "terminate: success" and trajectory.verdict == "true"


def test_takeover_is_bounded_and_can_be_turned_off(phone_and_query, farm_settings):
    _, steps = collect("automatic", {"teacher_takeover_steps": 1, "teacher_takeover_after": 2}, farm_settings)
    marks = [s.takeover for s in steps]
    assert marks[:3] == [False, False, True] and marks.count(True) <= 2   # one Teacher step per takeover
    _, steps = collect("automatic", {"teacher_takeover_after": 0}, farm_settings)
    assert not any(s.takeover for s in steps) and all(s.score is None for s in steps)


def test_the_rl_line_is_never_taken_over(phone_and_query, farm_settings):
    trajectory, steps = collect("rl", {"teacher_takeover_after": 1}, farm_settings)
    assert [s.executed_action["action"] for s in steps] == ["wait"] * 4
    assert trajectory.stop_reason == "4 repeated actions"
    assert not any(s.takeover for s in steps) and all(s.score is None for s in steps)


def test_config_fields_reach_the_engine():
    config = CollectionConfig.from_dict({"teacher_takeover_after": 0, "teacher_takeover_steps": 2,
                                         "teacher_takeover_threshold": 0.5})
    assert (config.teacher_takeover_after, config.teacher_takeover_steps, config.teacher_takeover_threshold) == (0, 2, 0.5)
    assert CollectionConfig().teacher_takeover_after == 3
