"""The environment service over HTTP on the virtual farm: reset / step / close drive real (virtual)
phones through the executor, the safety audit and the step recorder; every episode is judged and
routed; only the token or a manager/admin gets in, and only the opener steps its environment."""
import base64
import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from devices import leases
from devices.models import AuditEvent, Device, Lease
from devices.phone import PhoneConnection
from devices.registry import discover_devices
from devices.uitree import all_nodes, parse_hierarchy
from flywheel.collection.recovery import recover_interrupted
from flywheel.models import App, CptEntry, Query, Step, Trajectory
from flywheel.policies import OfflinePolicy, PolicyState
from flywheel.policies.protocol import HistoryEntry, format_output, system_prompt

pytestmark = pytest.mark.django_db

TOKEN = "env-test-token-7f3a"
GOAL = "Tap Settings, then tap Bluetooth"
KNOWN_PATH = {"mode": "tap", "summary": "Settings → Bluetooth (the secret path)", "steps": [
    {"action": "open", "app": "com.android.settings"}, {"action": "click", "target": {"text": "Bluetooth"}}]}
CHECKS = {"terminal": [{"check": "foreground", "package": "com.android.settings"},
                       {"check": "screen", "contains": "bluetooth_switch"}],
          "milestones": [{"name": "bluetooth page", "resource_id": "com.android.settings:id/bluetooth_switch"}]}
COT = {"Observation": "The screen shows what I need.", "Plan": "Reach the Bluetooth page, then finish.",
       "Decision": "Act.", "Memory": ""}


@pytest.fixture
def farm(farm_settings, settings):
    settings.ENV_SERVICE_TOKEN = TOKEN
    discover_devices()
    return farm_settings


def bluetooth_query(key="env-bt", **fields):
    query = Query.objects.create(key=key, text=GOAL, tier="L1", known_path=KNOWN_PATH, verification=CHECKS,
                                 reset={"force_stop": ["com.android.settings"], "clear": [], "home": True}, **fields)
    query.set_apps([App.objects.get_or_create(package="com.android.settings")[0]])
    return query


def shop_query():
    query = Query.objects.create(key="env-shop", text="Look at the shop", tier="L1",
                                 reset={"force_stop": ["com.sim.shop"], "clear": [], "home": True})
    query.set_apps([App.objects.get_or_create(package="com.sim.shop")[0]])
    return query


def post(name, body, client=None, token=TOKEN, **headers):
    """POST JSON to /api/env/<name> with the bearer token (token=None: the client's session only)."""
    if token is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return (client or Client()).post(f"/api/env/{name}", data=json.dumps(body) if not isinstance(body, str) else body,
                                     content_type="application/json", **headers)


def ok(response):
    assert response.status_code == 200, (response.status_code, response.content[:500])
    return response.json()


def node_center(hierarchy_xml, text):
    node = next(n for n in all_nodes(parse_hierarchy(hierarchy_xml)) if text in (n.text, n.desc))
    return list(node.center)


def click_text(reply, text):
    """The model's raw text for a click on the element labelled `text` (the offline format)."""
    point = node_center(reply["observation"]["hierarchy"], text)
    return format_output({**COT, "Decision": f'Tap "{text}"'}, {"action": "click", "point": point, "coords": "pixel"})


def phone_of(env_id):
    return PhoneConnection.for_device(Trajectory.objects.get(pk=env_id).device)


def images_in(messages):
    return [part for part in messages[1]["content"] if part["type"] == "image_url"]


