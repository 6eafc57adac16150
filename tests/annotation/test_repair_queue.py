"""The human repair queue: claims with expiry, the correction checked (a bad one is a 400 with its
reason, never a 500) and handed to apply_correction, refusals kept with their reason, and the pages."""
import io
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from annotation import repair_queue
from annotation.repair_queue import ClaimRefused, RepairRejected
from flywheel.blobs import store_blob
from flywheel.models import Attribution, Query, Repair, Step, Trajectory, Verdict
from tests.conftest import PASSWORD

WIDTH, HEIGHT = 1080, 2400
SCREEN = ('<?xml version="1.0" ?><hierarchy rotation="0"><node index="0" text="Bluetooth" '
          'resource-id="com.android.settings:id/bluetooth" class="android.widget.TextView" '
          'package="com.android.settings" content-desc="" clickable="true" bounds="[0,300][1080,450]" />'
          '<node index="1" text="Wi-Fi" resource-id="com.android.settings:id/wifi" '
          'class="android.widget.TextView" package="com.android.settings" content-desc="" clickable="true" '
          'bounds="[0,450][1080,600]" /></hierarchy>')
TEACHER_COT = {"Observation": "Settings lists Bluetooth and Wi-Fi.", "Reflection": "",
               "Plan": "Open Bluetooth, then turn it on.", "Decision": "Tap \"Bluetooth\" at (540, 375)",
               "Memory": ""}


def png(shade=0, width=WIDTH, height=HEIGHT):
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (shade % 256, 120, 200)).save(buffer, "PNG")
    return buffer.getvalue()


def failed_with_repair(key=None, steps=3, wrong=1, teacher=True, confidence=0.35, screenshots=True):
    """A False trajectory whose step `wrong` tapped Wi-Fi instead of Bluetooth, and its repair
    waiting for a person (the Teacher's attempt, if any, with a confidence it did not trust)."""
    key = key or f"bt-{Query.objects.count()}"
    query = Query.objects.create(key=key, text="Open the Bluetooth settings", tier="L2", verification={})
    trajectory = Trajectory.objects.create(query=query, line="automatic", status="completed", verdict="false",
                                           destination="ecdm", finished_at=timezone.now())
    Verdict.objects.create(trajectory=trajectory, outcome="false")
    for index in range(steps):
        action = ({"action": "click", "point": [540, 525]} if index == wrong else
                  {"action": "terminate", "status": "failure"} if index == steps - 1 else
                  {"action": "open", "app": "Settings"})
        Step.objects.create(trajectory=trajectory, index=index, executed_action=action,
                            screenshot=store_blob(png(shade=index * 40 + Query.objects.count()), "png") if screenshots else "",
                            hierarchy=store_blob(SCREEN.encode(), "xml"), foreground_package="com.android.settings",
                            cot={"observation": f"screen {index}", "plan": "find Bluetooth", "decision": f"step {index}"})
    attribution = Attribution.objects.create(trajectory=trajectory, level=3, cause="perception_drift",
                                             first_bad_step=wrong, owner="ecdm", ecdm_path="step")
    output = ({"action": {"action": "click", "point": [0.5, 0.15625], "coords": "fraction"}, "cot": TEACHER_COT,
               "confidence": confidence, "source": "gem", "rationale": "the GEM's first edge toward Bluetooth"}
              if teacher else None)
    return Repair.objects.create(trajectory=trajectory, attribution=attribution, path="step", step_index=wrong,
                                 teacher_output=output, confidence=confidence if teacher else None,
                                 human_fallback=True, status="needs_human",
                                 human_reason=f"Teacher confidence {confidence} below 0.6" if teacher
                                 else "the Teacher failed: timed out")


def annotator(name):
    user = User.objects.create_user(username=name, password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="annotator")[0])
    return user


@pytest.fixture
def applied(monkeypatch):
    """apply_correction as its contract says (validated action in, repair done, sample made), recorded."""
    calls = []

    def apply_correction(repair, action, cot, by, user=None):
        calls.append({"repair": repair.pk, "action": action, "cot": cot, "by": by, "user": user})
        if action.get("text") == "refuse me":
            raise ValueError("type: the corrected step cannot type into this screen")
        repair.correction = {"action": action, "cot": cot, "by": by}
        repair.repaired_by, repair.status, repair.finished_at = user, "done", timezone.now()
        repair.save()
        return repair

    monkeypatch.setattr("flywheel.repair.step_correction.apply_correction", apply_correction, raising=False)
    return calls


