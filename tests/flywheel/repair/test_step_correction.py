"""Step-level correction: the Teacher rewrites step N; low confidence, hard scenarios, a failing
Teacher and missing screenshots go to a person with the reason; nothing is lost."""
from types import SimpleNamespace

import pytest

from flywheel import tasks
from flywheel.models import Repair, SftEntry, Trajectory
from flywheel.policies import teacher as teacher_module
from flywheel.repair import step_correction
from flywheel.repair.step_correction import apply_correction, correct_step
from tests.flywheel.repair.stored import (
    DISPLAY,
    HOME,
    OPEN_SETTINGS,
    TAP_BLUETOOTH,
    TAP_DISPLAY,
    page,
    repair_for,
    slipped_trajectory,
    stored_trajectory,
)

pytestmark = pytest.mark.django_db
TEACHER_COT = {"Observation": "The Settings list shows Bluetooth.", "Reflection": "Display was the wrong row.",
               "Plan": "Open the Bluetooth page.", "Decision": "Tap \"Bluetooth\" at (540, 590)", "Memory": ""}


class TeacherFailed(Exception):
    def __init__(self, reason, model_io=None):
        super().__init__(reason)
        self.reason, self.model_io = reason, model_io


class FakeTeacher:
    name = "fake-teacher"

    def __init__(self, action=TAP_BLUETOOTH, confidence=0.9, error=None):
        self.action, self.confidence, self.error, self.asked = action, confidence, error, []

    def correct(self, context):
        self.asked.append(context)
        if self.error:
            raise self.error
        return SimpleNamespace(action=self.action, cot=TEACHER_COT, confidence=self.confidence, source="fake-gem",
                               rationale="Bluetooth leads to the target page", model_io={"prompt": "x"})


@pytest.fixture
def teacher(monkeypatch, settings):
    """A fake Teacher behind step_correction's names, and a record of the replays queued."""
    settings.ECDM_REPLAY = True
    fake = FakeTeacher()
    monkeypatch.setattr(step_correction, "teacher_for", lambda model_version=None: fake)
    monkeypatch.setattr(step_correction, "context_for_step",
                        lambda trajectory, index: SimpleNamespace(trajectory=trajectory.pk, step_index=index))
    fake.replays = []
    monkeypatch.setattr(tasks.repair_replay, "delay", lambda repair_id: fake.replays.append(repair_id))
    return fake


def test_a_confident_teacher_writes_the_prefix_and_the_correction(teacher, django_capture_on_commit_callbacks):
    original = slipped_trajectory()
    repair = repair_for(original, step_index=1)
    with django_capture_on_commit_callbacks(execute=True):
        repair = correct_step(repair)
    assert repair.status == "done" and not repair.human_fallback
    assert teacher.asked[0].step_index == 1
    assert repair.correction["by"] == "teacher" and repair.correction["action"]["point"] == TAP_BLUETOOTH["point"]
    assert repair.teacher_output["source"] == "fake-gem" and repair.confidence == 0.9
    assert repair.teacher_output["cot"]["Plan"] == "Open the Bluetooth page."
    sample = repair.sample
    assert [s.executed_action["action"] for s in sample.steps.order_by("index")] == ["open", "click"]
    assert sample.steps.get(index=1).cot["Reflection"] == "Display was the wrong row."
    assert SftEntry.objects.get(trajectory=sample).intake == "ecdm_repaired"
    # the replay on a phone is queued after commit
    assert repair.replay == {"status": "queued"} and teacher.replays == [repair.pk]


def test_the_ecdm_runs_the_path_by_its_name(teacher, django_capture_on_commit_callbacks):
    from flywheel.repair import ecdm

    repair = repair_for(slipped_trajectory(), step_index=1)
    with django_capture_on_commit_callbacks(execute=True):
        assert ecdm.run_repair(repair.pk).status == "done"
    assert teacher.replays == [repair.pk]