def test_a_full_episode_is_recorded_judged_and_routed(farm):
    query = bluetooth_query()
    reply = ok(post("reset", {"query_id": query.pk, "hierarchy": True}))
    env_id, observation = reply["env_id"], reply["observation"]
    assert observation["goal"] == GOAL and observation["step"] == 0 and observation["screen_size"] == [1080, 2400]
    assert base64.b64decode(observation["screenshot"]).startswith(b"\x89PNG")
    assert "launcher" in observation["foreground"]
    messages = reply["messages"]
    assert messages[0] == {"role": "system", "content": system_prompt()}  # the goal alone: no known path
    assert messages[1]["content"][0]["text"].startswith(f"Goal: {GOAL}\n\nHistory:\nNo earlier steps.")
    assert "secret path" not in json.dumps(messages) and len(images_in(messages)) == 1
    trajectory = Trajectory.objects.get(pk=env_id)
    assert trajectory.line == "rl" and trajectory.run is None and trajectory.status == "running"
    lease = Lease.objects.get(holder=f"collection:trajectory:{env_id}", released_at__isnull=True)
    assert lease.device == trajectory.device and lease.device.status == "leased"

    reply = ok(post("step", {"env_id": env_id, "output": click_text(reply, "Settings"), "hierarchy": True}))
    assert not reply["done"] and reply["reward"] == 0.0 and reply["info"]["step"] == 0
    assert reply["info"]["executed_action"]["action"] == "click" and reply["info"]["audit"]["blocked"] is False
    assert reply["observation"]["step"] == 1 and reply["observation"]["foreground"] == "com.android.settings"
    assert "Step 1: [Observation]" in reply["messages"][1]["content"][0]["text"]
    assert len(images_in(reply["messages"])) == 2  # the last K screenshots, the current one last

    reply = ok(post("step", {"env_id": env_id, "output": click_text(reply, "Bluetooth"), "hierarchy": True}))
    assert not reply["done"] and "bluetooth_switch" in reply["observation"]["hierarchy"]
    finish = format_output({**COT, "Decision": "Finish: the task is complete"}, {"action": "terminate", "status": "success"})
    reply = ok(post("step", {"env_id": env_id, "output": finish}))
    assert reply["done"] and reply["observation"] is None and reply["info"]["stop_reason"] == "terminate: success"
    assert reply["info"]["verdict"] == "true" and reply["reward"] == 1.0 and reply["info"]["destination"]

    trajectory.refresh_from_db()
    assert trajectory.status == "completed" and trajectory.verdict == "true" and trajectory.destination
    steps = list(trajectory.steps.order_by("index"))
    assert [s.executed_action["action"] for s in steps] == ["click", "click", "terminate"]
    assert all(s.audit["blocked"] is False and s.cot["Observation"] and s.screenshot and s.hierarchy for s in steps)
    assert steps[0].model_io["output"].startswith("[Observation]") and steps[0].proposed_action["coords"] == "pixel"
    assert CptEntry.objects.filter(step__trajectory=trajectory).count() >= 2
    assert {v.system: v.vote for v in trajectory.votes.all()}["A"] == "true"  # judged on the phone's final screen
    assert not Lease.objects.filter(holder=f"collection:trajectory:{env_id}", released_at__isnull=True).exists()
    assert Device.objects.get(pk=trajectory.device_id).status == "idle"

    closed = ok(post("close", {"env_id": env_id}))
    assert closed == ok(post("close", {"env_id": env_id}))  # closing twice is harmless
    assert closed["trajectory"] == env_id and closed["verdict"] == "true" and closed["judged"] and closed["steps"] == 3
    again = post("step", {"env_id": env_id, "output": finish})
    assert again.status_code == 409 and "finished" in again.json()["detail"]


def test_unparseable_output_is_refused_and_nothing_runs(farm):
    reply = ok(post("reset", {"query_id": bluetooth_query().pk, "hierarchy": True}))
    env_id = reply["env_id"]
    before = phone_of(env_id).foreground()["package"]
    refused = post("step", {"env_id": env_id, "output": "I would tap on Settings now."})
    assert refused.status_code == 400 and "does not follow the protocol" in refused.json()["detail"]
    assert refused.json()["done"] is False
    step = Trajectory.objects.get(pk=env_id).steps.get()
    assert step.executed_action is None and step.audit is None and "protocol" in step.model_io["error"]
    assert phone_of(env_id).foreground()["package"] == before
    # The session goes on: the client samples again.
    reply = ok(post("step", {"env_id": env_id, "output": click_text(reply, "Settings")}))
    assert reply["info"]["executed_action"]["action"] == "click"
    for attempt in range(3):
        refused = post("step", {"env_id": env_id, "output": "<tool_call>{\"action\": \"fly\"}</tool_call>"})
        assert refused.status_code == 400 and refused.json()["done"] is (attempt == 2)
    trajectory = Trajectory.objects.get(pk=env_id)
    assert trajectory.status == "interrupted" and trajectory.stop_reason.startswith("policy error")
    assert trajectory.verdict != "pending" and trajectory.steps.filter(executed_action__isnull=False).count() == 1
    assert post("close", {"env_id": env_id}).json()["status"] == "interrupted"