@pytest.mark.django_db
def test_two_people_never_repair_one_step_and_an_abandoned_claim_frees_itself(applied):
    repair = failed_with_repair()
    alice, bob = annotator("alice"), annotator("bob")
    assert repair_queue.next_for(alice).pk == repair.pk
    with pytest.raises(ClaimRefused, match="alice is repairing it"):
        repair_queue.claim(repair.pk, bob)
    assert repair_queue.next_for(bob) is None
    assert repair_queue.next_for(alice).pk == repair.pk          # her own claim comes back first
    Repair.objects.filter(pk=repair.pk).update(claimed_until=timezone.now() - timedelta(seconds=1))
    assert repair_queue.next_for(bob).pk == repair.pk            # expired: Bob takes it
    with pytest.raises(ClaimRefused, match="bob"):
        repair_queue.submit(repair.pk, alice, {"action": "click", "point": [540, 375]}, TEACHER_COT)
    assert applied == []


@pytest.mark.django_db
def test_skipping_gives_it_back_and_moves_on():
    first, second = failed_with_repair(), failed_with_repair()
    alice = annotator("alice")
    assert repair_queue.next_for(alice).pk == first.pk
    assert repair_queue.release(first.pk, alice)
    assert repair_queue.next_for(alice, exclude=[first.pk]).pk == second.pk
    first.refresh_from_db()
    assert first.claimed_by is None and first.status == "needs_human"
    assert repair_queue.waiting_for_repair().count() == 2


@pytest.mark.django_db
def test_a_submitted_correction_goes_to_apply_correction_in_pixels_with_five_tags(applied):
    repair = failed_with_repair()
    alice = annotator("alice")
    repair_queue.claim(repair.pk, alice)
    done = repair_queue.submit(repair.pk, alice, {"action": "click", "point": [0.5, 0.15625], "coords": "fraction"},
                               {"observation": "Bluetooth is the first row.", "Plan": "open it",
                                "Decision": "Tap Bluetooth"}, step=1)
    assert applied == [{"repair": repair.pk, "action": {"action": "click", "point": [540, 375], "coords": "pixel"},
                        "cot": {"Observation": "Bluetooth is the first row.", "Reflection": "", "Plan": "open it",
                                "Decision": "Tap Bluetooth", "Memory": ""}, "by": "human", "user": alice}]
    assert done.status == "done" and done.repaired_by == alice and done.correction["by"] == "human"
    assert done.claimed_until is None and repair_queue.holder(done) is None
    assert repair_queue.waiting_for_repair().count() == 0
    with pytest.raises(ClaimRefused, match="no longer waiting"):  # done: nobody claims it again
        repair_queue.claim(repair.pk, annotator("bob"))


@pytest.mark.django_db
@pytest.mark.parametrize("action,cot,message", [
    ("click", TEACHER_COT, "JSON object"),
    ({"action": "fly", "point": [1, 2]}, TEACHER_COT, "unknown action 'fly'"),
    ({"action": "click"}, TEACHER_COT, "click needs point"),
    ({"action": "click", "point": [float("inf"), 3]}, TEACHER_COT, "point"),
    ({"action": "click", "point": ["left", 3]}, TEACHER_COT, "two numbers"),
    ({"action": "type", "text": ""}, TEACHER_COT, "text"),
    ({"action": "click", "point": [540, 525]}, TEACHER_COT, "the action that went wrong"),
    ({"action": "click", "point": [540, 375]}, {"Observation": "x", "Plan": "y"}, "needs Decision"),
    ({"action": "click", "point": [540, 375]}, {**TEACHER_COT, "Mood": "fine"}, "unknown reasoning tag 'Mood'"),
    ({"action": "click", "point": [540, 375]}, {**TEACHER_COT, "Plan": ["a"]}, "must be text"),
    ({"action": "click", "point": [540, 375]}, "tap it", "five tags"),
])
def test_a_bad_correction_is_refused_with_its_reason_and_changes_nothing(applied, action, cot, message):
    repair = failed_with_repair()
    alice = annotator("alice")
    repair_queue.claim(repair.pk, alice)
    with pytest.raises(RepairRejected, match=message):
        repair_queue.submit(repair.pk, alice, action, cot)
    repair.refresh_from_db()
    assert applied == [] and repair.status == "needs_human" and repair_queue.holder(repair) == alice


