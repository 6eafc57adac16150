"""The semi-automatic session through its views, on the virtual farm (Django test client)."""
import json

import pytest

from devices.models import Device, Lease
from flywheel.models import CptEntry, SftEntry, Step, Trajectory

pytestmark = pytest.mark.django_db


def take_next(client, **data):
    response = client.post("/queue/take-next/", data)
    assert response.status_code == 302, response
    return response


def session_of(user):
    return Trajectory.objects.filter(annotator=user, line="semi_auto").latest("id")


def pending(trajectory):
    return trajectory.steps.get(executed_action__isnull=True)


def prepare(client, trajectory):
    """What the page does by POST when it opens: observe the phone and ask the policy."""
    page = client.post(f"/session/{trajectory.pk}/prepare/", follow=True)
    assert page.status_code == 200, page
    return page


def execute(client, trajectory, step, action=None, cot=None, by_hand=False):
    body = {"step": step.index, "action": action or step.proposed_action, "cot": cot or step.cot, "by_hand": by_hand}
    return client.post(f"/session/{trajectory.pk}/execute/", json.dumps(body), content_type="application/json")



def open_session(client_as, role_users, farm_devices, import_task, key="settings-dark-theme-l1"):
    """The annotator takes the next query (a farm task) and is given a session on a phone."""
    farm_devices()
    import_task(key)
    client = client_as("annotator")
    take_next(client)
    return client, session_of(role_users["annotator"])

def test_annotator_verifies_a_whole_task_into_the_sft_pool(client_as, role_users, farm_devices, import_task):
    farm_devices()
    query = import_task("settings-dark-theme-l1")
    client = client_as("annotator")
    assert b"Take next" in client.get("/queue/").content
    response = take_next(client)
    trajectory = session_of(role_users["annotator"])
    assert response["Location"] == f"/session/{trajectory.pk}/"
    lease = Lease.objects.get(holder=f"semi-auto:trajectory:{trajectory.pk}", released_at__isnull=True)
    assert "com.android.settings" in lease.device.installed_apps
    query.refresh_from_db()
    assert query.status == "in_progress" and query.assignee == role_users["annotator"]

    finished, seen = False, 0
    while not finished:
        if seen:  # taking the query prepared the first step; later ones are prepared by POST
            assert b"Prepare the next step" in client.get(f"/session/{trajectory.pk}/").content
            assert not trajectory.steps.filter(executed_action__isnull=True).exists()  # GET changed nothing
            prepare(client, trajectory)
        step = pending(trajectory)
        assert step.screenshot.name.startswith("blobs/") and step.hierarchy.name.endswith(".xml")
        assert step.proposed_action and step.cot["Observation"] and step.cot["Decision"]
        assert step.foreground_package  # step-level context (§2.3.7)
        answer = execute(client, trajectory, step).json()
        assert answer["ok"], answer
        finished = answer["finished"]
        seen += 1
        assert seen < 10

    trajectory.refresh_from_db()
    assert trajectory.status == "completed" and trajectory.stop_reason == "terminate: success"
    assert trajectory.destination == "sft" and trajectory.consistency_issues == []
    assert SftEntry.objects.filter(trajectory=trajectory, intake="semi_auto_verified").exists()
    steps = list(trajectory.steps.order_by("index"))
    assert [s.executed_action["action"] for s in steps] == ["open", "click", "click", "terminate"]
    assert all(s.edit["accepted_unchanged"] for s in steps)
    assert all("verify_ms" in s.timings and "observe_ms" in s.timings for s in steps)
    # every executed step went through CPT cleaning; what passed is in the pool
    print([s.audit["cpt"] for s in steps])
    accepted = [s for s in steps if s.audit["cpt"] == "accepted"]
    assert accepted and CptEntry.objects.filter(step__trajectory=trajectory).count() == len(accepted)
    query.refresh_from_db()
    assert query.status == "done"
    assert not Lease.objects.filter(holder=f"semi-auto:trajectory:{trajectory.pk}", released_at__isnull=True).exists()
    # the phone really is in dark mode
    from devices.phone import PhoneConnection
    device = trajectory.device
    assert PhoneConnection.for_device(device).shell("settings get secure ui_night_mode").strip() == "2"
    # and the dashboard counts the verified steps
    dashboard = client_as("manager").get("/dashboard/").content.decode()
    assert "annotator-user" in dashboard and "offline-rules-v1" in dashboard and "100%" in dashboard