@pytest.mark.parametrize("teacher_says, reason", [
    ({"confidence": 0.3}, "low Teacher confidence (0.30 < 0.60)"),
    ({"confidence": None}, "low Teacher confidence: the Teacher gave none"),
    ({"action": {"action": "fly", "to": "moon"}}, "unknown action 'fly'"),
    ({"action": {"action": "click", "point": ["a", 3]}}, "the corrected action is not valid"),
    ({"action": TAP_DISPLAY}, "this is the action that went wrong at step 1"),
    ({"error": TeacherFailed("the endpoint timed out after 30 s", {"request": "…"})},
     "the Teacher failed: the endpoint timed out after 30 s"),
    ({"error": ValueError("garbage: no action in the reply")}, "the Teacher failed: ValueError: garbage"),
])
def test_an_untrusted_or_failing_teacher_hands_the_step_to_a_person(teacher, teacher_says, reason):
    for name, value in teacher_says.items():
        setattr(teacher, name, value)
    original = slipped_trajectory()
    repair = correct_step(repair_for(original, step_index=1))
    assert repair.status == "needs_human" and repair.human_fallback
    assert reason in repair.human_reason
    assert repair.sample is None and not Trajectory.objects.filter(line="ecdm").exists()
    assert repair.teacher_output  # the Teacher's attempt (or its error) is kept for the person
    if "error" in teacher_says:
        assert repair.teacher_output["source"] == "fake-teacher" and repair.teacher_output["error"]
    assert teacher.replays == []


def test_hard_scenarios_go_to_a_person_with_the_teachers_attempt(teacher):
    captcha = page("Security verification", ["Drag the slider to complete the puzzle"])
    original = stored_trajectory([HOME, captcha, DISPLAY], [OPEN_SETTINGS, TAP_DISPLAY, None])
    repair = correct_step(repair_for(original, step_index=1))
    assert repair.status == "needs_human" and "risk control" in repair.human_reason
    assert repair.teacher_output["action"]["point"] == TAP_BLUETOOTH["point"]
    login = page("Login expired", ["Log in again"])
    original = stored_trajectory([HOME, login, DISPLAY], [OPEN_SETTINGS, TAP_DISPLAY, None])
    assert "complex account state" in correct_step(repair_for(original, step_index=1)).human_reason
    empty = '<?xml version="1.0" ?><hierarchy rotation="0"></hierarchy>'
    original = stored_trajectory([HOME, empty, DISPLAY], [OPEN_SETTINGS, TAP_DISPLAY, None])
    assert "severe UI deformation" in correct_step(repair_for(original, step_index=1)).human_reason


def test_a_trajectory_without_screenshots_goes_to_a_person_and_nothing_is_lost(teacher):
    original = slipped_trajectory(screenshots=False)
    repair = correct_step(repair_for(original, step_index=1))
    assert repair.status == "needs_human" and "no screenshot stored for steps 0, 1" in repair.human_reason
    assert teacher.asked == []  # the Teacher is not asked about a screen nobody has
    assert Trajectory.objects.get(pk=original.pk).steps.count() == 3
    assert repair.sample is None and Repair.objects.filter(pk=repair.pk).exists()
    # one frame missing in the prefix is enough to need a person
    original = slipped_trajectory()
    original.steps.filter(index=0).update(screenshot="")
    assert "step 0:" in correct_step(repair_for(original, step_index=1)).human_reason


def test_no_located_step_fails_with_the_reason(teacher):
    repair = correct_step(repair_for(slipped_trajectory(), step_index=None))
    assert repair.status == "failed" and "no wrong step" in repair.reason
    repair = correct_step(repair_for(slipped_trajectory(), step_index=9))
    assert repair.status == "failed" and "step 9" in repair.reason


def test_a_person_sets_the_action_and_bad_input_gets_a_clear_error(teacher, role_users,
                                                                  django_capture_on_commit_callbacks):
    original = slipped_trajectory()
    repair = repair_for(original, step_index=1)
    Repair.objects.filter(pk=repair.pk).update(status="needs_human", human_fallback=True, human_reason="low")
    repair.refresh_from_db()
    person = role_users["annotator"]
    for bad, message in [({"action": "click"}, "point"), ("tap", "JSON object"),
                         ({"action": "click", "point": [1e400, 5]}, "not valid"),
                         (TAP_DISPLAY, "the action that went wrong")]:
        with pytest.raises(ValueError, match=message):
            apply_correction(repair, bad, {}, by="human", user=person)
    assert Repair.objects.get(pk=repair.pk).status == "needs_human"
    with django_capture_on_commit_callbacks(execute=True):
        repair = apply_correction(repair, {"action": "click", "point": [500, 600]},
                                  {"Observation": "Settings", "Plan": "Bluetooth"}, by="human", user=person)
    assert repair.status == "done" and repair.repaired_by == person and repair.correction["by"] == "human"
    step = repair.sample.steps.get(index=1)
    assert step.executed_action == {"action": "click", "point": [500, 600], "coords": "pixel"}
    assert step.cot["Decision"].startswith("Tap \"Bluetooth\"")  # written from the action when left empty
    assert teacher.replays == [repair.pk]
    with pytest.raises(ValueError, match="already"):
        apply_correction(repair, {"action": "click", "point": [500, 610]}, {}, by="human", user=person)
    assert Trajectory.objects.filter(line="ecdm").count() == 1


