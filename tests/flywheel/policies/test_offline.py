"""The built-in offline policy on the virtual farm's own tasks, through the real executor and
safety audit over the ADB protocol, judged by the end state as the farm knows it. (perf/offline_policy.py measures the
whole L1/L2 single-app set and prints the share.)"""
import sys
from pathlib import Path

import pytest

from devices.phone import PhoneConnection
from flywheel.policies import OfflinePolicy, PolicyState
from flywheel.policies.episode import run_episode
from flywheel.rules.consistency import GateStep, check_bidirectional_consistency
from simfarm.farm import Farm
from simfarm.serve import ServerThread

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "perf"))
from offline_policy import measure, single_app_tasks

pytestmark = pytest.mark.django_db

# One or two simple tasks of every app of the farm.
SAMPLE = ["settings-dark-theme-l1", "settings-timeout-5min", "notes-create-groceries-l1", "notes-pin-meeting",
          "shop-add-airpods-l1", "food-indian-l1", "gallery-fav-temple-l1", "video-like-ramen-l1",
          "chat-pin-priya-l1", "chat-on-my-way-l1", "translator-font-large-l1", "shop-price-alerts-l1"]


@pytest.fixture(scope="module")
def phone():
    farm = Farm(devices=1, seed=0)
    with ServerThread(farm) as server:
        yield PhoneConnection(f"127.0.0.1:{server.port}", next(iter(farm)).serial)


def test_offline_policy_completes_most_simple_single_app_tasks(phone):
    tasks = [task for task in single_app_tasks(("L1", "L2")) if task["key"] in SAMPLE]
    assert len(tasks) == len(SAMPLE)
    results = measure(tasks, phone, schema_guided=True)
    passed = [key for key, ok, _, _ in results if ok]
    print(f"offline policy, schema-guided: {len(passed)}/{len(results)} sampled tasks succeeded")
    assert len(passed) >= 0.75 * len(results), results


def test_it_fails_honestly_when_the_screen_does_not_match(phone):
    task = next(t for t in single_app_tasks() if t["key"] == "settings-dark-theme-l1")
    broken = {**task, "known_path": {**task["known_path"], "steps": [
        {"action": "open", "app": "com.android.settings"},
        {"action": "click", "target": {"text": "Quantum teleport"}}]}}
    episode = run_episode(phone, broken, OfflinePolicy(), schema_guided=True)
    assert episode.outcome == "terminate:failure" and "Quantum teleport" in episode.answer
    # it looked (scrolled) but never tapped something else instead
    assert [action["action"] for _, action, _ in episode.steps if action["action"] == "click"] == []


def test_goal_only_matching_without_a_known_path(phone):
    task = next(t for t in single_app_tasks() if t["key"] == "settings-dark-theme-l1")
    episode = run_episode(phone, task, OfflinePolicy())  # the task has a known path; not shown
    assert episode.outcome == "terminate:success"
    assert phone.shell("settings get secure ui_night_mode").strip() == "2"


class PathSpy(OfflinePolicy):
    """The offline policy, remembering which known paths it was shown."""

    def __init__(self):
        self.paths_seen = []

    def propose(self, state):
        self.paths_seen.append(state.known_path)
        return super().propose(state)


def test_only_a_schema_guided_episode_shows_the_known_path(phone):
    task = next(t for t in single_app_tasks() if t["key"] == "settings-dark-theme-l1")
    assert task["known_path"]
    alone, guided = PathSpy(), PathSpy()
    run_episode(phone, task, alone)
    run_episode(phone, task, guided, schema_guided=True)
    assert alone.paths_seen and set(map(repr, alone.paths_seen)) == {"None"}
    assert guided.paths_seen and all(path == task["known_path"] for path in guided.paths_seen)


def test_its_reasoning_passes_the_consistency_gate(phone):
    task = next(t for t in single_app_tasks() if t["key"] == "notes-create-groceries-l1")
    episode = run_episode(phone, task, OfflinePolicy(), schema_guided=True)
    assert episode.outcome == "terminate:success"
    steps = [GateStep(index=i, cot=cot, action=result.action, screen_text="") for i, (cot, _, result) in enumerate(episode.steps)]
    assert check_bidirectional_consistency(steps) == []
    for cot, _, _ in episode.steps:
        assert set(cot) == {"Observation", "Reflection", "Plan", "Decision", "Memory"}