def test_edits_are_measured_and_the_decision_follows_the_executed_action(client_as, role_users, farm_devices, import_task):
    client, trajectory = open_session(client_as, role_users, farm_devices, import_task)
    prepare(client, trajectory)
    execute(client, trajectory, pending(trajectory))                # open, accepted
    prepare(client, trajectory)
    step = pending(trajectory)
    x, y = step.proposed_action["point"]
    moved = {**step.proposed_action, "point": [x + 30, y + 40]}     # the tap box dragged 50 px
    assert execute(client, trajectory, step, action=moved).json()["ok"]
    step.refresh_from_db()
    assert step.edit["pixel_distance"] == 50.0 and not step.edit["accepted_unchanged"]
    assert step.edit["decision_regenerated"] and f"({x + 30}, {y + 40})" in step.cot["Decision"]
    assert step.executed_action["point"] == [x + 30, y + 40]
    # a changed action type and reasoning are recorded too
    prepare(client, trajectory)
    step = pending(trajectory)
    cot = {**step.cot, "Plan": "Go back instead"}
    back = {"action": "system_button", "button": "back"}
    answer = execute(client, trajectory, step, action=back, cot=cot).json()
    step.refresh_from_db()
    assert answer["ok"] and step.edit["type_changed"] and step.edit["to_type"] == "system_button"
    assert step.edit["cot_changed"] == ["Decision", "Plan"] or step.edit["cot_changed"] == ["Plan"]


def test_no_matching_phone_leaves_the_query_in_the_queue(client_as, role_users, farm_devices, import_task):
    farm_devices()
    query = import_task("settings-dark-theme-l1", apps=["com.example.absent"], requirements={})
    client = client_as("annotator")
    response = client.post("/queue/take-next/", follow=True)
    assert b"no free phone offers com.example.absent" in response.content
    query.refresh_from_db()
    assert query.status == "ready" and not Trajectory.objects.exists()


def test_not_executable_sends_the_query_back_to_review(client_as, role_users, farm_devices, import_task):
    farm_devices()
    query = import_task("settings-dark-theme-l1")
    client = client_as("annotator")
    take_next(client)
    trajectory = session_of(role_users["annotator"])
    client.post(f"/session/{trajectory.pk}/not-executable/", {"reason": "Dark theme is missing on this build"})
    trajectory.refresh_from_db()
    query.refresh_from_db()
    assert trajectory.status == "not_executable" and query.status == "review"
    assert query.status_reason == "Dark theme is missing on this build"
    assert Device.objects.get(pk=trajectory.device_id).status == "idle"


def test_pause_frees_the_phone_and_resume_takes_it_back(client_as, role_users, farm_devices, import_task):
    client, trajectory = open_session(client_as, role_users, farm_devices, import_task)
    assert client.post(f"/session/{trajectory.pk}/heartbeat/").json() == {"lease": True, "status": "running"}
    client.post(f"/session/{trajectory.pk}/pause/")
    trajectory.refresh_from_db()
    assert trajectory.status == "paused" and Device.objects.get(pk=trajectory.device_id).status == "idle"
    assert client.post(f"/session/{trajectory.pk}/heartbeat/").json()["lease"] is False
    client.post(f"/session/{trajectory.pk}/resume/")
    trajectory.refresh_from_db()
    assert trajectory.status == "running" and Device.objects.get(pk=trajectory.device_id).status == "leased"
    # leaving the page (sendBeacon) pauses; coming back resumes
    client.post(f"/session/{trajectory.pk}/leave/")
    trajectory.refresh_from_db()
    assert trajectory.status == "paused"
    assert client.get(f"/session/{trajectory.pk}/").status_code == 200
    trajectory.refresh_from_db()
    assert trajectory.status == "paused"                        # opening the page changes nothing
    prepare(client, trajectory)                                 # the page's POST takes the phone again
    trajectory.refresh_from_db()
    assert trajectory.status == "running"


