"""The virtual farm's task set (simfarm/tasks/*.jsonl) is importable and true.

For every task, on a fresh sim-0001: run its `reset`, check its terminal verification FAILS,
follow its known path through `phone.run()` (uiautomator dump → input tap/text/swipe/keyevent),
then check every terminal check PASSES, every milestone was seen in order and no veto element
was ever acted on. In-process: no ADB server, no database.
"""
import json
from collections import Counter
from pathlib import Path

import pytest

from flywheel.queries.jsonl import parse_queries_jsonl
from simfarm.appspec import load_apps
from simfarm.farm import Farm
from tests.simfarm import taskrunner as tr

TASKS_DIR = Path(__file__).resolve().parents[2] / "simfarm" / "tasks"
TASK_FILES = sorted(TASKS_DIR.glob("*.jsonl"))
RECORDS = [json.loads(line) for path in TASK_FILES for line in path.read_text(encoding="utf-8").splitlines()
           if line.strip()]
APPS = load_apps()
TIERS = {"L1": {"plain_narration", "colloquial_steps"},
         "L2": {"function_statement", "purpose_statement", "dependent_operation", "parallel_operation",
                "conditional_operation", "state_constraint"},
         "L3": {"incomplete_instruction", "intent_inference", "colloquial_self_correction"}}
PERSONAS = {"novice", "gen_z_student", "programmer", "business_professional", "senior_citizen", "delivery_rider",
            "travel_blogger", "stay_at_home_parent"}
CAPABILITIES = {"multi_constraint_filtering", "numerical_reasoning", "conditional_logic", "cross_page_state_tracking",
                "looping", "information_synthesis"}
ACTIONS = {"click", "double_click", "type", "system_button", "swipe", "drag", "long_press", "open", "set_scroll_widget",
           "take_notes", "wait", "terminate", "clarify", "call_user"}


@pytest.fixture(scope="module")
def farm():
    return Farm(devices=1)


def test_task_files_validate_with_the_query_import_format():
    assert TASK_FILES, f"no task files in {TASKS_DIR}"
    for path in TASK_FILES:
        records = parse_queries_jsonl(path.read_text(encoding="utf-8"))
        assert records, path


def test_task_set_sizes():
    tiers = Counter(record["tier"] for record in RECORDS)
    assert len(RECORDS) >= 60, len(RECORDS)
    assert set(tiers) == {"L1", "L2", "L3"}, tiers
    assert min(tiers.values()) >= 10, tiers
    cross = [r["key"] for r in RECORDS if len(r["apps"]) > 1]
    assert len(cross) >= 10, cross
    assert all("cross-app" in r["tags"] for r in RECORDS if len(r["apps"]) > 1)
    assert sum("login" in r["tags"] for r in RECORDS) >= 1
    assert sum(len(spec.function_leaves()) for spec in APPS.values()) >= 80
    assert {package for r in RECORDS for package in r["apps"]} == set(APPS), "every app of the farm has tasks"
    kinds = {tag for r in RECORDS for tag in r["tags"]}
    assert {"share-sheet", "clipboard", "recents", "home", "contrast", "relay"} <= kinds, kinds
    assert sum(r["labels"]["complexity"]["steps"] >= 10 for r in RECORDS) >= 3, "several paths of 10+ steps"


@pytest.mark.parametrize("record", RECORDS, ids=[r["key"] for r in RECORDS])
def test_task_is_well_formed(record):
    assert record["subclass"] in TIERS[record["tier"]]
    assert record["persona"] in PERSONAS
    assert set(record["capabilities"]) <= CAPABILITIES
    for package in record["apps"]:
        assert package in APPS, f"unknown app {package}"
    for function in record["functions"]:
        package, _, leaf_id = function.partition(":")
        assert package in record["apps"]
        assert leaf_id in {leaf["id"] for leaf in APPS[package].function_leaves()}, f"{function} is not a leaf"
    steps = record["known_path"]["steps"]
    assert steps[0] == {"action": "open", "app": record["apps"][0]}
    assert {step["action"] for step in steps} <= ACTIONS
    assert steps[-1]["action"] in ("terminate", "call_user")
    verification = record["verification"]
    assert verification["terminal"] and verification["milestones"]
    if record["risk"] == "high":
        assert verification["veto"], "a high-risk task names what must never be tapped"


