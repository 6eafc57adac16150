"""The offline Teacher on real screens of the virtual farm (captured through the real executor and
safety audit): known-path corrections, the GEM route, the low-confidence guess, pop-up dismissal."""
import json
from dataclasses import replace
from pathlib import Path

import pytest

from devices.executor import ActionExecutor
from devices.observation import observe
from devices.phone import PhoneConnection
from devices.reset import reset_phone
from devices.uitree import page_text, parse_hierarchy
from flywheel.models import App, Edge, GemPage
from flywheel.policies.base import PolicyState
from flywheel.policies.protocol import HistoryEntry, describe_action
from flywheel.policies.teacher import TeacherContext, dismissal_action, same_choice
from flywheel.policies.teacher_offline import OfflineTeacher
from flywheel.policies.teacher_path import _resolve, effective_steps, hits_step, visible_nodes
from flywheel.rules.consistency import GateStep, check_bidirectional_consistency
from flywheel.screens.page_identity import fingerprint
from flywheel.screens.selectors import find_target
from simfarm.farm import Farm
from simfarm.serve import ServerThread

pytestmark = pytest.mark.django_db
TASKS = {row["key"]: row for row in map(json.loads, (Path(__file__).resolve().parents[3] / "simfarm" / "tasks"
                                                     / "tasks.jsonl").read_text().splitlines())}
SONY = TASKS["shop-filter-sony-l1"]   # open → Headphones → Filter → Sony → Show results → terminate


@pytest.fixture(scope="module")
def phone():
    farm = Farm(devices=1, seed=0)
    with ServerThread(farm) as server:
        yield PhoneConnection(f"127.0.0.1:{server.port}", next(iter(farm)).serial)


def replay(phone, task, upto):
    """Run the known path's steps before `upto`; (screen of step `upto`, history, the dumps)."""
    reset_phone(phone, task["reset"], apps=task["apps"])
    executor = ActionExecutor(phone, holder="teacher-test")
    history, dumps = [], []
    for step in effective_steps(task["known_path"], task["apps"])[:upto]:
        seen = observe(phone)
        action, label = _resolve(step, visible_nodes(seen.hierarchy_xml), (seen.width, seen.height))
        result = executor.execute(action, hierarchy_xml=seen.hierarchy_xml)
        assert result.ok, result.reason or result.error
        history.append(HistoryEntry(cot={"Decision": describe_action(result.action, label)}, action=result.action))
        dumps.append(seen.hierarchy_xml)
    return observe(phone), history, dumps


def context(task, seen, history, dumps=(), wrong=None, known=True):
    return TeacherContext(goal=task["text"], history=history, screenshot=seen.png, hierarchy_xml=seen.hierarchy_xml,
                          screen_size=(seen.width, seen.height), wrong_action=wrong, foreground=seen.foreground,
                          apps=task["apps"], known_path=task["known_path"] if known else None, step_index=len(history),
                          history_hierarchies=list(dumps))


def tap_on(seen, target):
    node = find_target(visible_nodes(seen.hierarchy_xml), target)
    assert node is not None, target
    return {"action": "click", "point": list(node.center), "coords": "pixel"}


def test_a_slip_is_corrected_to_the_known_paths_step_with_a_consistent_reasoning(phone):
    seen, history, dumps = replay(phone, SONY, 3)          # the filter sheet
    sony = effective_steps(SONY["known_path"], SONY["apps"])[3]
    slip = tap_on(seen, {"resource_id": "com.sim.shop:id/brand_bose"})
    answer = OfflineTeacher().correct(context(SONY, seen, history, dumps, wrong=slip))
    assert hits_step(answer.action, sony, seen.hierarchy_xml), answer
    assert answer.source == "known_path" and answer.confidence >= 0.6
    assert "step 4 of 6" in answer.rationale
    gate = GateStep(0, answer.cot, answer.action, screen_text=page_text(parse_hierarchy(seen.hierarchy_xml)))
    assert check_bidirectional_consistency([gate]) == []


def test_it_never_answers_the_wrong_action_again(phone):
    seen, history, dumps = replay(phone, SONY, 3)
    right = tap_on(seen, {"resource_id": "com.sim.shop:id/brand_sony"})
    answer = OfflineTeacher().correct(context(SONY, seen, history, dumps, wrong=right))
    assert not same_choice(answer.action, right, seen.hierarchy_xml)
    assert answer.confidence <= 0.3 and "went wrong" in answer.rationale


