"""Prerequisites met before the task on a phone of the farm: the recipe's steps run through the
audited executor after the reset and are recorded with the trajectory; a prerequisite no recipe
meets, or an account the phone lacks, leaves the task not executable with the reason — never
judged as the model's failure; device-pull scheduling gives the work only to phones with the account."""
from pathlib import Path

import pytest

from devices import scheduling
from devices.executor import ActionExecutor
from devices.models import Device
from devices.phone import PhoneConnection
from devices.registry import discover_devices
from devices.reset import reset_phone
from flywheel.collection import prerequisites
from flywheel.collection.engine import CollectionConfig, end_trajectory, route_ended, run_trajectory
from flywheel.models import App, Query, SetupRecipe, Trajectory
from flywheel.policies.offline import OfflinePolicy
from flywheel.queries.recipes import RecipesInvalid, import_recipes
from simfarm.farm import Farm
from simfarm.serve import ServerThread

pytestmark = pytest.mark.django_db
SHOP = "com.sim.shop"
RECIPES = Path(__file__).resolve().parents[3] / "simfarm" / "setup_recipes.jsonl"


@pytest.fixture(scope="module")
def farm_server():
    farm = Farm(devices=1, seed=0)
    with ServerThread(farm) as server:
        yield farm, server


@pytest.fixture
def shop_phone(farm_server, settings):
    farm, server = farm_server
    settings.ADB_SERVERS = [f"127.0.0.1:{server.port}"]
    discover_devices()
    device = Device.objects.get()
    import_recipes(RECIPES.read_text())
    return farm.phones[device.serial], device, PhoneConnection.for_device(device)


def shop_query(*wanted, key="orders"):
    query = Query.objects.create(key=key, text="Show my ShopMart orders", tier="L1", prerequisites=list(wanted),
                                 reset={"force_stop": [SHOP], "clear": [SHOP], "home": True},
                                 verification={"terminal": [{"check": "foreground", "package": SHOP}]})
    query.set_apps([App.objects.get_or_create(package=SHOP, defaults={"label": "ShopMart"})[0]])
    return query


def started(query, device):
    return Trajectory.objects.create(query=query, device=device, line="automatic", status="running")


def test_the_recipe_signs_in_after_the_reset_and_is_recorded(shop_phone):
    virtual, device, phone = shop_phone
    trajectory = started(shop_query("Logged in to ShopMart."), device)
    reset_phone(phone, trajectory.query.reset)
    assert virtual.app_state(SHOP).get("logged_in") is False
    executor = ActionExecutor(phone, holder="prerequisite-test", device=device)
    assert prerequisites.prepare(trajectory, phone, executor, device) is None
    assert virtual.app_state(SHOP)["logged_in"] is True
    setup = Trajectory.objects.get(pk=trajectory.pk).setup
    assert setup["met"] and setup["unmet"] == [] and setup["prerequisites"] == ["Logged in to ShopMart."]
    (ran,) = setup["recipes"]
    assert ran["recipe"] == "shopmart-signed-in" and ran["ok"] and len(ran["actions"]) == 6
    assert all(a["ok"] for a in ran["actions"]) and ran["actions"][0]["action"]["action"] == "open"
    assert virtual.engine.foreground is None or virtual.engine.surface != "app"   # back on Home for the task


def test_a_prerequisite_no_recipe_meets_makes_the_task_not_executable_and_unjudged(shop_phone):
    _, device, phone = shop_phone
    trajectory = started(shop_query("signed in to ShopMart", "two unread messages from Dana"), device)
    stop = run_trajectory(trajectory, phone, OfflinePolicy(), CollectionConfig(max_steps=3), device=device)
    assert stop.kind == "prerequisite_unmet" and "two unread messages from Dana" in stop.detail
    assert end_trajectory(trajectory, stop) and route_ended(trajectory, phone) is None
    trajectory.refresh_from_db()
    assert (trajectory.status, trajectory.verdict, trajectory.destination) == ("not_executable", "pending", "")
    assert trajectory.steps.count() == 0 and trajectory.setup["unmet"] == ["two unread messages from Dana"]


def test_a_phone_without_the_account_neither_pulls_the_work_nor_runs_the_recipe(shop_phone):
    _, device, phone = shop_phone
    query = shop_query("signed in to ShopMart")
    requirements = query.phone_requirements()
    assert requirements["accounts"] == ["com.google"] and SHOP in requirements["apps"]
    assert any(account.startswith("com.google:") for account in device.accounts)
    Device.objects.filter(pk=device.pk).update(accounts=[])
    device.refresh_from_db()
    item = scheduling.enqueue("collect", {"query_id": query.pk}, requirements)
    assert scheduling.pull_next(device, kinds=["collect"]) is None
    stop = prerequisites.prepare(started(query, device), phone, ActionExecutor(phone, holder="t"), device)
    assert stop.kind == "prerequisite_unmet" and "lacks account com.google" in stop.detail
    discover_devices()   # the account is read from the phone again
    device.refresh_from_db()
    assert scheduling.pull_next(device, kinds=["collect"]).pk == item.pk