@pytest.mark.django_db
def test_a_stale_page_and_a_trajectory_without_steps_are_refused(applied):
    repair = failed_with_repair()
    alice = annotator("alice")
    with pytest.raises(ClaimRefused, match="now corrects step 1"):
        repair_queue.submit(repair.pk, alice, {"action": "click", "point": [540, 375]}, TEACHER_COT, step=2)
    empty = failed_with_repair(steps=0)
    with pytest.raises(RepairRejected, match="no step 1 to correct"):
        repair_queue.submit(empty.pk, alice, {"action": "click", "point": [540, 375]}, TEACHER_COT)
    assert applied == []


@pytest.mark.django_db
def test_a_repair_whose_step_was_not_located_corrects_the_last_step(applied):
    repair = failed_with_repair(steps=2, wrong=0)
    Repair.objects.filter(pk=repair.pk).update(step_index=None)
    Attribution.objects.filter(pk=repair.attribution_id).update(first_bad_step=None)
    alice = annotator("alice")
    done = repair_queue.submit(repair.pk, alice, {"action": "system_button", "button": "back"}, TEACHER_COT, step=1)
    assert done.step_index == 1 and applied[0]["action"] == {"action": "system_button", "button": "back"}


@pytest.mark.django_db
def test_cannot_repair_keeps_the_repair_with_the_reason():
    repair = failed_with_repair()
    alice = annotator("alice")
    with pytest.raises(RepairRejected, match="say why"):
        repair_queue.cannot_repair(repair.pk, alice, "  ")
    failed = repair_queue.cannot_repair(repair.pk, alice, "the screen is a captcha")
    assert failed.status == "failed" and "the screen is a captcha" in failed.reason
    assert failed.finished_at is not None and failed.claimed_by == alice
    repair.refresh_from_db()
    assert repair.teacher_output["source"] == "gem" and repair.trajectory.steps.count() == 3
    assert repair_queue.skip is repair_queue.cannot_repair
    assert repair_queue.waiting_for_repair().count() == 0


# -- the pages ------------------------------------------------------------------------------------

def submit(client, repair, body, raw=None):
    return client.post(f"/repairs/{repair.pk}/submit/", data=raw if raw is not None else json.dumps(body),
                       content_type="application/json")


@pytest.mark.django_db
def test_roles_and_object_access(client, role_users):
    repair = failed_with_repair()
    for role, expected in ((None, 403), ("adjudicator", 403), ("manager", 403)):
        client.force_login(role_users[role])
        assert client.get("/repairs/").status_code == expected
        assert client.get(f"/repairs/{repair.pk}/").status_code == expected
    client.logout()
    assert client.get("/repairs/").status_code == 302                  # to the login page
    alice, bob = annotator("alice"), annotator("bob")
    repair_queue.cannot_repair(repair.pk, alice, "not a real screen")
    client.force_login(bob)                                              # not waiting, not his: absent
    assert client.get(f"/repairs/{repair.pk}/").status_code == 404
    assert submit(client, repair, {"action": {"action": "wait"}}).status_code == 404
    client.force_login(alice)
    page = client.get(f"/repairs/{repair.pk}/").content.decode()
    assert "not a real screen" in page and 'data-testid="editor"' not in page