def test_a_gate_failure_is_shown_for_fixing_not_accepted(client_as, role_users, farm_devices, import_task):
    client, trajectory = open_session(client_as, role_users, farm_devices, import_task)
    prepare(client, trajectory)
    step = pending(trajectory)
    bad_cot = {**step.cot, "Observation": "A \"Checkout\" page", "Memory": "the order number is 4711"}
    execute(client, trajectory, step, cot=bad_cot)
    for _ in range(5):
        prepare(client, trajectory)
        step = pending(trajectory)
        if execute(client, trajectory, step).json()["finished"]:
            break
    trajectory.refresh_from_db()
    assert trajectory.status == "completed" and trajectory.destination == ""
    assert {issue["rule"] for issue in trajectory.consistency_issues} == {"observation_matches_screen", "memory_referenced"}
    assert not SftEntry.objects.filter(trajectory=trajectory).exists()
    page = client.get(f"/session/{trajectory.pk}/").content.decode()
    assert "which is not on the screen" in page and "never referenced" in page
    first = trajectory.steps.get(index=0)
    fixed = {**first.cot, "Observation": first.cot["Observation"].replace("A \"Checkout\" page", "The home screen"), "Memory": ""}
    fixed["Observation"] = "The launcher home screen with the Settings icon"
    client.post(f"/session/{trajectory.pk}/fix/", {"step": 0, **fixed})
    trajectory.refresh_from_db()
    assert trajectory.destination == "sft" and trajectory.consistency_issues == []
    first.refresh_from_db()
    assert first.edit["gate_fixes"][0]["before"]["Memory"] == "the order number is 4711"


def test_sessions_belong_to_their_annotator(client_as, role_users, farm_devices, import_task):
    farm_devices()
    import_task("settings-dark-theme-l1")
    take_next(client_as("annotator"))
    trajectory = session_of(role_users["annotator"])
    from django.contrib.auth.models import Group, User
    other = User.objects.create_user("other-annotator", password="x")
    other.groups.add(Group.objects.get(name="annotator"))
    from django.test import Client
    intruder = Client()
    intruder.force_login(other)
    assert intruder.get(f"/session/{trajectory.pk}/").status_code == 403
    assert intruder.post(f"/session/{trajectory.pk}/execute/", "{}", content_type="application/json").status_code == 403
    assert client_as("manager").get(f"/session/{trajectory.pk}/").status_code == 403


def test_an_endpoint_policy_proposes_and_its_exchange_is_stored(client_as, role_users, farm_devices, import_task):
    from flywheel.models import ModelVersion
    from tests.flywheel.openai_stub import StubOpenAI

    farm_devices()
    import_task("settings-dark-theme-l1")
    client = client_as("annotator")
    reply = ("[Observation] The home screen with app icons\n[Plan] open Settings\n"
             "[Decision] Open the Settings app\n[Memory]\n<tool_call>{\"action\": \"open\", \"app\": \"Settings\"}</tool_call>")
    with StubOpenAI() as stub:
        version = ModelVersion.objects.create(name="stub-agent", kind="endpoint", endpoint_url=stub.url,
                                              served_model_name=stub.model, sampling={"retries": 0})
        stub.replies.append((200, stub.chat_reply(reply), 0))
        take_next(client, model_version=version.pk)
        trajectory = session_of(role_users["annotator"])
        assert trajectory.model_version == version
        page = prepare(client, trajectory).content.decode()
        step = pending(trajectory)
        assert step.proposed_action == {"action": "open", "app": "Settings"}
        assert step.model_io["response"]["choices"][0]["message"]["content"] == reply
        assert step.model_io["request"]["model"] == stub.model and "Open the Settings app" in page
        assert execute(client, trajectory, step).json()["ok"]
        # the endpoint breaks: the person is told and acts by hand; nothing is lost
        stub.replies.append((500, {"error": "CUDA out of memory"}, 0))
        page = prepare(client, trajectory).content.decode()
        step = pending(trajectory)
    assert "The policy gave no usable proposal" in page and step.proposed_action is None
    assert step.model_io["attempts"][0]["status"] == 500
    by_hand = {"action": "click", "point": [540, 1640], "coords": "pixel"}
    assert execute(client, trajectory, step, action=by_hand, cot={"Observation": "Settings list",
                                                                   "Plan": "open Display", "Decision": "Tap Display"},
                   by_hand=True).json()["ok"]
    step.refresh_from_db()
    assert step.edit["by_hand"] and step.edit["type_changed"] and not step.edit["accepted_unchanged"]