def test_the_prefix_is_checked_against_its_screens(phone):
    """A tap of the prefix that hit something else does not move the Teacher along the path."""
    seen, history, dumps = replay(phone, SONY, 3)
    on_category = dumps[2]  # the Headphones page, where Filter was tapped
    stray = tap_on(type("S", (), {"hierarchy_xml": on_category})(), {"text": "Sony WH-1000XM5 Headphones"})
    history = history[:2] + [HistoryEntry(cot={}, action=stray)] + history[2:]
    dumps = dumps[:2] + [on_category] + dumps[2:]
    sony = effective_steps(SONY["known_path"], SONY["apps"])[3]
    answer = OfflineTeacher().correct(context(SONY, seen, history, dumps))
    assert hits_step(answer.action, sony, seen.hierarchy_xml), answer
    # without the screens the stray tap is taken for the Sony step, and the Teacher jumps ahead
    blind = OfflineTeacher().correct(context(SONY, seen, history, ()))
    assert not hits_step(blind.action, sony, seen.hierarchy_xml)


def test_a_step_already_done_is_skipped_on_the_screens_evidence(phone):
    seen, _, _ = replay(phone, SONY, 1)                    # ShopMart is open; nobody told the Teacher
    answer = OfflineTeacher().correct(context(SONY, seen, []))
    assert hits_step(answer.action, effective_steps(SONY["known_path"], SONY["apps"])[1], seen.hierarchy_xml)
    assert answer.confidence == pytest.approx(0.8)


def test_the_last_step_finishes_and_home_opens_the_app(phone):
    seen, history, dumps = replay(phone, SONY, 5)
    done = OfflineTeacher().correct(context(SONY, seen, history, dumps, wrong={"action": "system_button", "button": "back"}))
    assert done.action == {"action": "terminate", "status": "success"} and done.cot["Plan"].endswith("finish.")
    home, _, _ = replay(phone, SONY, 0)
    opened = OfflineTeacher().correct(context(SONY, home, [], wrong=None))
    assert opened.action == {"action": "open", "app": "com.sim.shop"} and opened.confidence >= 0.9


def test_without_known_path_or_gem_it_only_guesses(phone):
    seen, history, dumps = replay(phone, SONY, 3)
    answer = OfflineTeacher().correct(context(SONY, seen, history, dumps, known=False))
    assert answer.source == "goal" and answer.confidence <= 0.3


def test_the_gem_route_leads_toward_the_target_page(phone):
    home, _, _ = replay(phone, SONY, 1)
    category, _, _ = replay(phone, SONY, 2)
    shop = App.objects.create(package="com.sim.shop", label="ShopMart")

    def page(seen, name, start=False):
        seen_print = fingerprint(seen.png, seen.hierarchy_xml, seen.foreground.get("activity", ""))
        return GemPage.objects.create(app=shop, name=name, activity=seen_print.activity, phash=seen_print.phash,
                                      layout_signature=seen_print.layout_signature, layout_shape=seen_print.layout_shape,
                                      is_start=start)
    start, headphones = page(home, "Home", start=True), page(category, "Headphones")
    edge = Edge.objects.create(source=start, target=headphones, via="tap",
                               action={"action": "click", "target": {"text": "Headphones"}}, action_key="k1")
    ctx = context(SONY, home, [], known=False)
    wrong = tap_on(home, {"text": "Nest Mini Smart Speaker"})
    routed = OfflineTeacher().correct(replace(ctx, target_pages=[headphones.pk], wrong_action=wrong))
    step = effective_steps(SONY["known_path"], SONY["apps"])[1]
    assert routed.source == "gem" and hits_step(routed.action, step, home.hierarchy_xml)
    assert "Headphones" in routed.rationale and routed.confidence == pytest.approx(0.75)
    on_path = OfflineTeacher().correct(replace(ctx, gem_path=[edge.pk], wrong_action=wrong))
    assert on_path.source == "gem" and on_path.confidence == pytest.approx(0.8)
    assert hits_step(on_path.action, step, home.hierarchy_xml)
    # on the target page itself the graph has nothing to add
    there = OfflineTeacher().correct(replace(context(SONY, category, [], known=False), target_pages=[headphones.pk]))
    assert there.source != "gem"


def test_takeover_proposals_speak_the_policy_protocol(phone):
    seen, history, dumps = replay(phone, SONY, 2)
    state = PolicyState(goal=SONY["text"], history=history, screenshots=[seen.png], hierarchy_xml=seen.hierarchy_xml,
                        screen_size=(seen.width, seen.height), foreground=seen.foreground, apps=SONY["apps"])
    teacher = OfflineTeacher({"known_path": SONY["known_path"], "history_hierarchies": dumps})
    proposal = teacher.propose(state)
    assert hits_step(proposal.action, effective_steps(SONY["known_path"], SONY["apps"])[2], seen.hierarchy_xml)
    assert proposal.model_io["teacher"]["source"] == "known_path" and proposal.confidence == pytest.approx(0.9)
    assert proposal.policy == teacher.name