@pytest.mark.django_db
def test_the_queue_and_the_repair_page_show_what_the_person_needs(client):
    repair = failed_with_repair()
    alice, bob = annotator("alice"), annotator("bob")
    client.force_login(alice)
    queue = client.get("/repairs/").content.decode()
    assert f'data-testid="repair-row-{repair.pk}"' in queue and "Teacher confidence 0.35 below 0.6" in queue
    page = client.get(f"/repairs/{repair.pk}/").content.decode()     # opening claims nothing
    repair.refresh_from_db()
    assert repair.claimed_by is None and 'data-testid="claim"' in page and 'data-testid="editor"' not in page
    assert "Open the Bluetooth settings" in page and "the GEM&#x27;s first edge toward Bluetooth" in page
    assert 'data-testid="teacher-confidence">0.35<' in page
    assert page.count("<figcaption>0. ") == 1 and "Tap at (540, 525)" in page   # prefix, and the wrong step
    assert 'data-testid="mark-wrong"' in page and 'cx="540" cy="525"' in page
    assert 'data-testid="mark-teacher"' in page and 'cx="540" cy="375"' in page   # fraction → pixels
    assert client.post(f"/repairs/{repair.pk}/claim/").status_code == 302
    page = client.get(f"/repairs/{repair.pk}/").content.decode()
    assert 'data-testid="editor"' in page and 'id="repair-data"' in page
    script = json.loads(page.split('id="repair-data" type="application/json">')[1].split("</script>")[0])
    assert script["step"] == 1 and script["screen"] == [WIDTH, HEIGHT]
    assert script["teacher"]["action"] == {"action": "click", "point": [540, 375], "coords": "pixel"}
    assert script["start"]["cot"]["Plan"] == TEACHER_COT["Plan"] and script["keys"]["1"] == "click"
    client.force_login(bob)
    page = client.get(f"/repairs/{repair.pk}/").content.decode()
    assert "alice is repairing it" in page and 'data-testid="editor"' not in page
    assert "alice" in client.get("/repairs/").content.decode()