@pytest.mark.skipif(not hasattr(teacher_module, "teacher_for") or not hasattr(teacher_module, "context_for_step"),
                    reason="the Teacher (flywheel/policies/teacher.py) is not written yet")
def test_the_real_teacher_corrects_a_slip_when_it_exists(settings, monkeypatch):
    settings.TEACHER_MODEL_VERSION = ""
    monkeypatch.setattr(tasks.repair_replay, "delay", lambda repair_id: None)
    original = slipped_trajectory()
    original.query.known_path = {"mode": "tap", "summary": "Settings → Bluetooth", "steps": [
        {"action": "open", "app": "com.android.settings"}, {"action": "click", "target": {"text": "Bluetooth"}},
        {"action": "terminate", "status": "success"}]}
    original.query.save(update_fields=["known_path"])
    repair = correct_step(repair_for(original, step_index=1))
    assert repair.status == "done", repair.human_reason
    x, y = repair.correction["action"]["point"]
    assert repair.correction["action"]["action"] == "click" and 500 <= y < 680  # the Bluetooth row
    assert repair.teacher_output["source"] == "known_path" and repair.sample.steps.count() == 2
    # without a known path or a GEM the offline Teacher only guesses from the goal's words: a person decides
    repair = correct_step(repair_for(slipped_trajectory(), step_index=1))
    assert repair.status == "needs_human" and "low Teacher confidence" in repair.human_reason
    assert repair.teacher_output["action"]["action"] == "click"  # its attempt, for the person's editor


# -- on the virtual farm: collected, corrected, replayed --------------------------------------------

BLUETOOTH_CHECKS = {"terminal": [{"check": "foreground", "package": "com.android.settings"},
                                 {"check": "screen", "contains": "bluetooth_switch"}],
                    "milestones": [{"name": "bluetooth page", "resource_id": "com.android.settings:id/bluetooth_switch"}]}


class SlippingPolicy:
    """Opens Settings, taps "Display & brightness" where "Bluetooth" was meant, gives up."""

    name = "slipping"

    def propose(self, state):
        from flywheel.policies.base import Proposal
        from flywheel.policies.protocol import describe_action

        done = len(state.history)
        if done == 0:
            action = {"action": "open", "app": "com.android.settings", "coords": "pixel"}
        elif done == 1:
            action = {"action": "click", "point": center_of(state.hierarchy_xml, "Display & brightness"),
                      "coords": "pixel"}
        else:
            action = {"action": "terminate", "status": "failure"}
        cot = {"Observation": "A screen.", "Reflection": "", "Plan": "Open Bluetooth.",
               "Decision": describe_action(action), "Memory": ""}
        return Proposal(cot=cot, action=action, confidence=0.9, policy=self.name)


def center_of(xml, text):
    from devices.uitree import all_nodes, parse_hierarchy

    node = next(n for n in all_nodes(parse_hierarchy(xml)) if n.text == text)
    return list(node.center)


@pytest.fixture
def farm_phones(farm_settings, transactional_db):
    from devices.models import Device
    from devices.phone import PhoneConnection
    from devices.registry import discover_devices

    for serial in farm_settings.serials:
        PhoneConnection(farm_settings.address, serial).shell(
            "am force-stop com.android.settings; settings put global bluetooth_on 0; input keyevent KEYCODE_HOME")
    discover_devices()
    return list(Device.objects.filter(adb_server=farm_settings.address).order_by("serial"))


def collect_slip(device, known_path=None):
    """A trajectory of the automatic line collected on a farm phone, judged and routed (False).
    `known_path` is the query's (the automatic line never shows it to the policy)."""
    from devices import leases
    from devices.phone import PhoneConnection
    from flywheel.collection.engine import CollectionConfig, finish_trajectory, run_trajectory
    from flywheel.models import App, Query
    from flywheel.policies import default_policy_version

    query = Query.objects.create(key=f"bt-slip-{Query.objects.count()}", text="Open the Bluetooth settings",
                                 tier="L2", verification=BLUETOOTH_CHECKS, known_path=known_path,
                                 reset={"force_stop": ["com.android.settings"], "clear": [], "home": True})
    query.set_apps([App.objects.get_or_create(package="com.android.settings")[0]])
    trajectory = Trajectory.objects.create(query=query, device=device, line="automatic",
                                           model_version=default_policy_version())
    phone = PhoneConnection.for_device(device)
    lease = leases.acquire(device, holder="test:collect")
    try:
        reason = run_trajectory(trajectory, phone, SlippingPolicy(), CollectionConfig(), lease=lease, device=device)
    finally:
        leases.release(lease)
    finish_trajectory(trajectory, reason, phone)
    trajectory.refresh_from_db()
    return trajectory


