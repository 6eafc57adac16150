"""The task set crosses screens the dump cannot read and "looks done" traps (issue #33, farm side).

Following each blind/trap task's known path on a fresh phone, the farm's truth (`screen_kind`)
says which screens were blind; a target-less `point` step is only used where the dump is blind;
and taking the trap next to the right step leaves the task undone while the screen looks done.
"""
import json
from pathlib import Path

import pytest

from simfarm import blind
from simfarm.appspec import load_apps
from simfarm.farm import Farm
from tests.simfarm import taskrunner as tr

TASKS = Path(__file__).resolve().parents[2] / "simfarm" / "tasks" / "tasks.jsonl"
RECORDS = {r["key"]: r for r in map(json.loads, TASKS.read_text(encoding="utf-8").splitlines())}
SCREEN_TASKS = [r for r in RECORDS.values() if {"blind", "trap"} & set(r["tags"])]
APPS = load_apps()
NEW_APP = "com.sim.tickets"


@pytest.fixture(scope="module")
def farm():
    return Farm(devices=1)


def blind_and_trap_pages(package):
    app = APPS[package]
    pages = {page_id: blind.page_render(app, page_id) for page_id in app.pages}
    blinds = {page_id for page_id, render in pages.items() if render != blind.NATIVE}
    traps = {page_id for page_id, spec in app.pages.items() if spec.get("trap")}
    toasts = "'trap': True" in str(app.pages)
    return blinds, traps, toasts


def test_blind_pages_and_traps_are_spread_over_old_apps_and_a_new_one():
    with_both = [p for p in APPS if blind_and_trap_pages(p)[0] and (blind_and_trap_pages(p)[1] or blind_and_trap_pages(p)[2])]
    assert NEW_APP in with_both and len(set(with_both) - {NEW_APP}) >= 2, with_both
    renders = {blind.page_render(app, page_id) for app in APPS.values() for page_id in app.pages}
    assert {blind.WEBVIEW, blind.CANVAS, blind.FLUTTER} <= renders
    blinds, traps, toasts = blind_and_trap_pages(NEW_APP)
    assert blinds and traps and toasts


def test_enough_tasks_cross_these_screens():
    assert len(SCREEN_TASKS) >= 12
    assert sum(r["apps"] == [NEW_APP] for r in SCREEN_TASKS) >= 4
    assert len({r["apps"][0] for r in SCREEN_TASKS if "blind" in r["tags"]}) >= 3
    assert {r["tier"] for r in SCREEN_TASKS} == {"L1", "L2", "L3"}


def follow_with_truth(farm, record):
    phone = tr.fresh_phone(farm)
    tr.reset_phone(phone, record["reset"], record["apps"])
    tr.prepare(phone, record)
    kinds, before_point = [], []
    steps = record["known_path"]["steps"]

    def after(step_no, step):
        kinds.append(phone.screen_kind())
        if step_no + 1 < len(steps) and "point" in steps[step_no + 1] and not steps[step_no + 1].get("target"):
            before_point.append((step_no + 1, phone.screen_kind()))

    trace = tr.follow(phone, steps, record["verification"]["milestones"], after_step=after)
    return phone, kinds, before_point, trace


@pytest.mark.parametrize("record", SCREEN_TASKS, ids=[r["key"] for r in SCREEN_TASKS])
def test_the_path_crosses_the_screens_it_is_tagged_with(farm, record):
    phone, kinds, before_point, trace = follow_with_truth(farm, record)
    assert tr.failing_checks(phone, record["verification"]["terminal"]) == []
    assert trace.milestones_seen == [m["name"] for m in record["verification"]["milestones"]]
    if "blind" in record["tags"]:
        assert "blind" in kinds, kinds
    # A point is the only way to name a control that the dump does not show, and only there is one used.
    assert all(kind == "blind" for _, kind in before_point), before_point
    # The right path never lands on a trap.
    assert "trap" not in kinds, kinds


def test_some_tasks_end_on_a_blind_page(farm):
    ending = [r["key"] for r in SCREEN_TASKS if follow_with_truth(farm, r)[1][-1] == "blind"]
    assert len(ending) >= 3, ending


@pytest.mark.parametrize("key, right, trap", [
    ("tickets-book-jazz-b2-l1", [500, 511], {"action": "click", "point": [500, 435], "coords": "thousandths"}),
    ("notes-sketch-red-l1", [500, 623], {"action": "click", "point": [500, 547], "coords": "thousandths"}),
    ("shop-flash-jbl-l1", [500, 630], {"action": "click", "point": [500, 554], "coords": "thousandths"}),
    ("notes-backup-to-file", "Export to file", {"action": "click", "target": {"text": "Sync now"}}),
])
def test_the_trap_beside_the_right_step_looks_done_and_is_not(farm, key, right, trap):
    record = RECORDS[key]
    steps = record["known_path"]["steps"]
    index = next(i for i, s in enumerate(steps) if s.get("point") == right or s.get("target", {}).get("text") == right)
    phone = tr.fresh_phone(farm)
    tr.reset_phone(phone, record["reset"], record["apps"])
    tr.follow(phone, steps[:index] + [trap])
    assert phone.screen_kind() == "trap"
    assert tr.failing_checks(phone, record["verification"]["terminal"]), "the trap must change nothing"


def test_in_real_phone_mode_the_checks_need_the_farms_own_view(farm):
    record = RECORDS["tickets-comedy-calendar"]
    phone = Farm(devices=1, real_phone=True).phones["sim-0001"]
    tr.reset_phone(phone, record["reset"], record["apps"])
    tr.follow(phone, record["known_path"]["steps"])
    check = record["verification"]["terminal"][0]
    assert phone.run(f"content query --uri {check['uri']}").exit_code != 0
    assert check["contains"] in phone.run_in_normal_mode(f"content query --uri {check['uri']}").stdout.decode()
