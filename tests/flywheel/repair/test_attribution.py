"""The attribution service on the database: one Attribution per run of the cascade, with evidence
for every level examined, the facts ECDM dispatch reads, and each level's effect (Env_ERROR
re-route, query review, rule flag) — and resolving a rule flag."""
import io

import pytest
from django.utils import timezone
from PIL import Image

from flywheel import tasks
from flywheel.blobs import store_blob
from flywheel.models import (
    Adjudication,
    App,
    Attribution,
    Edge,
    GemPage,
    Query,
    Repair,
    RuleFlag,
    Step,
    Trajectory,
    Verdict,
    Vote,
)
from flywheel.repair import ecdm
from flywheel.repair.attribution import attribute, gem_distances, trace_of
from flywheel.rules.ecdm import ENV_REPAIR, AttributionFacts, ecdm_dispatch
from flywheel.screens.page_identity import layout_of
from tests.flywheel.rules.attribution_screens import (
    AD,
    FAILURE,
    FILTER_PATH,
    FILTERS,
    HOME,
    MILESTONES,
    OPEN,
    PHONES,
    RESULTS,
    SHOP,
    SONY_RESULTS,
    SUCCESS,
    tap,
)

pytestmark = pytest.mark.django_db
A_FAILED = {"results": [{"check": {"check": "content", "uri": "content://com.sim.shop/search", "contains": "brand=Sony"},
                         "passed": False, "detail": "not found"}]}
CORRECT = [(HOME, OPEN), (HOME, tap("Headphones", 660)), (RESULTS, tap("Filter", 180, x=996)),
           (FILTERS, tap("Sony", 660)), (FILTERS, tap("Show results", 2060)), (SONY_RESULTS, SUCCESS)]


def png():
    buffer = io.BytesIO()
    Image.new("RGB", (108, 240), (240, 240, 240)).save(buffer, "PNG")
    return buffer.getvalue()


def make_query(key="shop-filter-sony", verification=None, known_path=FILTER_PATH, status="ready", capabilities=()):
    verification = verification if verification is not None else {
        "terminal": [{"check": "content", "uri": "content://com.sim.shop/search", "contains": "brand=Sony"}],
        "milestones": MILESTONES}
    query = Query.objects.create(key=key, text="Open ShopMart, tap Headphones, filter by Sony.", tier="L1",
                                 verification=verification, known_path=known_path, status=status,
                                 capabilities=list(capabilities))
    query.set_apps([App.objects.get_or_create(package=SHOP)[0]])
    return query


def make_trajectory(pairs, query=None, verdict="false", votes=None, anomalies=None, stop="", screenshots=True):
    query = query or make_query()
    trajectory = Trajectory.objects.create(query=query, line="automatic", status="completed", verdict=verdict,
                                           destination="ecdm" if verdict == "false" else "", stop_reason=stop,
                                           finished_at=timezone.now())
    Verdict.objects.create(trajectory=trajectory, outcome=verdict)
    for system, vote, details in votes or []:
        Vote.objects.create(trajectory=trajectory, system=system, vote=vote, rationale=f"{system} says {vote}",
                            details=details or {})
    for index, (xml, (action, cot)) in enumerate(pairs):
        Step.objects.create(trajectory=trajectory, index=index, hierarchy=store_blob(xml.encode(), "xml") if xml else "",
                            screenshot=store_blob(png(), "png") if screenshots else "", executed_action=action,
                            cot=cot, foreground_package=SHOP, anomaly=(anomalies or {}).get(index))
    return trajectory


def test_a_model_failure_is_attributed_once_with_evidence_for_every_level_and_the_facts_dispatch_reads():
    trajectory = make_trajectory([(HOME, OPEN), (HOME, tap("Phones", 820)), (PHONES, FAILURE)],
                                 query=make_query(capabilities=["multi_constraint_filtering"]))
    attribution = attribute(trajectory)
    assert Attribution.objects.filter(trajectory=trajectory).count() == 1
    assert (attribution.level, attribution.cause, attribution.first_bad_step, attribution.owner) == (
        3, "perception_drift", 1, "ecdm")
    assert [e["level"] for e in attribution.evidence] == [1, 2, 2, 3]
    assert all(set(e) >= {"level", "conclusion", "cause", "detail", "steps"} for e in attribution.evidence)
    facts = attribution.features["facts"]
    assert set(facts) == set(AttributionFacts.__dataclass_fields__) - {"recurring"}
    assert facts == {"level": 3, "cause": "perception_drift", "first_bad_step": 1, "good_prefix": 1,
                     "wrong_steps": 1, "correctable": True, "interruption_known": False}
    assert attribution.capability == "multi_constraint_filtering"
    trajectory.refresh_from_db()
    assert trajectory.verdict == "false"  # a model failure stays False: the ECDM owns it