def test_the_safety_audit_blocks_and_the_step_waits(client_as, role_users, farm_devices, import_task):
    from devices.models import AuditEvent, SafetyRule

    farm_devices()
    import_task("settings-dark-theme-l1")
    SafetyRule.objects.create(name="no dark theme", category="irreversible", element_patterns=["^Dark theme$"],
                              reason="dark theme is forbidden here")
    client = client_as("annotator")
    take_next(client)
    trajectory = session_of(role_users["annotator"])
    for _ in range(2):                                          # open, then Display & brightness
        prepare(client, trajectory)
        assert execute(client, trajectory, pending(trajectory)).json()["ok"]
    prepare(client, trajectory)
    step = pending(trajectory)
    answer = execute(client, trajectory, step)
    assert answer.status_code == 409 and "blocked by the safety audit: dark theme is forbidden here" in answer.json()["error"]
    step.refresh_from_db()
    assert step.executed_action is None and step.audit["blocked"]
    assert AuditEvent.objects.filter(reason__contains="dark theme is forbidden").exists()
    # another action for the same step is still possible
    assert execute(client, trajectory, step, action={"action": "system_button", "button": "back"}).json()["ok"]


def test_an_expired_lease_is_taken_again_when_the_page_is_opened(client_as, role_users, farm_devices, import_task):
    from devices.leases import expire_stale_leases

    client, trajectory = open_session(client_as, role_users, farm_devices, import_task)
    prepare(client, trajectory)
    Lease.objects.filter(holder=f"semi-auto:trajectory:{trajectory.pk}").update(expires_at="2000-01-01T00:00:00Z")
    assert expire_stale_leases() == 1                          # beat frees the phone of a silent page
    assert Device.objects.get(pk=trajectory.device_id).status == "idle"
    step = pending(trajectory)
    assert execute(client, trajectory, step).status_code == 409
    assert client.get(f"/session/{trajectory.pk}/").status_code == 200
    assert not Lease.objects.filter(holder=f"semi-auto:trajectory:{trajectory.pk}", released_at__isnull=True).exists()
    prepare(client, trajectory)
    assert Lease.objects.filter(holder=f"semi-auto:trajectory:{trajectory.pk}", released_at__isnull=True).exists()
    assert execute(client, trajectory, pending(trajectory)).json()["ok"]


def test_a_step_runs_once_even_if_confirmed_twice(client_as, role_users, farm_devices, import_task):
    from django.utils import timezone

    client, trajectory = open_session(client_as, role_users, farm_devices, import_task)
    prepare(client, trajectory)
    step = pending(trajectory)
    Step.objects.filter(pk=step.pk).update(executing_since=timezone.now())   # another request holds it
    answer = execute(client, trajectory, step)
    assert answer.status_code == 409 and "being executed already" in answer.json()["error"]
    Step.objects.filter(pk=step.pk).update(executing_since=None)
    assert execute(client, trajectory, step).json()["ok"]
    assert execute(client, trajectory, step).status_code == 409            # not pending any more


def test_a_clarify_waits_for_the_users_answer_and_the_session_goes_on(client_as, role_users, farm_devices,
                                                                      import_task):
    """Table 3: clarify pauses for the user's answer (the annotator plays the user), then the
    policy goes on with the answer in its history; it does not end the trajectory."""
    client, trajectory = open_session(client_as, role_users, farm_devices, import_task)
    prepare(client, trajectory)
    step = pending(trajectory)
    question = {"action": "clarify", "question": "Dark or light?", "choices": ["dark", "light"]}
    refused = execute(client, trajectory, step, action=question)
    assert refused.status_code == 409 and "answer" in refused.json()["error"]
    body = {"step": step.index, "action": question, "cot": step.cot, "reply": "dark"}
    answer = client.post(f"/session/{trajectory.pk}/execute/", json.dumps(body),
                         content_type="application/json").json()
    assert answer["ok"] and not answer["finished"], answer
    step.refresh_from_db()
    assert step.executed_action["action"] == "clarify" and step.edit["clarify_answer"] == "dark"
    trajectory.refresh_from_db()
    assert trajectory.status == "running"
    prepare(client, trajectory)  # the next step is observed and proposed
    from devices.observation import Observation
    from flywheel.collection.recorder import policy_state
    from flywheel.policies.protocol import history_text

    state = policy_state(trajectory, Observation(png=b"", hierarchy_xml="<hierarchy/>", width=1080, height=2400))
    assert "The user answered: dark" in history_text(state.history)