@pytest.mark.django_db(transaction=True)
def test_a_farm_trajectory_is_corrected_replayed_and_continued(farm_phones, teacher):
    original = collect_slip(farm_phones[0])
    assert original.verdict == "false" and original.steps.count() == 3, original.stop_reason
    settings_list = step_correction.stored_hierarchy(original.steps.get(index=1))
    teacher.action = {"action": "click", "point": center_of(settings_list, "Bluetooth"), "coords": "pixel"}
    repair = correct_step(repair_for(original, step_index=1))
    assert repair.status == "done" and teacher.replays == [repair.pk]
    result = step_correction.replay_and_continue(repair.pk)
    assert result["status"] == "replayed", result
    continuation = Trajectory.objects.get(pk=result["trajectory"])
    assert (continuation.line, continuation.derived_from_id, continuation.run_id) == ("ecdm", original.pk, None)
    actions = [s.executed_action["action"] for s in continuation.steps.order_by("index")]
    assert actions[:2] == ["open", "click"] and actions[-1] == "terminate", actions
    corrected = continuation.steps.get(index=1)
    assert corrected.edit["ecdm"] == "correction" and corrected.cot["Plan"] == "Open the Bluetooth page."
    # judged with the phone in its terminal state: the corrected path reached Bluetooth
    assert continuation.verdict == "true", [v.rationale for v in continuation.votes.all()]
    repair.refresh_from_db()
    assert repair.replay["status"] == "replayed" and repair.replay["trajectory"] == continuation.pk
    assert repair.replay["prefix_steps"] == 1 and repair.replay["verdict"] == "true"
    # a second delivery of the task does not replay again
    assert step_correction.replay_and_continue(repair.pk)["trajectory"] == continuation.pk
    assert Trajectory.objects.filter(derived_from=original, line="ecdm").count() == 2  # sample + continuation
    from devices.models import Device

    assert not Device.objects.filter(status="leased").exists()


@pytest.mark.django_db(transaction=True)
def test_a_prefix_that_no_longer_replays_is_recorded_and_the_sample_stays(farm_phones, teacher):
    original = collect_slip(farm_phones[1])
    settings_list = step_correction.stored_hierarchy(original.steps.get(index=1))
    teacher.action = {"action": "click", "point": center_of(settings_list, "Bluetooth"), "coords": "pixel"}
    repair = correct_step(repair_for(original, step_index=1))
    assert repair.status == "done"
    # the phone no longer does what the prefix recorded (here: its first step now stays on Home)
    original.steps.filter(index=0).update(executed_action={"action": "system_button", "button": "home"})
    result = step_correction.replay_and_continue(repair.pk)
    assert result["status"] == "failed"
    assert "step 1: the phone shows another page than the one recorded" in result["reason"]
    assert "'Settings'" in result["reason"]
    repair.refresh_from_db()
    assert repair.status == "done" and repair.replay["status"] == "failed" and repair.replay["reason"]
    assert SftEntry.objects.filter(trajectory=repair.sample, intake="ecdm_repaired").exists()
    assert not Trajectory.objects.filter(derived_from=original).exclude(pk=repair.sample_id).exists()


@pytest.mark.django_db(transaction=True)
def test_no_idle_phone_skips_the_replay(farm_phones, teacher):
    from devices import leases

    original = collect_slip(farm_phones[2])
    settings_list = step_correction.stored_hierarchy(original.steps.get(index=1))
    teacher.action = {"action": "click", "point": center_of(settings_list, "Bluetooth"), "coords": "pixel"}
    repair = correct_step(repair_for(original, step_index=1))
    held = [leases.acquire(device, holder="someone else") for device in farm_phones]
    try:
        assert step_correction.replay_and_continue(repair.pk)["status"] == "skipped"
    finally:
        for lease in held:
            leases.release(lease)
    repair.refresh_from_db()
    assert repair.replay["reason"] == "no idle phone" and repair.sample_id