@pytest.mark.parametrize("kind, button", [
    ("ad_popup", "Close"), ("permission_dialog", "Only this time"), ("update_prompt", "Later"),
    ("login_expired", "Cancel"), ("app_crash", "Close app"), ("app_not_responding", "Wait"),
    ("low_battery", "Close"), ("storage_full", "Dismiss"), ("captcha", None)])
def test_dismissal_finds_the_way_out_of_each_farm_pop_up(phone, kind, button):
    reset_phone(phone, {"force_stop": ["com.sim.shop"], "home": True}, apps=["com.sim.shop"])
    phone.shell("am start -n com.sim.shop/.MainActivity")
    assert dismissal_action(observe(phone).hierarchy_xml) is None       # a plain page has no pop-up
    phone.shell(f"am broadcast -a com.sim.ANOMALY --es kind {kind} --es package com.sim.shop")
    try:
        seen = observe(phone)
        action = dismissal_action(seen.hierarchy_xml)
        if button is None:
            assert action is None
            return
        node = [n for n in _all(seen.hierarchy_xml)
                if n.contains(*action["point"]) and n.clickable and (n.text == button or n.desc == button)]
        assert node, (kind, action)
        assert ActionExecutor(phone, holder="teacher-test").execute(action, hierarchy_xml=seen.hierarchy_xml).ok
        assert dismissal_action(observe(phone).hierarchy_xml) is None   # closed
    finally:
        phone.shell("am broadcast -a com.sim.ANOMALY --es kind clear")


def _all(xml):
    from devices.uitree import all_nodes

    return all_nodes(parse_hierarchy(xml))


def test_sft_intake_regenerates_a_failing_steps_reasoning_with_the_built_in_teacher(phone):
    """§2.3.6 end to end on a real screen: a step whose [Decision] described another action than
    the phone ran waits at intake; the regeneration job (the default, offline Teacher, told the
    screen and the history but not the action) derives the executed tap forward, and its reasoning
    replaces the step's, which then passes and is a label again."""
    from flywheel.blobs import store_blob
    from flywheel.judging.destinations import route_trajectory
    from flywheel.models import Query, Step, Trajectory
    from flywheel.pools import sft

    query = Query.objects.create(key="sony-regen", text=SONY["text"], tier="L1", verification={},
                                 known_path=SONY["known_path"])
    query.apps.set([App.objects.get_or_create(package=package)[0] for package in SONY["apps"]])
    trajectory = Trajectory.objects.create(query=query, line="automatic", status="completed")
    seen, history, dumps = replay(phone, SONY, 3)
    sony = tap_on(seen, {"resource_id": "com.sim.shop:id/brand_sony"})
    for index, entry in enumerate(history):
        observation = page_text(parse_hierarchy(dumps[index]))[:60]
        Step.objects.create(trajectory=trajectory, index=index,
                            cot={**entry.cot, "Observation": observation, "Plan": "follow the path"},
                            executed_action=entry.action, hierarchy=store_blob(dumps[index].encode(), "xml"))
    wrong = {"Observation": "", "Reflection": "", "Plan": "Look for more brands", "Decision": "Swipe up",
             "Memory": ""}
    Step.objects.create(trajectory=trajectory, index=3, cot=wrong, executed_action=sony, proposed_action=sony,
                        screenshot=store_blob(seen.png, "png"), hierarchy=store_blob(seen.hierarchy_xml.encode(), "xml"),
                        timings={"screen": [seen.width, seen.height]}, foreground_package="com.sim.shop")
    route_trajectory(trajectory, "true", "judged")
    assert trajectory.steps.get(index=3).label_gate == "regenerating"
    assert sft.regenerate_reasoning(trajectory.pk) == {"waiting": 1, "regenerated": 1, "unanswered": 0}
    step = trajectory.steps.get(index=3)
    assert (step.label_gate, step.label_issues) == ("regenerated", [])
    assert "Sony" in step.cot["Decision"] and step.cot["Plan"] and step.edit["reasoning_regenerated"]["cot_before"] == wrong
    assert step.edit["reasoning_regenerated"]["by"] == OfflineTeacher.name
    assert check_bidirectional_consistency([GateStep(index=3, cot=step.cot, action=sony,
                                                     screen_text=page_text(parse_hierarchy(seen.hierarchy_xml)),
                                                     screen=(seen.width, seen.height))]) == []