@pytest.mark.django_db
def test_an_annotator_may_see_the_frozen_screenshot_of_a_waiting_repair(client):
    repair = failed_with_repair()
    step = repair.trajectory.steps.get(index=1)
    client.force_login(annotator("alice"))
    response = client.get(step.screenshot.url)
    assert response.status_code == 200 and b"".join(response.streaming_content)[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.django_db
def test_submitting_through_the_page(client, applied):
    first, second = failed_with_repair(), failed_with_repair()
    alice, bob = annotator("alice"), annotator("bob")
    client.force_login(alice)
    assert client.post("/repairs/next/")["Location"] == f"/repairs/{first.pk}/"
    for raw in ("not json", "[1, 2]"):
        answer = submit(client, first, None, raw=raw)
        assert answer.status_code == 400 and "send JSON" in answer.json()["error"]
    answer = submit(client, first, {"step": "1", "action": {"action": "click", "point": [540, 375]}, "cot": TEACHER_COT})
    assert answer.status_code == 400 and "index" in answer.json()["error"]
    answer = submit(client, first, {"step": 1, "action": {"action": "click", "point": [1e400, 3]}, "cot": TEACHER_COT})
    assert answer.status_code == 400 and "point" in answer.json()["error"]
    answer = submit(client, first, {"step": 1, "action": {"action": "type", "text": "refuse me"}, "cot": TEACHER_COT})
    assert answer.status_code == 400 and answer.json()["error"] == "type: the corrected step cannot type into this screen"
    client.force_login(bob)
    answer = submit(client, first, {"step": 1, "action": {"action": "click", "point": [540, 375]}, "cot": TEACHER_COT})
    assert answer.status_code == 409 and "alice is repairing it" in answer.json()["error"]
    client.force_login(alice)
    answer = submit(client, first, {"step": 1, "action": {"action": "click", "point": [540, 375]}, "cot": TEACHER_COT})
    assert answer.status_code == 200, answer.content
    assert answer.json() == {"ok": True, "status": "done", "sample": None, "next": f"/repairs/{second.pk}/"}
    second.refresh_from_db()
    assert second.claimed_by == alice                                  # the next one is hers now
    assert len(applied) == 2 and applied[-1]["user"] == alice          # one refused by apply, one kept


@pytest.mark.django_db
def test_skip_and_cannot_repair_through_the_page(client):
    first, second = failed_with_repair(), failed_with_repair()
    alice = annotator("alice")
    client.force_login(alice)
    client.post("/repairs/next/")
    response = client.post(f"/repairs/{first.pk}/release/", {"then": "next"})
    assert response["Location"] == f"/repairs/{second.pk}/"
    response = client.post(f"/repairs/{second.pk}/cannot/", {"reason": ""})
    assert response["Location"] == f"/repairs/{second.pk}/"
    response = client.post(f"/repairs/{second.pk}/cannot/", {"reason": "the app shows a risk-control check"})
    assert response["Location"] == f"/repairs/{first.pk}/"              # the skipped one comes round again
    second.refresh_from_db()
    assert second.status == "failed" and "risk-control" in second.reason
    response = client.post(f"/repairs/{first.pk}/release/", {"then": "next"})
    assert response["Location"] == "/repairs/"                          # nothing else waits
    recent = client.get("/repairs/").content.decode()
    assert 'data-testid="recent"' in recent and f"#{second.pk}" in recent


@pytest.mark.django_db
def test_a_step_without_a_screenshot_can_only_be_refused_with_a_reason(client):
    repair = failed_with_repair(teacher=False, screenshots=False)
    alice = annotator("alice")
    client.force_login(alice)
    client.post(f"/repairs/{repair.pk}/claim/")
    page = client.get(f"/repairs/{repair.pk}/").content.decode()
    assert 'data-testid="no-screenshot"' in page and 'data-testid="no-frozen-screen"' in page
    assert 'data-testid="editor"' not in page and 'id="repair-data"' not in page
    assert "The Teacher made no attempt" in page and 'data-testid="cannot-form"' in page
    response = client.post(f"/repairs/{repair.pk}/cannot/", {"reason": "no screen was recorded"})
    assert response.status_code == 302
    repair.refresh_from_db()
    assert repair.status == "failed" and "no screen was recorded" in repair.reason


@pytest.mark.django_db
def test_a_repair_without_a_teacher_starts_from_the_wrong_steps_observation(client):
    repair = failed_with_repair(teacher=False)
    client.force_login(annotator("alice"))
    client.post(f"/repairs/{repair.pk}/claim/")
    page = client.get(f"/repairs/{repair.pk}/").content.decode()
    assert 'data-testid="editor"' in page and "The Teacher made no attempt" in page
    script = json.loads(page.split('id="repair-data" type="application/json">')[1].split("</script>")[0])
    assert script["teacher"] is None and script["start"] == {
        "action": None, "cot": {"Observation": "screen 1", "Reflection": "", "Plan": "", "Decision": "", "Memory": ""}}


@pytest.mark.django_db
def test_a_persons_correction_becomes_a_sample_in_the_sft_pool(monkeypatch, django_capture_on_commit_callbacks,
                                                                settings):
    """With the real apply_correction: prefix + the corrected step, routed into the SFT pool as
    ecdm_repaired, and the replay queued after commit."""
    from flywheel import tasks
    from flywheel.models import SftEntry

    settings.ECDM_REPLAY = True
    queued = []
    monkeypatch.setattr(tasks.repair_replay, "delay", queued.append)
    repair = failed_with_repair(steps=4, wrong=2)
    alice = annotator("alice")
    with django_capture_on_commit_callbacks(execute=True):
        done = repair_queue.submit(repair.pk, alice, {"action": "click", "point": [540, 375]}, TEACHER_COT, step=2)
    assert done.status == "done" and done.repaired_by == alice and done.correction["by"] == "human"
    assert queued == [repair.pk] and done.replay == {"status": "queued"}
    sample = done.sample
    assert sample.line == "ecdm" and sample.derived_from_id == repair.trajectory_id
    steps = list(sample.steps.order_by("index"))
    assert [s.index for s in steps] == [0, 1, 2]
    assert steps[-1].executed_action == {"action": "click", "point": [540, 375], "coords": "pixel"}
    assert steps[-1].cot["Plan"] == TEACHER_COT["Plan"]
    assert steps[-1].screenshot.name == repair.trajectory.steps.get(index=2).screenshot.name
    assert SftEntry.objects.filter(trajectory=sample, intake="ecdm_repaired", repair=done).exists()
    with pytest.raises(ClaimRefused, match="no longer waiting"):
        repair_queue.submit(repair.pk, alice, {"action": "click", "point": [540, 375]}, TEACHER_COT)