def test_level_one_on_a_false_trajectory_re_routes_it_as_env_error(django_capture_on_commit_callbacks):
    trajectory = make_trajectory([(HOME, OPEN), (HOME, tap("Headphones", 660)), (AD, tap("Learn more", 1660)),
                                  (PHONES, FAILURE)], anomalies={2: {"kind": "ad_popup", "via": "farm", "package": SHOP}})
    with django_capture_on_commit_callbacks() as callbacks:
        attribution = attribute(trajectory)
    assert (attribution.level, attribution.cause, attribution.owner) == (1, "popup", "environment")
    assert {k: attribution.features[k] for k in ("type", "step", "network", "package")} == {
        "type": "ad_popup", "step": 2, "network": "on", "package": SHOP}
    assert attribution.features["facts"]["interruption_known"] and attribution.first_bad_step == 2
    trajectory.refresh_from_db()
    assert (trajectory.verdict, trajectory.destination) == ("env_error", "env_healing")
    assert callbacks  # healing and re-collection wait for the commit
    assert ecdm_dispatch(ecdm.facts_of(attribution)) == ENV_REPAIR  # "close the pop-up and resume"


def test_a_network_cut_in_the_records_wins_over_the_look_of_a_loop():
    from tests.flywheel.rules.attribution_screens import BACK

    looping = [(HOME, OPEN), (HOME, tap("Headphones", 660)), (RESULTS, BACK), (HOME, tap("Headphones", 660)),
               (RESULTS, BACK), (HOME, tap("Headphones", 660)), (RESULTS, BACK)]
    model = attribute(make_trajectory(looping, query=make_query("loop-1")))
    assert (model.level, model.cause, model.first_bad_step) == (3, "state_tracking", 2)
    env = attribute(make_trajectory(looping, query=make_query("loop-2"), verdict="env_error",
                                    anomalies={2: {"kind": "network_off", "via": "adb"}}))
    assert (env.level, env.cause, env.features["network"]) == (1, "network", "off")


def test_a_task_specification_defect_sends_the_query_back_to_review_but_not_a_rejected_one():
    query = make_query("vague", verification={})
    attribution = attribute(make_trajectory([(HOME, OPEN), (HOME, FAILURE)], query=query))
    assert (attribution.level, attribution.cause, attribution.owner) == (2, "unverifiable_query", "query_review")
    query.refresh_from_db()
    assert query.status == "review" and query.status_reason.startswith("attribution: ")
    rejected = make_query("rejected", verification={}, status="rejected")
    attribute(make_trajectory([(HOME, OPEN), (HOME, FAILURE)], query=rejected))
    rejected.refresh_from_db()
    assert rejected.status == "rejected" and rejected.status_reason == ""


def correct_but_failed_by_a():
    return make_trajectory(CORRECT, votes=[("A", "false", A_FAILED), ("B", "true", None), ("C", "true", None)])


def test_a_verifier_defect_raises_one_rule_flag_on_the_failing_rule():
    trajectory = correct_but_failed_by_a()
    attribution = attribute(trajectory)
    assert (attribution.level, attribution.cause, attribution.owner) == (2, "verifier_defect", "rule_fix")
    flag = RuleFlag.objects.get(trajectory=trajectory)
    assert (flag.system, flag.status, flag.query_id) == ("A", "open", trajectory.query_id)
    assert flag.rule == {"terminal": [A_FAILED["results"][0]["check"]]} and "System A" in flag.reason
    attribute(trajectory)
    assert RuleFlag.objects.filter(trajectory=trajectory).count() == 1  # one open flag per rule, not per run


def test_a_fixed_rule_sends_the_trajectory_back_to_evaluation(monkeypatch, role_users, django_capture_on_commit_callbacks):
    trajectory = correct_but_failed_by_a()
    attribute(trajectory)
    judged = []
    monkeypatch.setattr(tasks.evaluate_trajectory, "delay", judged.append)
    flag = RuleFlag.objects.get(trajectory=trajectory)
    with django_capture_on_commit_callbacks(execute=True):
        flag = ecdm.resolve_rule_flag(flag, role_users["manager"], fixed=True)
    assert (flag.status, flag.resolved_by) == ("fixed", role_users["manager"]) and flag.resolved_at
    trajectory.refresh_from_db()
    assert (trajectory.verdict, trajectory.destination, trajectory.judging_since) == ("pending", "", None)
    assert judged == [trajectory.pk]
    assert ecdm.resolve_rule_flag(flag, role_users["manager"], fixed=False).status == "fixed"  # resolved once