def test_a_blocked_action_is_reported_and_never_executed(farm):
    env_id = ok(post("reset", {"query_id": shop_query().pk}))["env_id"]
    phone = phone_of(env_id)
    orders = "content query --uri content://com.sim.shop/orders"
    try:
        phone.shell("am start -n com.sim.shop/.PaymentConfirmActivity")
        pay = node_center(phone.dump_hierarchy(), "Pay now")
        paid_before = phone.shell(orders)
        click = {"action": "click", "point": pay, "coords": "pixel"}
        reply = ok(post("step", {"env_id": env_id, "action": click, "cot": {"Plan": "Pay for the order."}}))
        assert not reply["done"] and reply["info"]["audit"]["blocked"] and reply["info"]["executed_action"] is None
        assert "payment" in reply["info"]["audit"]["reason"].lower() and reply["observation"]["step"] == 1
        assert phone.shell(orders) == paid_before
        blocked = Trajectory.objects.get(pk=env_id).steps.get(index=0)
        assert blocked.executed_action is None and blocked.audit["blocked"] and blocked.cot["Plan"] == "Pay for the order."
        assert AuditEvent.objects.filter(rule__name="Payment confirmation").count() == 1
        reply = ok(post("step", {"env_id": env_id, "action": click}))  # the second block in a row ends it
        assert reply["done"] and reply["info"]["stop_reason"].startswith("blocked by the safety audit")
        assert phone.shell(orders) == paid_before
        trajectory = Trajectory.objects.get(pk=env_id)
        assert trajectory.verdict != "pending" and not trajectory.steps.filter(executed_action__isnull=False).exists()
    finally:
        phone.shell("pm clear com.sim.shop")
        post("close", {"env_id": env_id})


def test_one_request_at_a_time_per_environment(farm):
    reply = ok(post("reset", {"query_id": bluetooth_query().pk, "hierarchy": True}))
    env_id = reply["env_id"]
    step = Trajectory.objects.get(pk=env_id).steps.get()
    Step.objects.filter(pk=step.pk).update(executing_since=timezone.now())  # another request is executing it
    for body in ({"output": click_text(reply, "Settings")}, {"output": "not the protocol"}):
        busy = post("step", {"env_id": env_id, **body})
        assert busy.status_code == 409 and "being executed" in busy.json()["detail"]
    step.refresh_from_db()
    assert step.executed_action is None and step.proposed_action is None and step.model_io is None
    assert phone_of(env_id).foreground()["package"] != "com.android.settings"
    ok(post("close", {"env_id": env_id}))


def test_held_out_and_unapproved_queries_are_refused(farm):
    held_out = bluetooth_query("env-held-out", evaluation_only=True)
    refused = post("reset", {"query_id": held_out.pk})
    assert refused.status_code == 403 and "held out for evaluation" in refused.json()["detail"]
    in_review = bluetooth_query("env-review", status=Query.Status.REVIEW)
    assert post("reset", {"query_id": in_review.pk}).status_code == 409
    assert post("reset", {"query_id": 10**9}).status_code == 404
    assert not Trajectory.objects.exists() and not Lease.objects.exists()


def test_only_the_token_or_a_manager_gets_in(farm, settings, role_users):
    unknown = {"env_id": 10**9}  # past the door the service answers 404; at the door, 403
    assert post("close", unknown, token=None).status_code == 403
    wrong = post("close", unknown, token="not-the-token")
    assert wrong.status_code == 403 and "wrong" in wrong.json()["detail"]
    assert post("close", unknown).status_code == 404
    for role, status in (("annotator", 403), ("adjudicator", 403), (None, 403), ("manager", 404), ("admin", 404)):
        client = Client()
        client.force_login(role_users[role])
        assert post("close", unknown, client=client, token=None).status_code == status, role
    settings.ENV_SERVICE_TOKEN = ""  # token access off: the same token no longer opens anything
    off = post("close", unknown)
    assert off.status_code == 403 and "off" in off.json()["detail"]


