"""Issue #36: the console runs on real phones with the same code, relying on nothing only the farm
offers. Phones in the farm's real-phone mode answer only what a real Android phone answers and count
every request that only a farm would answer; here the loop runs on them — collection on the
semi-automatic, schema-guided, automatic, external, RL and benchmark lines (prerequisites set up by their recipe,
hand-back states shown by the apps themselves), judging and routing, the ECDM's attribution, repair
and replay, the hand-back channel, teardown — and not one such request is made."""
import json
from pathlib import Path

import pytest

from benchmark import versions
from benchmark.infer import launch_evaluation
from benchmark.models import EvalResult
from devices import teardown
from devices.models import Device
from devices.phone import PhoneConnection
from devices.registry import discover_devices
from flywheel.collection import handback
from flywheel.collection.driver import drive_host
from flywheel.collection.launch import launch_run
from flywheel.models import Query, Repair, RlQueryEntry, Trajectory
from flywheel.policies import default_policy_version
from flywheel.queries.external import ingest_external
from flywheel.queries.jsonl import import_queries
from flywheel.queries.recipes import import_recipes
from flywheel.repair import ecdm, step_correction
from simfarm.farm import Farm
from simfarm.serve import ServerThread

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[1]
TASKS = {row["key"]: line for line in (ROOT / "simfarm" / "tasks" / "tasks.jsonl").read_text().splitlines()
         if (row := json.loads(line))}
KEYS = ["settings-airplane-boarding", "shop-filter-sony-l1", "notes-create-groceries-l1",
        "shop-jbl-order-arrived"]   # the last presumes a signed-in ShopMart: its recipe runs first


@pytest.fixture
def real_phones(settings, monkeypatch):
    farm = Farm(devices=2, seed=11, real_phone=True, handback_rate=0.1)
    with ServerThread(farm) as server:
        address = f"127.0.0.1:{server.port}"
        settings.ADB_SERVERS = [address]
        monkeypatch.setenv("ADB_SERVERS", address)
        discover_devices()
        yield farm, address


def refused(farm) -> list[str]:
    return [call for phone in farm.phones.values() for call in phone.farm_only_calls]


def semi_automatic_session(client, query) -> Trajectory:
    """An annotator takes the query, verifies what the model proposes for a few steps, and ends it."""
    assert client.post("/queue/take-next/", {"query": query.pk}).status_code == 302
    trajectory = Trajectory.objects.filter(line="semi_auto", query=query).latest("id")
    for _ in range(4):
        client.post(f"/session/{trajectory.pk}/prepare/")
        step = trajectory.steps.filter(executed_action__isnull=True).first()
        if step is None:
            break
        ending = (step.proposed_action or {}).get("action") in ("terminate", "call_user")
        body = {"step": step.index, "action": step.proposed_action, "cot": step.cot}
        if ending and step.proposed_action.get("status") != "success":
            body["stated_outcome"] = "failure"
        answer = client.post(f"/session/{trajectory.pk}/execute/", json.dumps(body),
                             content_type="application/json").json()
        assert answer.get("ok"), answer
        if answer["finished"]:
            break
    trajectory.refresh_from_db()
    if trajectory.status == "running":
        step = trajectory.steps.filter(executed_action__isnull=True).first()
        body = {"step": step.index, "action": {"action": "terminate", "status": "failure"}, "cot": step.cot,
                "stated_outcome": "failure"}
        assert client.post(f"/session/{trajectory.pk}/execute/", json.dumps(body),
                           content_type="application/json").json()["finished"]
        trajectory.refresh_from_db()
    return trajectory


def test_the_loop_on_real_phones_makes_no_farm_only_request(real_phones, role_users, client_as, settings):
    farm, address = real_phones
    settings.TEARDOWN_EVERY_TASKS, settings.ECDM_REPLAY = 3, True
    import_queries("\n".join(TASKS[key] for key in KEYS) + "\n")
    import_recipes((ROOT / "simfarm" / "setup_recipes.jsonl").read_text())
    orders = Query.objects.get(key="shop-jbl-order-arrived")
    keys = KEYS

    session = semi_automatic_session(client_as("annotator"), orders)
    assert session.setup["met"] and session.status == "completed", (session.setup, session.status)
    assert session.steps.filter(executed_action__isnull=False).exists()

    for line, chosen in (("schema", keys), ("automatic", keys)):
        run = launch_run(line, {"keys": chosen}, config={"phones": 2, "max_steps": 8, "clarify_wait_s": 0}, dispatch=False)
        drive_host(run.pk, address, 2)
        assert Trajectory.objects.filter(run=run).exclude(destination="").count() >= len(chosen) - 1, line
    ingest_external(["Open Settings and check Bluetooth"])
    external = launch_run("external", {"source": "external"}, config={"phones": 1, "max_steps": 6}, dispatch=False)
    drive_host(external.pk, address, 1)
    RlQueryEntry.objects.create(query=Query.objects.get(key=keys[1]), state="active", channel="routing")
    rl = launch_run("rl", {"pool": "rl"}, config={"phones": 2, "repeats": 2, "max_steps": 6}, dispatch=False)
    drive_host(rl.pk, address, 2)

    signed_in = Trajectory.objects.filter(query=orders, line="schema").first()
    assert signed_in.setup["met"], signed_in.setup        # the recipe signed in before the task
    for trajectory in Trajectory.objects.filter(verdict__in=["false", "env_error"]).exclude(line="benchmark")[:3]:
        attribution = ecdm.process_failure(trajectory.pk)
        for repair in Repair.objects.filter(attribution=attribution) if attribution else []:
            ecdm.run_repair(repair.pk)
            repair.refresh_from_db()
            if (repair.replay or {}).get("status") == "queued":   # what the repair worker's job does
                step_correction.replay_and_continue(repair.pk)
    for trajectory in Trajectory.objects.exclude(line="benchmark"):
        handback.gather(trajectory.pk)

    manager = role_users["manager"]
    benchmark = versions.create_version("real-phones", "v1", {"size": 1})
    for item in versions.add_queries(benchmark, [Query.objects.get(key=keys[0])], split="held_out"):
        versions.review_item(item, manager, note="checked", decision="approve")
    evaluation = launch_evaluation(versions.freeze(benchmark, manager), default_policy_version(), split="held_out",
                                   config={"max_steps": 6, "phones": 1}, dispatch=False)
    drive_host(evaluation.collection_run_id, address, 1)
    assert EvalResult.objects.filter(eval_run=evaluation).exists()
    for device in Device.objects.all():
        teardown.tear_down(PhoneConnection.for_device(device), device, ["the test's end"])

    # System A read what any phone shows and abstained on an app's own state
    votes = [v for t in Trajectory.objects.exclude(line__in=["benchmark", "ecdm", "handback", "semi_auto"])
             for v in t.votes.all()]
    assert any(v.system == "A" and v.vote != "abstain" for v in votes)
    assert refused(farm) == [], refused(farm)