@pytest.mark.parametrize("record", RECORDS, ids=[r["key"] for r in RECORDS])
def test_known_path_completes_the_task(farm, record):
    phone = tr.fresh_phone(farm)
    tr.reset_phone(phone, record["reset"], record["apps"])
    tr.prepare(phone, record)
    terminal = record["verification"]["terminal"]
    before = tr.failing_checks(phone, terminal)
    assert before, f"{record['key']}: the terminal checks already pass on a freshly reset (and set-up) phone"

    milestones = record["verification"]["milestones"]
    trace = tr.follow(phone, record["known_path"]["steps"], milestones, veto=record["verification"]["veto"])

    assert tr.failing_checks(phone, terminal) == []
    assert trace.milestones_seen == [m["name"] for m in milestones], \
        f"milestones seen {trace.milestones_seen}, wanted {[m['name'] for m in milestones]}"


def test_tasks_that_presume_a_signed_in_app_have_a_farm_recipe_and_skip_the_sign_in(farm):
    """A task with prerequisites starts where its recipe leaves the phone: the app signed in, on its
    home page, so its known path never meets the sign-in page; without the recipe the path fails."""
    presumed = [r for r in RECORDS if r["prerequisites"]]
    assert len(presumed) >= 5 and {app for r in presumed for app in r["apps"]} >= {"com.sim.shop", "com.sim.video"}
    record = next(r for r in presumed if r["key"] == "shop-jbl-order-arrived")
    phone = tr.fresh_phone(farm)
    tr.reset_phone(phone, record["reset"], record["apps"])
    with pytest.raises(tr.PathError, match="not on screen"):
        tr.follow(phone, record["known_path"]["steps"])          # signed out: "My orders" asks to sign in
    phone = tr.fresh_phone(farm)
    tr.reset_phone(phone, record["reset"], record["apps"])
    assert tr.prepare(phone, record) == ["shopmart-signed-in"]
    assert "logged_in=true" in tr.sh(phone, "content query --uri content://com.sim.shop/account")
    tr.run_step(phone, {"action": "open", "app": "com.sim.shop"}, 0)
    assert tr.focused_window(phone).endswith(".MainActivity"), "the recipe leaves the app on its home page"
    with pytest.raises(tr.PathError, match="no setup recipe"):
        tr.prepare(phone, {**record, "prerequisites": ["a bank card bound"]})


def test_the_follower_never_taps_a_veto_element(farm):
    """A path that goes on to press "Pay now" is stopped before the tap; nothing is paid."""
    record = next(r for r in RECORDS if "payment" in r["tags"] and r["apps"] == ["com.sim.shop"])
    phone = tr.fresh_phone(farm)
    tr.reset_phone(phone, record["reset"], record["apps"])
    steps = [s for s in record["known_path"]["steps"] if s["action"] not in ("call_user", "terminate")]
    steps.append({"action": "click", "target": {"resource_id": "com.sim.shop:id/confirm_payment"}})
    with pytest.raises(tr.PathError, match="veto"):
        tr.follow(phone, steps, veto=record["verification"]["veto"])
    assert "stage=payment" in tr.sh(phone, "content query --uri content://com.sim.shop/checkout")
    assert tr.sh(phone, "content query --uri content://com.sim.shop/orders").count("Row:") == 2


def test_the_follower_fails_on_a_target_that_is_not_there(farm):
    phone = tr.fresh_phone(farm)
    tr.reset_phone(phone, {}, ["com.sim.notes"])
    with pytest.raises(tr.PathError, match="not on screen"):
        tr.follow(phone, [{"action": "open", "app": "com.sim.notes"},
                          {"action": "click", "target": {"text": "No such note anywhere"}}])