def test_a_signed_in_browser_must_pass_csrf_but_a_token_needs_none(farm, role_users):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(role_users["manager"])
    refused = post("close", {"env_id": 10**9}, client=browser, token=None)
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    browser.get("/dashboard/")  # a page with a form hands out the CSRF cookie
    csrf = browser.cookies["csrftoken"].value
    assert post("close", {"env_id": 10**9}, client=browser, token=None, HTTP_X_CSRFTOKEN=csrf).status_code == 404
    assert post("close", {"env_id": 10**9}, client=Client(enforce_csrf_checks=True)).status_code == 404


def test_only_the_opener_steps_its_environment(farm, role_users):
    manager = Client()
    manager.force_login(role_users["manager"])
    by_token = ok(post("reset", {"query_id": bluetooth_query().pk, "hierarchy": True}))
    by_manager = ok(post("reset", {"query_id": bluetooth_query("env-bt-2").pk}, client=manager, token=None))
    output = click_text(by_token, "Settings")
    for env_id, client, token in ((by_token["env_id"], manager, None), (by_manager["env_id"], None, TOKEN)):
        refused = post("step", {"env_id": env_id, "output": output}, client=client, token=token)
        assert refused.status_code == 403 and "another client" in refused.json()["detail"]
        assert post("close", {"env_id": env_id}, client=client, token=token).status_code == 403
    assert not Trajectory.objects.filter(steps__executed_action__isnull=False).exists()
    admin = Client()
    admin.force_login(role_users["admin"])  # another person, even an admin, is another client
    assert post("step", {"env_id": by_manager["env_id"], "output": output}, client=admin, token=None).status_code == 403
    assert ok(post("step", {"env_id": by_token["env_id"], "output": output}))["info"]["executed_action"]
    assert ok(post("close", {"env_id": by_manager["env_id"]}, client=manager, token=None))["status"] == "completed"
    assert ok(post("close", {"env_id": by_token["env_id"]}))["judged"]


def test_no_free_phone_is_503_with_retry_after(farm):
    for device in Device.objects.filter(status="idle"):
        leases.acquire(device, holder="someone-else")
    busy = post("reset", {"query_id": bluetooth_query().pk})
    assert busy.status_code == 503 and "no free phone" in busy.json()["detail"] and int(busy["Retry-After"]) > 0
    assert not Trajectory.objects.exists()


def test_a_vanished_clients_trajectory_is_interrupted_and_routed(farm):
    reply = ok(post("reset", {"query_id": bluetooth_query().pk, "hierarchy": True}))
    env_id = reply["env_id"]
    ok(post("step", {"env_id": env_id, "output": click_text(reply, "Settings")}))
    recover_interrupted(stale_after=timedelta(0))  # a live session is left alone
    assert Trajectory.objects.get(pk=env_id).status == "running"
    # The client vanishes: nobody heartbeats, the lease runs out, the beat's recovery takes over.
    Lease.objects.filter(holder=f"collection:trajectory:{env_id}").update(expires_at=timezone.now() - timedelta(seconds=1))
    assert recover_interrupted(stale_after=timedelta(0))["trajectories"] == 1
    trajectory = Trajectory.objects.get(pk=env_id)
    assert trajectory.status == "interrupted" and trajectory.verdict != "pending" and trajectory.destination
    assert trajectory.steps.filter(executed_action__isnull=False).count() == 1  # nothing is lost
    assert Device.objects.get(pk=trajectory.device_id).status == "idle"
    late = post("step", {"env_id": env_id, "output": "anything"})
    assert late.status_code == 409 and late.json()["done"] is True
    assert ok(post("close", {"env_id": env_id}))["status"] == "interrupted"


