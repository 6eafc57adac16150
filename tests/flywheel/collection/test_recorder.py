"""The one step recorder every line uses: each stage persisted as it happens, an action never run
twice, take_notes into memory, the CPT pool fed, blocked actions recorded but never executed."""
import pytest

from devices.executor import ActionExecutor
from devices.models import Device
from devices.observation import observe
from devices.phone import PhoneConnection
from flywheel.collection import recorder
from flywheel.models import App, CptEntry, Query, Trajectory
from flywheel.policies.base import Proposal
from flywheel.policies.protocol import AGENT_STOPS, ASKING_ACTIONS, ENDING_ACTIONS
from flywheel.rules.stops import Stop, StopKind

pytestmark = pytest.mark.django_db


class Fixed:
    """A policy that proposes one given action."""

    name = "fixed"

    def __init__(self, action):
        self.action = action

    def propose(self, state):
        return Proposal(cot={"Observation": "home", "Plan": "act", "Decision": "act"}, action=self.action)


@pytest.fixture
def recorded(farm_settings):
    phone = PhoneConnection(farm_settings.address, farm_settings.serials[0])
    phone.shell("input keyevent KEYCODE_HOME")
    app, _ = App.objects.get_or_create(package="com.android.settings")
    query = Query.objects.create(key="rec", text="Open Settings", tier="L1")
    query.set_apps([app])
    device, _ = Device.objects.get_or_create(serial=phone.serial, adb_server=phone.address)
    trajectory = Trajectory.objects.create(query=query, device=device, line="automatic")
    executor = ActionExecutor(phone, holder="test", device=device)

    def step(action, index=None):
        observation = observe(phone)
        index = trajectory.steps.count() if index is None else index
        stored = recorder.record_observation(trajectory, index, observation)
        assert stored.screenshot and stored.hierarchy and stored.timings["screen"] == [1080, 2400]
        recorder.propose(stored, observation, Fixed(action))
        stored.refresh_from_db()
        assert stored.proposed_action == action and stored.executed_action is None  # proposed, not run
        return stored, recorder.execute(stored, action, executor)

    return trajectory, step


def test_one_definition_of_how_actions_end_a_trajectory():
    assert ENDING_ACTIONS == ("terminate", "call_user") and ASKING_ACTIONS == ("clarify",)
    assert set(AGENT_STOPS) == {"terminate", "call_user", "clarify"}


def test_an_executed_step_is_persisted_with_its_cpt_sample_and_runs_once(recorded):
    trajectory, step = recorded
    stored, outcome = step({"action": "open", "app": "Settings"})
    assert outcome.ok and not outcome.ends and not outcome.asks
    stored.refresh_from_db()
    assert stored.executed_action["action"] == "open" and stored.executing_since is not None
    assert stored.audit["blocked"] is False and stored.audit["cpt"] == "accepted"
    assert CptEntry.objects.filter(step=stored).exists()
    with pytest.raises(recorder.StepBusy):
        recorder.execute(stored, {"action": "open", "app": "Settings"}, None)


def test_notes_join_the_memory_and_terminate_ends(recorded):
    trajectory, step = recorded
    _, outcome = step({"action": "take_notes", "text": "Wi-Fi is on"})
    assert outcome.ok
    trajectory.refresh_from_db()
    assert trajectory.memory == ["Wi-Fi is on"]
    _, outcome = step({"action": "terminate", "status": "success"})
    assert outcome.ends and outcome.stop == Stop(StopKind.SUCCESS, "terminate: success")
    _, outcome = step({"action": "clarify", "question": "Which network?"})
    assert outcome.asks and not outcome.ends and outcome.stop is None


def test_a_blocked_action_is_recorded_and_the_step_stays_unexecuted(recorded):
    trajectory, step = recorded
    stored, outcome = step({"action": "take_notes", "text": "my password is hunter2"})
    assert not outcome.ok and outcome.result.blocked
    stored.refresh_from_db()
    assert stored.executed_action is None and stored.executing_since is None  # free to act again
    assert stored.audit["blocked"] and "password" in stored.audit["reason"].lower()
    assert trajectory.memory == [] and not CptEntry.objects.filter(step=stored).exists()


@pytest.mark.parametrize("line, shown", [("schema", True), ("automatic", False), ("external", False),
                                         ("rl", False), ("semi_auto", False)])
def test_only_the_schema_guided_line_shows_the_known_path(line, shown):
    """§2.3.4: the known path is the schema-guided line's input; every other line sees the goal."""
    from devices.observation import Observation

    path = {"mode": "tap", "summary": "Settings → Display → Dark theme",
            "steps": [{"action": "open", "app": "com.android.settings"}]}
    query = Query.objects.create(key=f"path-{line}", text="Turn on dark theme", tier="L1", known_path=path)
    trajectory = Trajectory.objects.create(query=query, line=line)
    state = recorder.policy_state(trajectory, Observation(png=b"", hierarchy_xml="<hierarchy/>",
                                                          width=1080, height=2400))
    assert state.goal == "Turn on dark theme"
    assert state.known_path == (path if shown else None)


@pytest.mark.parametrize("line, given_the_query_apps", [("schema", True), ("semi_auto", True), ("automatic", False),
                                                        ("rl", False), ("benchmark", False)])
def test_goal_only_lines_give_the_phone_apps_not_the_querys(line, given_the_query_apps):
    """Issue #35: the automatic, RL and benchmark policies find their apps from the goal, as with a
    user's request; only the guided lines are given the query's own list."""
    from devices.observation import Observation

    shop = App.objects.create(package="com.sim.shop", label="ShopMart")
    App.objects.create(package="com.sim.notes", label="Notes")
    App.objects.create(package="com.sim.launcher", label="Launcher", is_system=True)
    App.objects.create(package="com.android.settings", label="Settings", is_system=True)  # a system app, openable
    App.objects.create(package="com.sim.absent", label="Not on this phone")
    device = Device.objects.create(serial=f"apps-{line}", adb_server="127.0.0.1:1",
                                   installed_apps=["com.android.settings", "com.sim.launcher", "com.sim.notes",
                                                   "com.sim.shop"])
    query = Query.objects.create(key=f"apps-{line}", text="Add the kettle to the cart in ShopMart", tier="L2")
    query.set_apps([shop])
    trajectory = Trajectory.objects.create(query=query, line=line, device=device)
    state = recorder.policy_state(trajectory, Observation(png=b"", hierarchy_xml="<hierarchy/>",
                                                          width=1080, height=2400))
    if given_the_query_apps:
        assert state.apps == ["com.sim.shop"]
    else:
        assert state.apps == ["com.android.settings", "com.sim.notes", "com.sim.shop"]  # the phone's, no launcher
        assert state.app_labels == {"com.android.settings": "Settings", "com.sim.notes": "Notes",
                                    "com.sim.shop": "ShopMart"}
