"""Error explanations in ECDM-corrected samples (Xiaomi-GUI-0 §3.4), end to end: the offline, a
rationale-less and an endpoint Teacher, a person, the pop-up repair; the count a script reads; the
pages that show it."""
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Group, User

from flywheel.models import ModelVersion, Repair, SftEntry
from flywheel.repair import step_correction
from flywheel.repair.env_repair import repair_interruption
from flywheel.repair.explanations import explained_corrections
from flywheel.repair.samples import make_sample
from flywheel.repair.step_correction import apply_correction, correct_step
from tests.flywheel.openai_stub import StubOpenAI
from tests.flywheel.repair.stored import (
    BLUETOOTH,
    GIVE_UP,
    HOME,
    MAIN,
    OPEN_SETTINGS,
    SETTINGS,
    TAP_BLUETOOTH,
    TAP_DISPLAY,
    dialog,
    repair_for,
    slipped_trajectory,
    stored_trajectory,
)

pytestmark = pytest.mark.django_db
KNOWN_PATH = {"steps": [{"action": "open", "app": SETTINGS}, {"action": "click", "target": {"text": "Bluetooth"}}]}
EVIDENCE = [{"level": 1, "conclusion": "clear", "cause": "", "detail": "no interference", "steps": []},
            {"level": 3, "conclusion": "found", "cause": "perception_drift", "steps": [1],
             "detail": "looked past the path's next step where click \"Bluetooth\" was on the screen"}]
FROM_EVIDENCE = ('Tap "Display" is the wrong step here: it misreads the "Settings" screen, where the task needs '
                 '"Bluetooth". Tap "Bluetooth" instead.')


@pytest.fixture(autouse=True)
def no_replay(settings):
    settings.ECDM_REPLAY = False
    settings.TEACHER_MODEL_VERSION = ""


def slipped_repair(cause="perception_drift", wrong_steps=1, known_path=None):
    original = slipped_trajectory()
    if known_path:
        original.query.known_path = known_path
        original.query.save(update_fields=["known_path"])
    repair = repair_for(original, step_index=1, cause=cause, features={"facts": {"wrong_steps": wrong_steps}})
    repair.attribution.evidence = EVIDENCE
    repair.attribution.save(update_fields=["evidence"])
    return repair


def corrected_step(repair):
    return repair.sample.steps.get(index=repair.step_index)


def test_the_offline_teachers_own_reason_is_the_reflection_and_the_evidence_is_kept():
    repair = correct_step(slipped_repair(known_path=KNOWN_PATH))
    assert repair.status == "done" and repair.correction["by"] == "teacher", repair.human_reason
    said = 'Tap "Display" is the wrong step here: it leaves the task\'s known path, which goes on here with tap "Bluetooth".'
    step = corrected_step(repair)
    assert step.cot["Reflection"] == said
    explanation = step.edit["explanation"]
    assert explanation == repair.correction["explanation"]
    assert explanation["text"] == said and explanation["source"] == "teacher"
    assert explanation["from_evidence"] == FROM_EVIDENCE   # the fallback, kept
    assert explanation["original_action"] == TAP_DISPLAY and explanation["original_label"] == "Display"
    assert explanation["error_class"] == "perception_drift" and explanation["level"] == 3
    assert explanation["evidence"] == EVIDENCE[1]["detail"] and explanation["attribution"] == repair.attribution_id
    assert explained_corrections() == 1


def test_a_teacher_without_a_rationale_gets_the_evidences(monkeypatch):
    cot = {"Observation": "Settings lists Bluetooth.", "Reflection": "", "Plan": "Open Bluetooth.",
           "Decision": "Tap \"Bluetooth\"", "Memory": ""}
    answer = SimpleNamespace(action=TAP_BLUETOOTH, cot=cot, confidence=0.9, source="fake", rationale="", model_io=None)
    monkeypatch.setattr(step_correction, "teacher_for", lambda model_version=None: SimpleNamespace(
        name="fake", correct=lambda context: answer))
    repair = correct_step(slipped_repair(cause="state_tracking", wrong_steps=2))
    assert repair.status == "done", repair.human_reason
    said = ("Tap \"Display\" is the wrong step here: it loses track of the task's progress and goes back over pages "
            "already visited (2 steps went nowhere from here). Tap \"Bluetooth\" instead.")
    assert corrected_step(repair).cot["Reflection"] == said
    assert repair.correction["explanation"]["source"] == "evidence"
    assert repair.correction["explanation"]["error_class"] == "state_tracking"