def test_a_step_after_the_lease_ran_out_ends_the_episode(farm):
    reply = ok(post("reset", {"query_id": bluetooth_query().pk, "hierarchy": True}))
    env_id = reply["env_id"]
    Lease.objects.filter(holder=f"collection:trajectory:{env_id}").update(expires_at=timezone.now() - timedelta(seconds=1))
    late = post("step", {"env_id": env_id, "output": click_text(reply, "Settings")})
    assert late.status_code == 409 and "lost its phone" in late.json()["detail"]
    trajectory = Trajectory.objects.get(pk=env_id)
    assert trajectory.status == "interrupted" and trajectory.stop_reason.startswith("lease lost")
    assert trajectory.verdict != "pending" and not trajectory.steps.filter(executed_action__isnull=False).exists()


@pytest.mark.parametrize("name, body, message", [
    ("reset", "[1, 2]", "JSON object"),
    ("reset", "{not json", "JSON parse error"),
    ("reset", {}, "'query_id' is required"),
    ("reset", {"query_id": "1"}, "positive integer"),
    ("reset", {"query_id": True}, "positive integer"),
    ("reset", {"query_id": 1, "screenshots_k": 0}, "from 1 to"),
    ("reset", {"query_id": 1, "rm": "-rf /"}, "unknown field 'rm'"),
    ("step", {"env_id": 1}, "exactly one of"),
    ("step", {"env_id": 1, "output": "x", "action": {"action": "wait"}}, "exactly one of"),
    ("step", {"env_id": 1, "output": 3}, "must be a string"),
    ("step", {"env_id": 1, "action": {"action": "wait"}, "cot": {"Secret": "x"}}, "no tag 'Secret'"),
    ("step", {"env_id": 1, "output": "x", "cot": {}}, "'cot' goes with 'action'"),
    ("close", {"env_id": -4}, "positive integer"),
])
def test_bad_input_is_a_400_that_says_why(db, settings, name, body, message):
    settings.ENV_SERVICE_TOKEN = TOKEN
    response = post(name, body)
    assert response.status_code == 400 and message in response.json()["detail"], response.json()


def offline_agent(query_id, max_steps=10):
    """An external RL client's loop: messages → its policy → raw output → step. The policy is the
    offline one, which reads the UI tree (the observation's hierarchy) besides the messages."""
    policy, history = OfflinePolicy(), []
    reply = ok(post("reset", {"query_id": query_id, "hierarchy": True, "screenshots_k": 2}))
    env_id = reply["env_id"]
    for _ in range(max_steps):
        observation, messages = reply["observation"], reply["messages"]
        goal = messages[1]["content"][0]["text"].split("\n", 1)[0].removeprefix("Goal: ")
        screenshots = [base64.b64decode(part["image_url"]["url"].split(",", 1)[1]) for part in images_in(messages)]
        state = PolicyState(goal=goal, history=history, screenshots=screenshots,
                            hierarchy_xml=observation["hierarchy"], screen_size=tuple(observation["screen_size"]),
                            foreground={"package": observation["foreground"], "activity": observation["activity"]})
        proposal = policy.propose(state)
        reply = ok(post("step", {"env_id": env_id, "output": format_output(proposal.cot, proposal.action),
                                 "hierarchy": True, "screenshots_k": 2}))
        if reply["info"]["executed_action"]:
            history.append(HistoryEntry(cot=proposal.cot, action=reply["info"]["executed_action"]))
        if reply["done"]:
            return env_id, reply, ok(post("close", {"env_id": env_id}))
    return env_id, reply, ok(post("close", {"env_id": env_id}))


def test_an_external_loop_drives_a_phone_with_the_offline_policy(farm):
    env_id, last, closed = offline_agent(bluetooth_query().pk)
    assert last["done"] and last["info"]["stop_reason"] == "terminate: success", last["info"]
    assert last["reward"] == 1.0 and closed["verdict"] == "true" and closed["steps"] == 3
    trajectory = Trajectory.objects.get(pk=env_id)
    assert [s.executed_action["action"] for s in trajectory.steps.order_by("index")] == ["click", "click", "terminate"]
    assert trajectory.steps.first().cot["Decision"] == 'Tap "Settings" at (405, 770)'