def test_it_proposes_from_a_hierarchy_alone():
    xml = ('<?xml version="1.0"?><hierarchy><node package="com.sim.notes" class="android.widget.FrameLayout" '
           'bounds="[0,0][1080,2400]" text="" resource-id="" content-desc="">'
           '<node package="com.sim.notes" class="android.widget.Button" clickable="true" text="Save" '
           'resource-id="com.sim.notes:id/save_note" content-desc="" bounds="[40,800][1040,900]"/></node></hierarchy>')
    state = PolicyState(goal="Save the note", history=[], screenshots=[b"x"], hierarchy_xml=xml,
                        foreground={"package": "com.sim.notes"}, apps=["com.sim.notes"],
                        known_path={"steps": [{"action": "click", "target": {"resource_id": "com.sim.notes:id/save_note"}}]})
    proposal = OfflinePolicy().propose(state)
    # the path does not start with open and the app is in front: the path step comes after an
    # implicit open, which the policy proposes first
    assert proposal.action == {"action": "open", "app": "com.sim.notes"}
    state.history = [type("H", (), {"action": {"action": "open", "app": "com.sim.notes"}, "cot": {}})()]
    proposal = OfflinePolicy().propose(state)
    assert proposal.action == {"action": "click", "point": [540, 850], "coords": "pixel"}
    assert proposal.cot["Decision"] == 'Tap "Save" at (540, 850)' and "\"Save\"" in proposal.cot["Observation"]


def test_step_by_step_instructions_are_read_as_steps():
    from flywheel.policies.narration import narrated_steps

    steps = narrated_steps("Open Notes, tap the + button, type Groceries as the title and 'milk and coffee' "
                           "as the note, then tap Save.", {"notes"})
    assert [(s.action, s.target, s.text) for s in steps] == [
        ("click", "the add new button", ""), ("type", "the title", "Groceries"),
        ("type", "the note", "milk and coffee"), ("click", "Save", "")]
    steps = narrated_steps("Open Chatter, tap Mom's chat, type 'On my way' and press Send.", {"chat"})
    assert [(s.action, s.target, s.text) for s in steps] == [
        ("click", "Mom chat", ""), ("type", "", "On my way"), ("click", "Send", "")]
    steps = narrated_steps("Open Settings, go to WLAN, tap Forget and confirm.", {"settings"})
    assert [s.action for s in steps] == ["click", "click", "confirm"]
    assert narrated_steps("Open Settings, tap Display & brightness and switch on Dark theme.", {"settings"})[-1].toggle is True
    assert narrated_steps("Find me something nice to eat", {"food"}) == []


def test_a_switch_already_as_wanted_matched_by_its_summary_does_not_stall_the_policy():
    """The goal's words match a row by its summary, not its title, and the switch is already on:
    that part holds, and the policy moves on instead of picking the same row forever."""
    row = ('<node class="android.widget.LinearLayout" clickable="true" enabled="true" bounds="[0,{t}][1080,{b}]" '
           'package="com.x" text="" content-desc="" resource-id="" checked="false">'
           '<node class="android.widget.TextView" text="{title}" bounds="[40,{t}][800,{m}]" enabled="true" '
           'clickable="false" package="com.x" content-desc="" resource-id="android:id/title" checked="false"/>'
           '<node class="android.widget.TextView" text="{summary}" bounds="[40,{m}][800,{b}]" enabled="true" '
           'clickable="false" package="com.x" content-desc="" resource-id="android:id/summary" checked="false"/>'
           '<node class="android.widget.Switch" text="" bounds="[900,{t}][1040,{b}]" enabled="true" clickable="false" '
           'package="com.x" content-desc="" resource-id="android:id/switch_widget" checked="true"/></node>')
    xml = ('<?xml version="1.0" encoding="UTF-8"?><hierarchy rotation="0">'
           '<node class="android.widget.FrameLayout" bounds="[0,0][1080,2400]" package="com.x" text="" '
           'content-desc="" resource-id="" clickable="false" enabled="true" checked="false">'
           + row.format(t=200, m=300, b=400, title="Wi-Fi", summary="Connected to Home network")
           + '</node></hierarchy>')
    state = PolicyState(goal="turn Home network on", history=[], screenshots=[], hierarchy_xml=xml,
                        foreground={"package": "com.x"}, apps=["com.x"])
    proposal = OfflinePolicy().propose(state)
    assert proposal.action["action"] in ("terminate", "swipe", "click", "system_button")


def test_a_path_step_written_as_a_point_is_touched_there_in_its_own_coords():
    """On a page whose dump is blind (a web view), a known path names where to touch, not what."""
    xml = ('<?xml version="1.0"?><hierarchy><node package="com.sim.tickets" class="android.webkit.WebView" '
           'bounds="[0,0][1080,2400]" text="" resource-id="" content-desc=""/></hierarchy>')
    state = PolicyState(goal="Book seat B2", history=[type("H", (), {"action": {"action": "open", "app": "com.sim.tickets"},
                                                                      "cot": {}})()],
                        screenshots=[b"x"], hierarchy_xml=xml, foreground={"package": "com.sim.tickets"},
                        apps=["com.sim.tickets"],
                        known_path={"steps": [{"action": "open", "app": "com.sim.tickets"},
                                              {"action": "click", "point": [412, 530], "coords": "thousandths"}]})
    proposal = OfflinePolicy().propose(state)
    assert proposal.action == {"action": "click", "point": [412, 530], "coords": "thousandths"}