def test_recipes_import_all_or_nothing():
    with pytest.raises(RecipesInvalid) as error:
        import_recipes('{"key": "x", "label": "X", "phrases": ["a"], "steps": [{"action": "click"}]}\n'
                       '{"key": "y", "label": "Y", "phrases": ["A"]}\nnot json\n')
    assert error.value.problems == [
        "line 1: steps: step 1: a click names its target (text, resource_id or content_desc)",
        "line 3: not JSON (Expecting value)", "y: the phrase 'A' is met by x too"]
    assert not SetupRecipe.objects.exists()
    assert import_recipes(RECIPES.read_text()) == {"created": 2, "updated": 0}
    assert import_recipes(RECIPES.read_text()) == {"created": 0, "updated": 2}


def test_the_trajectory_page_says_what_ran_before_the_task(shop_phone, client_as):
    _, device, phone = shop_phone
    met = started(shop_query("signed in to ShopMart", key="met"), device)
    reset_phone(phone, met.query.reset)
    prerequisites.prepare(met, phone, ActionExecutor(phone, holder="t", device=device), device)
    unmet = started(shop_query("a bank card bound", key="unmet"), device)
    end_trajectory(unmet, prerequisites.prepare(unmet, phone, ActionExecutor(phone, holder="t"), device))
    page = client_as("manager").get(f"/trajectories/{met.pk}/").content.decode()
    assert "Prerequisites: signed in to ShopMart —" in page and "met before the task by shopmart-signed-in (6 actions)" in page
    page = client_as("manager").get(f"/trajectories/{unmet.pk}/").content.decode()
    assert "not met, so the task was not run: no setup recipe meets: a bank card bound." in page


def test_make_up_seeds_the_farms_recipes_and_a_bad_file_says_why(tmp_path):
    from io import StringIO

    from django.core.management import CommandError, call_command

    out = StringIO()
    call_command("seed_console", "--recipes", str(RECIPES), stdout=out)
    assert "Setup recipes: 2 new, 0 replaced from setup_recipes.jsonl" in out.getvalue()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "k", "label": "K", "phrases": []}\n')
    with pytest.raises(CommandError, match="phrases: the prerequisites it meets"):
        call_command("import_recipes", str(bad))


def test_an_rl_group_does_not_wait_on_a_rollout_that_never_ran(shop_phone):
    from flywheel.models import CollectionRun
    from flywheel.pools.rl import group_verdicts

    _, device, _ = shop_phone
    query = shop_query("a bank card bound")
    run = CollectionRun.objects.create(line="rl", config={"repeats": 2})
    Trajectory.objects.create(query=query, run=run, device=device, line="rl", status="completed", verdict="true")
    Trajectory.objects.create(query=query, run=run, device=device, line="rl", status="not_executable")
    assert group_verdicts(run, query.pk) == ["true"]


def farm_task(key):
    import json
    tasks = Path(__file__).resolve().parents[3] / "simfarm" / "tasks" / "tasks.jsonl"
    return next(line for line in tasks.read_text().splitlines() if json.loads(line)["key"] == key)


@pytest.mark.django_db(transaction=True)   # the host's phone threads read the run from their own connections
def test_a_farm_task_that_presumes_sign_in_starts_signed_in_and_its_known_path_succeeds(shop_phone, farm_server):
    from flywheel.collection.driver import drive_host
    from flywheel.collection.launch import launch_run
    from flywheel.queries.jsonl import import_queries

    _, server = farm_server
    import_queries(farm_task("shop-where-is-speaker"))
    run = launch_run("schema", {"keys": ["shop-where-is-speaker"]}, config={"phones": 1, "max_steps": 10},
                     dispatch=False)
    drive_host(run.pk, f"127.0.0.1:{server.port}", 1)
    trajectory = Trajectory.objects.get(run=run)
    assert trajectory.setup["met"] and trajectory.setup["recipes"][0]["recipe"] == "shopmart-signed-in"
    assert trajectory.verdict == "true", (trajectory.status, trajectory.stop_reason, trajectory.verdict)
    # the task itself never met the sign-in page: the known path's five taps and its end, no more
    assert trajectory.steps.filter(executed_action__isnull=False).count() == 6


def test_a_semi_automatic_session_meets_the_prerequisites_or_sends_the_query_back_to_review(shop_phone, client_as):
    _, device, _ = shop_phone
    signed_in = shop_query("signed in to ShopMart", key="semi-signed-in")
    client = client_as("annotator")
    assert client.post("/queue/take-next/", {"query": signed_in.pk}).status_code == 302
    session = Trajectory.objects.get(query=signed_in, line="semi_auto")
    assert session.status == "running" and session.setup["met"], session.setup
    client.post(f"/session/{session.pk}/leave/")

    card = shop_query("a bank card bound", key="semi-card")
    page = client.post("/queue/take-next/", {"query": card.pk}, follow=True).content.decode()
    assert "semi-card cannot start: no setup recipe meets: a bank card bound" in page
    refused = Trajectory.objects.get(query=card, line="semi_auto")
    assert (refused.status, refused.stop_kind, refused.verdict) == ("not_executable", "prerequisite_unmet", "pending")
    card.refresh_from_db()
    assert card.status == "review" and "a bank card bound" in card.status_reason
    assert not device.leases.filter(released_at__isnull=True).exists()   # the phone went back to the pool