def test_an_endpoint_teacher_is_asked_why_and_its_reason_wins(settings):
    reply = ("[Observation] Settings shows \"Bluetooth\" and \"Display\".\n"
             "[Reflection] Display opens the screen settings, not Bluetooth.\n"
             "[Plan] Open the Bluetooth page.\n[Decision] Tap \"Bluetooth\" at (500, 280)\n[Memory]\n"
             "Confidence: 0.9\n"
             "<tool_call>{\"action\": \"click\", \"point\": [500, 280], \"coords\": \"thousandths\"}</tool_call>")
    with StubOpenAI() as stub:
        stub.replies.append((200, stub.chat_reply(reply), 0))
        ModelVersion.objects.create(name="teacher-vl", kind="endpoint", endpoint_url=stub.url,
                                    served_model_name=stub.model)
        settings.TEACHER_MODEL_VERSION = "teacher-vl"
        repair = correct_step(slipped_repair())
    assert "In [Reflection], say in one sentence why that action was wrong" in \
        stub.requests[0]["messages"][1]["content"][0]["text"]
    assert repair.status == "done", repair.human_reason
    assert corrected_step(repair).cot["Reflection"] == "Display opens the screen settings, not Bluetooth."
    assert repair.correction["explanation"]["source"] == "teacher"
    assert repair.correction["explanation"]["from_evidence"] == FROM_EVIDENCE


@pytest.mark.parametrize("reflection, text, source", [
    ("I tapped the row under the one I meant.", "I tapped the row under the one I meant.", "annotator"),
    ("", FROM_EVIDENCE, "evidence"),
])
def test_a_persons_reason_is_used_and_its_absence_filled_from_the_evidence(reflection, text, source):
    repair = slipped_repair()
    Repair.objects.filter(pk=repair.pk).update(status="needs_human", human_fallback=True)
    person = User.objects.create_user(username="alice")
    cot = {"Observation": "Settings lists Bluetooth.", "Reflection": reflection, "Plan": "Open Bluetooth.",
           "Decision": "Tap \"Bluetooth\"", "Memory": ""}
    repair = apply_correction(repair, TAP_BLUETOOTH, cot, by="human", user=person)
    assert corrected_step(repair).cot["Reflection"] == text
    assert repair.correction["explanation"]["source"] == source
    assert corrected_step(repair).edit["explanation"]["original_action"] == TAP_DISPLAY


def test_the_popup_repair_explains_the_step_at_the_interruption():
    permission = dialog("Allow Settings to access this device's location?", ["Allow", "Don't allow"])
    scroll = {"action": "swipe", "direction": "up", "coords": "pixel"}   # scrolled as if the dialog were not there
    original = stored_trajectory([HOME, MAIN, permission, MAIN, BLUETOOTH],
                                 [OPEN_SETTINGS, scroll, scroll, TAP_BLUETOOTH, GIVE_UP], verdict="env_error")
    repair = repair_interruption(repair_for(original, path="env", step_index=2, level=1, cause="permission",
                                            features={"type": "permission", "step": 2}))
    assert repair.status == "done", repair.human_reason
    closing = corrected_step(repair)
    label = closing.edit["explanation"]["corrected_label"]
    assert closing.executed_action["action"] == "click" and label in ("Allow", "Don't allow")
    assert closing.cot["Reflection"] == (
        "Swipe up is the wrong step here: a permission dialog covers the screen (\"Allow Settings to access this "
        f"device's location?\"); it is not part of the task and has to be closed first. Tap \"{label}\" instead.")
    assert closing.edit["explanation"]["source"] == "evidence" and closing.edit["explanation"]["level"] == 1
    assert repair.correction["explanation"]["original_action"] == scroll


def test_the_count_reads_only_the_pools_explained_ecdm_samples():
    assert explained_corrections() == 0
    plain = slipped_repair()   # a sample written without an explanation (an older one) does not count
    step = plain.trajectory.steps.get(index=1)
    make_sample(plain.trajectory, plain, keep_until=1, final_step={
        "index": 1, "screenshot": step.screenshot.name, "hierarchy": step.hierarchy.name, "action": TAP_BLUETOOTH,
        "cot": {"Observation": "Settings", "Plan": "Open Bluetooth", "Decision": "Tap Bluetooth"}})
    assert SftEntry.objects.filter(intake="ecdm_repaired").count() == 1 and explained_corrections() == 0
    correct_step(slipped_repair(known_path=KNOWN_PATH))
    correct_step(slipped_repair(known_path=KNOWN_PATH))
    assert explained_corrections() == 2


def test_the_trajectory_and_repair_pages_show_the_explanation(client_as, client):
    repair = slipped_repair()
    Repair.objects.filter(pk=repair.pk).update(status="needs_human", human_fallback=True)
    alice = User.objects.create_user(username="alice-annotator")
    alice.groups.add(Group.objects.get_or_create(name="annotator")[0])
    cot = {"Observation": "Settings lists Bluetooth.", "Reflection": "I tapped the row under Bluetooth.",
           "Plan": "Open Bluetooth.", "Decision": "Tap \"Bluetooth\"", "Memory": ""}
    apply_correction(repair, TAP_BLUETOOTH, cot, by="human", user=alice)
    page = client_as("manager").get(f"/trajectories/{repair.trajectory_id}/").content.decode()
    assert 'data-testid="error-explanation"' in page and "Why step 1 was wrong" in page
    assert "I tapped the row under Bluetooth." in page and "the annotator's reason" in page
    assert "perception_drift (Level 3)" in page and "looked past the path" in page   # the attribution's evidence
    assert "From the evidence alone: Tap &quot;Display&quot; is the wrong step here" in page
    client.force_login(alice)
    page = client.get(f"/repairs/{repair.pk}/").content.decode()
    assert 'data-testid="error-explanation"' in page and "I tapped the row under Bluetooth." in page