def test_a_dismissed_flag_attributes_again_without_the_verifier_check_and_dispatches(monkeypatch, role_users):
    monkeypatch.setattr("flywheel.repair.counterfactual.assign_class", lambda attribution: None, raising=False)
    monkeypatch.setattr(tasks.repair_run, "delay", lambda repair_id: None)
    trajectory = correct_but_failed_by_a()
    attribute(trajectory)
    flag = ecdm.resolve_rule_flag(RuleFlag.objects.get(trajectory=trajectory), role_users["manager"], fixed=False)
    assert flag.status == "dismissed"
    latest = trajectory.attributions.first()
    assert latest.level == 3 and latest.owner == "ecdm"
    assert "rule flag was dismissed" in latest.evidence[2]["detail"]
    # the path was followed and success declared, yet the rule was right: the goal's conditions do not
    # hold at the end, and the correct prefix is kept by RQA
    assert (latest.cause, latest.first_bad_step, latest.ecdm_path) == ("constraint_violation", 5, "rqa")
    repair = Repair.objects.get(trajectory=trajectory, attribution=latest)
    assert (repair.path, repair.step_index, repair.status) == ("rqa", 5, "pending")
    assert RuleFlag.objects.filter(trajectory=trajectory, status="open").count() == 0


def test_a_persons_decision_is_read():
    trajectory = correct_but_failed_by_a()
    Adjudication.objects.create(trajectory=trajectory, decision="wrong", decided_at=timezone.now())
    assert attribute(trajectory).level == 3  # a person said wrong: no rule is flagged
    assert not RuleFlag.objects.exists()


def test_bad_input_is_still_attributed_and_the_evidence_says_what_was_missing():
    empty = make_trajectory([])
    attribution = attribute(empty)
    assert attribution.level == 3 and attribution.first_bad_step is None
    assert "no steps" in attribution.evidence[0]["detail"]
    blind = make_trajectory([(HOME, OPEN), (PHONES, FAILURE)], query=make_query("blind"), screenshots=False)
    Step.objects.filter(trajectory=blind, index=1).update(hierarchy="blobs/00/gone.xml")
    Step.objects.create(trajectory=blind, index=2, hierarchy=store_blob(b"<not xml", "xml"))
    attribution = attribute(blind)
    assert attribution.features["missing"] == ["step 0: no screenshot", "step 1: dump unreadable",
                                               "step 1: no screenshot", "step 2: dump does not parse",
                                               "step 2: no screenshot"]
    assert "missing: step 0: no screenshot" in attribution.evidence[0]["detail"]


def test_a_pop_up_on_the_farms_own_screen_is_found_end_to_end():
    from tests.simfarm.phone_fixtures import new_phone, sh

    phone = new_phone()
    sh(phone, f"monkey -p {SHOP} 1")
    home = phone.dump_hierarchy()
    sh(phone, "am broadcast -a com.sim.ANOMALY --es kind update_prompt")
    prompt = phone.dump_hierarchy()
    update = tap("Update now", 0)
    update[0]["point"] = next([int(v) for v in line.split('bounds="[')[1].split("]")[0].split(",")]
                              for line in prompt.split("<node") if "btn_update" in line)
    trajectory = make_trajectory([(home, tap("Headphones", 648)), (prompt, update), (home, FAILURE)],
                                 anomalies={1: {"kind": "update_prompt", "via": "farm", "package": SHOP}})
    attribution = attribute(trajectory)
    assert (attribution.level, attribution.cause, attribution.first_bad_step) == (1, "popup", 1)
    assert "Update now" in attribution.evidence[0]["detail"]


def test_gem_distances_to_the_target_page_are_read_from_the_graph():
    app = App.objects.get_or_create(package=SHOP)[0]
    pages = {}
    for name, xml in (("home", HOME), ("results", RESULTS), ("filters", FILTERS)):
        signature, shape, count = layout_of(xml)
        pages[name] = GemPage.objects.create(app=app, name=name, layout_signature=signature, layout_shape=shape,
                                             node_count=count, is_start=name == "home")
    first = Edge.objects.create(source=pages["home"], target=pages["results"], via="tap",
                                action={"action": "click", "target": {"text": "Headphones"}})
    second = Edge.objects.create(source=pages["results"], target=pages["filters"], via="tap",
                                 action={"action": "click", "target": {"content_desc": "Filter"}})
    query = make_query("gem")
    query.gem_path = [first.pk, second.pk]
    query.save(update_fields=["gem_path"])
    assert gem_distances(query, {0: (HOME, ""), 1: (RESULTS, ""), 2: (FILTERS, ""), 3: (AD, "")}) == {
        0: 2, 1: 1, 2: 0, 3: None}
    trajectory = make_trajectory([(HOME, OPEN), (RESULTS, FAILURE)], query=query)
    trace, _missing = trace_of(trajectory)
    assert [s.gem_distance for s in trace.steps] == [2, 1]
