"""Cascaded failure attribution (§2.5.1) against the report's own cases: environment first, then
the task and its verifiers, then the model, with the first wrong step located."""
import pytest

from flywheel.queries.vocabulary import CAPABILITIES
from flywheel.rules.attribution import (
    CAUSE_CAPABILITIES,
    capability_of,
    cascaded_attribution,
    contradictory_constraints,
)
from flywheel.rules.attribution_environment import screen_interference
from flywheel.rules.attribution_trace import TaskSpec, Trace, VoteFacts
from flywheel.rules.ecdm import ENV_REPAIR, RQA, STEP_CORRECTION, AttributionFacts, ecdm_dispatch
from flywheel.rules.stops import Stop, StopKind
from tests.flywheel.rules.attribution_screens import (
    AD,
    BACK,
    CART_NO_PAYMENT,
    CRASH,
    FAILURE,
    FILTERS,
    HOME,
    MILESTONES,
    NETWORK_ERROR,
    OPEN,
    PERMISSION,
    PHONES,
    PRODUCT,
    RESULTS,
    SHOP,
    SONY_RESULTS,
    SPEC,
    SUCCESS,
    button,
    node,
    screen,
    tap,
    trajectory,
    votes,
    window,
)

LAUNCHER = screen(window(button("ShopMart", 600, package="launcher"), package="launcher"))
FILTER_TAP = tap("Filter", 180, x=996)
SWIPE = ({"action": "swipe", "direction": "up"}, {"Decision": "Swipe up to scroll"})
WAIT = ({"action": "wait", "seconds": 2}, {"Decision": "Wait 2 s for the page to load"})
CORRECT = [(LAUNCHER, OPEN), (HOME, tap("Headphones", 660)), (RESULTS, FILTER_TAP), (FILTERS, tap("Sony", 660)),
           (FILTERS, tap("Show results", 2060)), (SONY_RESULTS, SUCCESS)]


def dispatched(conclusion):
    return ecdm_dispatch(AttributionFacts(**conclusion.facts()))


def levels(conclusion):
    return [(e["level"], e["conclusion"]) for e in conclusion.evidence]


# -- Level 1: environment ---------------------------------------------------------------------------

LOOPING = [(LAUNCHER, OPEN), (HOME, tap("Headphones", 660)), (RESULTS, BACK), (HOME, tap("Headphones", 660)),
           (RESULTS, BACK), (HOME, tap("Headphones", 660)), RESULTS]


def test_a_network_cut_and_lost_state_tracking_look_alike_and_the_record_decides():
    # "a mid-task interruption caused by a network disconnection and one caused by lost state
    # tracking are nearly indistinguishable in the Action-Observation history"
    model = cascaded_attribution(trajectory(*LOOPING, stop=Stop(StopKind.MAX_STEPS, "maximum steps (6)")))
    assert (model.level, model.cause, model.finding.first_bad_step) == (3, "state_tracking", 2)
    assert levels(model) == [(1, "clear"), (2, "clear"), (2, "clear"), (3, "found")]
    env = cascaded_attribution(trajectory(*LOOPING, stop=Stop(StopKind.MAX_STEPS, "maximum steps (6)"),
                                          anomalies={2: {"kind": "network_off", "via": "adb"}}))
    assert (env.level, env.cause, env.owner) == (1, "network", "environment")
    assert env.finding.features["network"] == "off" and env.finding.features["step"] == 2
    assert levels(env) == [(1, "found")]  # the cascade stops at the first level that explains it


def test_a_network_error_page_without_a_record_is_level_one_too():
    conclusion = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, tap("Headphones", 660)),
                                                 (NETWORK_ERROR, tap("Retry", 1360)), (NETWORK_ERROR, FAILURE)))
    assert (conclusion.level, conclusion.cause) == (1, "network")
    assert conclusion.finding.features["type"] == "network_unavailable"
    assert conclusion.finding.first_bad_step == 2 and "never got past it" in conclusion.finding.detail


def test_a_pop_up_that_derailed_the_agent_is_an_interruption_the_ecdm_can_repair():
    # the agent taps the ad's "Learn more" instead of closing it
    conclusion = cascaded_attribution(trajectory(
        (LAUNCHER, OPEN), (HOME, tap("Headphones", 660)), (AD, tap("Learn more", 1660)), (PRODUCT, FAILURE),
        anomalies={2: {"kind": "ad_popup", "via": "farm", "package": SHOP}}))
    assert (conclusion.level, conclusion.cause, conclusion.finding.first_bad_step) == (1, "popup", 2)
    facts = conclusion.facts()
    assert facts["interruption_known"] and facts["good_prefix"] == 2
    assert dispatched(conclusion) == ENV_REPAIR
    assert conclusion.finding.features["type"] == "ad_popup" and conclusion.finding.features["package"] == SHOP


def test_a_pop_up_closed_at_once_is_not_the_cause_and_the_cascade_goes_on():
    conclusion = cascaded_attribution(trajectory(
        (LAUNCHER, OPEN), (HOME, tap("Headphones", 660)), (AD, tap("Close", 260, x=960)),
        (RESULTS, FILTER_TAP), (FILTERS, tap("Bose", 820)), (SONY_RESULTS, FAILURE),
        anomalies={2: {"kind": "ad_popup", "via": "farm"}}))
    assert conclusion.level == 3
    assert "dismissed at step 2, not the cause" in conclusion.evidence[0]["detail"]
    # the dismissal is not a deviation from the path: the slip is tapping Bose for Sony
    assert (conclusion.cause, conclusion.finding.first_bad_step) == ("perception_drift", 4)
    assert conclusion.finding.good_prefix == 4 and dispatched(conclusion) == STEP_CORRECTION


def test_a_denied_permission_is_a_missing_permission():
    conclusion = cascaded_attribution(trajectory(
        (LAUNCHER, OPEN), (PERMISSION, tap("Don't allow", 1460)), (HOME, FAILURE),
        anomalies={1: {"kind": "permission_dialog"}}))
    assert (conclusion.level, conclusion.cause) == (1, "permission")
    assert conclusion.finding.features["type"] == "permission_denied"
    granted = cascaded_attribution(trajectory((LAUNCHER, OPEN), (PERMISSION, tap("While using the app", 1160)),
                                              (HOME, FAILURE)))
    assert granted.level == 3


def test_a_crash_dialog_on_the_last_screen_is_an_app_crash_without_any_record():
    conclusion = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, tap("Headphones", 660)), (CRASH, FAILURE)))
    assert (conclusion.level, conclusion.cause, conclusion.finding.first_bad_step) == (1, "crash", 2)


def test_a_page_that_loads_slowly_for_a_moment_is_not_the_cause():
    loading = screen(window(button("", 900, rid=f"{SHOP}:id/loading"), button("Loading…", 1100)))
    passing = cascaded_attribution(trajectory((LAUNCHER, OPEN), (loading, WAIT),
                                              (HOME, tap("Phones", 820)), (PHONES, FAILURE)))
    assert passing.level == 3 and "loaded after 1 look" in passing.evidence[0]["detail"]
    stuck = cascaded_attribution(trajectory((LAUNCHER, OPEN), (loading, FAILURE)))
    assert (stuck.level, stuck.cause, stuck.finding.features["network"]) == (1, "network", "slow")


def test_collection_cut_short_and_judges_environment_findings_are_level_one():
    cut = cascaded_attribution(trajectory((LAUNCHER, OPEN), HOME, stop=Stop(StopKind.LEASE_LOST, "lease lost")))
    assert (cut.level, cut.cause) == (1, "interrupted")
    judged = cascaded_attribution(trajectory(
        (LAUNCHER, OPEN), (HOME, FAILURE),
        votes=(VoteFacts("A", "env_error", "no network", {"environment": "network failure (wifi and mobile data off)"}),)))
    assert (judged.level, judged.cause, judged.finding.features["network"]) == (1, "network", "off")
    person = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, FAILURE), adjudication="environment"))
    assert (person.level, person.cause) == (1, "environment")


FARM_KINDS = {"permission_dialog": "permission", "ad_popup": "popup", "low_battery": "popup",
              "network_unavailable": "network", "slow_network": "network", "app_crash": "crash",
              "app_not_responding": "crash", "login_expired": "login_expired", "captcha": "account_state",
              "risk_control": "account_state", "payment_authentication": "account_state",
              "update_prompt": "popup", "storage_full": "popup"}


@pytest.mark.parametrize("kind", sorted(FARM_KINDS))
def test_every_farm_interference_is_recognised_on_its_real_screen(kind):
    from devices.uitree import parse_hierarchy
    from tests.simfarm.phone_fixtures import new_phone, sh

    phone = new_phone()
    sh(phone, "monkey -p com.sim.translator 1")
    assert screen_interference(parse_hierarchy(phone.dump_hierarchy())) == {}
    sh(phone, f"am broadcast -a com.sim.ANOMALY --es kind {kind}")
    seen = screen_interference(parse_hierarchy(phone.dump_hierarchy()))
    assert FARM_KINDS[kind] in seen


# -- Level 2: the task and its verifiers ------------------------------------------------------------

def test_an_unverifiable_query_goes_back_to_query_review():
    spec = TaskSpec(text="Make my phone better", tier="L3", verification={})
    conclusion = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, FAILURE), spec=spec))
    assert (conclusion.level, conclusion.cause, conclusion.owner) == (2, "unverifiable_query", "query_review")
    assert dispatched(conclusion) == ""


def test_contradictory_constraints_are_a_task_specification_defect():
    assert "equal 0 and 1" in contradictory_constraints("Wi-Fi", [
        {"check": "settings", "namespace": "global", "key": "wifi_on", "equals": "1"},
        {"check": "settings", "namespace": "global", "key": "wifi_on", "equals": "0"}])
    assert "above 200 and below 100" in contradictory_constraints(
        "Find headphones under $100 that cost more than $200", [])
    # the report's all-conditions-mandatory filter is well posed, and so are bounds of other quantities
    assert contradictory_constraints("rated at least 4.5, under 100 yuan per person, with delivery", []) == ""
    assert contradictory_constraints("at least 200 reviews and under $100", []) == ""
    spec = TaskSpec(text="Headphones under $100 and above $200", verification={"milestones": MILESTONES})
    conclusion = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, FAILURE), spec=spec))
    assert (conclusion.level, conclusion.cause) == (2, "contradictory_query")


def test_a_question_the_spec_does_not_answer_makes_the_query_ambiguous():
    ask = ({"action": "clarify", "question": "Which Sony headphones?"}, {"Decision": "Ask the user to clarify"})
    spec = TaskSpec(text="Buy the Sony headphones", tier="L3", verification={"milestones": MILESTONES})
    unanswered = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, ask), spec=spec,
                                                 stop=Stop(StopKind.CLARIFY_UNANSWERED,
                                                           "clarify: no answer from a person")))
    assert (unanswered.level, unanswered.cause) == (2, "ambiguous_query")
    assert "Which Sony headphones?" in unanswered.finding.detail
    answered = Trace(steps=tuple(s if s.index != 1 else s.__class__(**{**s.__dict__, "answer": "the XM5"})
                                 for s in trajectory((LAUNCHER, OPEN), (HOME, ask), spec=spec).steps), spec=spec)
    assert cascaded_attribution(answered).level == 3
    spec_answers = TaskSpec(text=spec.text, verification={"milestones": MILESTONES, "clarify": {"answer": "XM5"}})
    assert cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, ask), spec=spec_answers)).level == 3


A_FAILED = {"results": [{"check": {"check": "content", "uri": "content://com.sim.shop/search", "contains": "brand=Sony"},
                         "passed": False, "detail": "not found"}]}


def test_a_rule_that_failed_a_correct_trajectory_is_a_verifier_defect():
    conclusion = cascaded_attribution(trajectory(*CORRECT, votes=votes("false", "true", "true", A_FAILED)))
    assert (conclusion.level, conclusion.cause, conclusion.owner) == (2, "verifier_defect", "rule_fix")
    features = conclusion.finding.features
    assert features["system"] == "A" and features["rule"]["terminal"][0]["contains"] == "brand=Sony"
    assert dispatched(conclusion) == ""
    # a person said it was wrong: the rule is not second-guessed
    person = cascaded_attribution(trajectory(*CORRECT, votes=votes("false", "true", "true", A_FAILED),
                                             adjudication="wrong"))
    assert person.level == 3
    # the flag was dismissed (the rule was right): attributed again without the verifier check
    again = cascaded_attribution(trajectory(*CORRECT, votes=votes("false", "true", "true", A_FAILED)),
                                 skip_verifier=True)
    assert again.level == 3 and "rule flag was dismissed" in again.evidence[2]["detail"]


def test_multi_constraint_filtering_settled_early_is_a_constraint_violation_not_a_verifier_defect():
    # "find a restaurant rated above 4.5, under 100 CNY per person, with delivery — all mandatory":
    # B and C see the results page and pass it; A reads the terminal state and fails it
    path = {"steps": [{"action": "open", "app": SHOP}, {"action": "click", "target": {"text": "Headphones"}},
                      {"action": "click", "target": {"content_desc": "Filter"}},
                      {"action": "click", "target": {"resource_id": f"{SHOP}:id/brand_sony"}},
                      {"action": "click", "target": {"resource_id": f"{SHOP}:id/rating_45"}},
                      {"action": "click", "target": {"resource_id": f"{SHOP}:id/apply_filters"}},
                      {"action": "terminate", "status": "success"}]}
    spec = TaskSpec(text="ShopMart: Sony headphones rated 4.5 and up", tier="L2", known_path=path,
                    verification={**SPEC.verification}, capabilities=("multi_constraint_filtering",))
    conclusion = cascaded_attribution(trajectory(
        (LAUNCHER, OPEN), (HOME, tap("Headphones", 660)), (RESULTS, FILTER_TAP), (FILTERS, tap("Sony", 660)),
        (FILTERS, tap("Show results", 2060)), (SONY_RESULTS, SUCCESS), spec=spec,
        votes=votes("false", "true", "true", A_FAILED)))
    assert levels(conclusion) == [(1, "clear"), (2, "clear"), (2, "clear"), (3, "found")]
    assert (conclusion.cause, conclusion.finding.first_bad_step, conclusion.capability) == (
        "constraint_violation", 4, "multi_constraint_filtering")
    assert conclusion.finding.correctable and dispatched(conclusion) == STEP_CORRECTION


# -- Level 3: the model --------------------------------------------------------------------------------

def test_element_confusion_is_a_single_step_slip_with_the_first_wrong_step_located():
    conclusion = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, tap("Phones", 820)), (PHONES, FAILURE)))
    finding = conclusion.finding
    assert (conclusion.cause, finding.first_bad_step, finding.good_prefix, finding.wrong_steps) == (
        "perception_drift", 1, 1, 1)
    assert "element confusion" in finding.detail and finding.correctable
    assert dispatched(conclusion) == STEP_CORRECTION


def test_a_tap_that_misses_the_element_the_decision_named_is_a_localization_offset():
    missed = ({"action": "click", "point": [540, 740]}, {"Decision": "Tap \"Headphones\" at (540, 740)"})
    conclusion = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, missed), (HOME, FAILURE)))
    assert (conclusion.cause, conclusion.finding.first_bad_step) == ("perception_drift", 1)
    assert "localization offset" in conclusion.finding.detail
    no_path = TaskSpec(text="Show me headphones", verification={"milestones": MILESTONES})
    located = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, missed), (HOME, FAILURE), spec=no_path))
    assert located.finding.first_bad_step == 1 and "on no element" in located.finding.detail


def test_the_over_scoped_task_of_the_report_keeps_its_correct_prefix_for_rqa():
    # "failed at final checkout because no payment method was bound"
    path = {"steps": [{"action": "open", "app": SHOP}, {"action": "click", "target": {"text": "Headphones"}},
                      {"action": "click", "target": {"text": "Sony WH-1000XM5 Headphones"}},
                      {"action": "click", "target": {"resource_id": f"{SHOP}:id/add_to_cart"}},
                      {"action": "click", "target": {"text": "Pay now"}},
                      {"action": "call_user", "reason": "confirm the payment"}]}
    spec = TaskSpec(text="Buy the Sony XM5 headphones on ShopMart", tier="L2", known_path=path,
                    verification={"milestones": [{"name": "product", "text": "$349"}], "handoff": "call_user"},
                    capabilities=("information_synthesis",))
    conclusion = cascaded_attribution(trajectory(
        (LAUNCHER, OPEN), (HOME, tap("Headphones", 660)), (RESULTS, tap("Sony WH-1000XM5 Headphones", 660)),
        (PRODUCT, tap("Add to cart", 2060)), (CART_NO_PAYMENT, FAILURE), spec=spec))
    finding = conclusion.finding
    assert (conclusion.cause, finding.first_bad_step, finding.good_prefix) == ("over_scoped", 4, 4)
    assert not finding.correctable and dispatched(conclusion) == RQA
    assert conclusion.capability == "information_synthesis"


def test_without_a_known_path_the_milestones_bound_the_golden_prefix():
    spec = TaskSpec(text="Show me Sony headphones on ShopMart", verification={"milestones": MILESTONES})
    conclusion = cascaded_attribution(trajectory(
        (LAUNCHER, OPEN), (HOME, tap("Headphones", 660)), (RESULTS, FILTER_TAP),
        (FILTERS, SWIPE), (FILTERS, FAILURE), spec=spec))
    assert (conclusion.cause, conclusion.finding.first_bad_step, conclusion.finding.good_prefix) == ("over_scoped", 3, 3)


def test_success_declared_with_milestones_unmet_is_a_constraint_violation():
    spec = TaskSpec(text="Show me Sony headphones on ShopMart", verification={"milestones": MILESTONES})
    conclusion = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, tap("Headphones", 660)),
                                                 (RESULTS, SUCCESS), spec=spec))
    assert (conclusion.cause, conclusion.finding.first_bad_step) == ("constraint_violation", 2)
    assert "filters open" in conclusion.finding.detail


def test_repeated_actions_and_a_ran_out_loop_are_state_tracking_errors():
    spec = TaskSpec(text="Show me Sony headphones on ShopMart", verification={"milestones": MILESTONES},
                    capabilities=("looping",))
    scroll = ({"action": "swipe", "direction": "up", "start": [540, 1600], "end": [540, 600]}, {"Decision": "Swipe up"})
    conclusion = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, tap("Headphones", 660)),
                                                 (RESULTS, scroll), (RESULTS, scroll), (RESULTS, scroll),
                                                 (RESULTS, scroll), spec=spec,
                                                 stop=Stop(StopKind.REPEATED_ACTIONS, "4 repeated actions")))
    assert (conclusion.cause, conclusion.finding.first_bad_step, conclusion.capability) == (
        "state_tracking", 2, "looping")
    assert conclusion.finding.wrong_steps >= 2


def test_the_gem_distance_to_the_target_page_locates_the_first_wrong_step():
    spec = TaskSpec(text="Show me Sony headphones", verification={"milestones": MILESTONES})
    wander = ({"action": "click", "point": [540, 820]}, {"Decision": "Tap \"Phones\" at (540, 820)"})
    conclusion = cascaded_attribution(trajectory(
        (LAUNCHER, OPEN), (HOME, wander), (PHONES, BACK), (HOME, FAILURE), spec=spec, gems={0: 3, 1: 2, 2: 4, 3: 2}))
    assert (conclusion.cause, conclusion.finding.first_bad_step) == ("perception_drift", 1)
    assert conclusion.finding.correctable and "GEM distance" in conclusion.finding.detail


def test_a_trajectory_with_nothing_to_read_is_still_attributed():
    empty = cascaded_attribution(Trace(spec=SPEC))
    assert empty.level == 3 and empty.finding.first_bad_step is None
    assert "no steps" in empty.evidence[0]["detail"]
    blind = cascaded_attribution(trajectory(("", OPEN), ("", FAILURE)))
    assert blind.level == 3 and "no screen dump could be read" in blind.evidence[0]["detail"]


def test_capabilities_are_the_reports_dimensions():
    for names in CAUSE_CAPABILITIES.values():
        assert set(names) <= set(CAPABILITIES)
    assert capability_of(3, "state_tracking", []) == "cross_page_state_tracking"
    assert capability_of(3, "constraint_violation", ["numerical_reasoning"]) == "numerical_reasoning"
    assert capability_of(3, "perception_drift", []) == ""
    assert capability_of(1, "popup", ["looping"]) == ""


def test_a_heads_up_notification_matters_only_when_the_agent_taps_it():
    row = node(desc="Chatter notification: New message", rid="com.android.systemui:id/expandableNotificationRow",
               bounds=(24, 40, 1056, 300), clickable=True, package="com.android.systemui",
               children=[node("You have 1 new message", bounds=(80, 160, 1000, 230), package="com.android.systemui")])
    card = node(cls="android.widget.FrameLayout", bounds=(24, 40, 1056, 300), package="com.android.systemui",
                children=[row])  # the heads-up window covers the top of the screen only
    covered = HOME.replace("</hierarchy>", card + "</hierarchy>")
    record = {1: {"kind": "notification", "via": "adb"}}
    tapped = cascaded_attribution(trajectory((LAUNCHER, OPEN), (covered, tap("New message", 170)), (PHONES, FAILURE),
                                             anomalies=record))
    assert (tapped.level, tapped.cause, tapped.finding.features["type"]) == (1, "popup", "notification")
    covered_results = RESULTS.replace("</hierarchy>", card + "</hierarchy>")
    covered_phones = PHONES.replace("</hierarchy>", card + "</hierarchy>")
    ignored = cascaded_attribution(trajectory((LAUNCHER, OPEN), (covered, tap("Phones", 820)),
                                              (covered_phones, BACK), (covered_results, FAILURE), anomalies=record))
    assert ignored.level == 3 and ignored.finding.first_bad_step == 1
    assert "notification at step 1" in ignored.evidence[0]["detail"]


def test_an_expired_login_needs_a_person_and_is_never_the_models_fault():
    expired = screen(window(node("Login expired", bounds=(80, 900, 1000, 980)),
                            button("Cancel", 1100, rid=f"{SHOP}:id/btn_cancel"),
                            button("Log in", 1300, rid=f"{SHOP}:id/btn_relogin")))
    conclusion = cascaded_attribution(trajectory((LAUNCHER, OPEN), (expired, tap("Cancel", 1160)), (HOME, FAILURE)))
    assert (conclusion.level, conclusion.cause, conclusion.finding.first_bad_step) == (1, "login_expired", 1)
    assert not conclusion.finding.interruption_known or dispatched(conclusion) == ""  # not a pop-up to close


def test_a_safety_veto_is_a_constraint_violation_at_the_step_it_names():
    conclusion = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, tap("Headphones", 660)),
                                                 (RESULTS, FILTER_TAP), (FILTERS, FAILURE),
                                                 safety="step 2: payment confirmation"))
    assert (conclusion.cause, conclusion.finding.first_bad_step) == ("constraint_violation", 2)


def test_a_model_that_answered_nothing_usable_is_corrected_at_that_step():
    conclusion = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, tap("Headphones", 660)), RESULTS,
                                                 stop=Stop(StopKind.POLICY_ERROR,
                                                           "policy error: no <tool_call> in the output")))
    finding = conclusion.finding
    assert (conclusion.cause, finding.first_bad_step, finding.good_prefix, finding.correctable) == (
        "perception_drift", 2, 2, True)
    assert dispatched(conclusion) == STEP_CORRECTION


def test_a_tap_on_the_row_that_holds_the_paths_target_is_on_the_path():
    row = screen(window(node(cls="android.widget.LinearLayout", bounds=(0, 560, 1080, 760), clickable=True,
                             children=[node("Headphones", bounds=(48, 600, 400, 680))]),
                        button("Phones", 820)))
    conclusion = cascaded_attribution(trajectory((LAUNCHER, OPEN), (row, tap("Headphones", 660, x=900)),
                                                 (RESULTS, tap("Bose QC45", 820)), (PHONES, FAILURE)))
    assert conclusion.finding.first_bad_step == 2  # step 1 hit the row, not a miss


def test_scrolling_past_the_element_the_path_needs_is_where_it_went_wrong():
    # the target was on the screen, the model scrolled it away, and only then did something wrong
    lower = screen(window(node("Filters", bounds=(48, 100, 900, 260)), button("4.5 & up", 600, rid=f"{SHOP}:id/rating_45"),
                          button("Show results", 2000, rid=f"{SHOP}:id/apply_filters")))
    conclusion = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, tap("Headphones", 660)), (RESULTS, FILTER_TAP),
                                                 (FILTERS, SWIPE), (lower, tap("4.5 & up", 660)), (lower, FAILURE)))
    finding = conclusion.finding
    assert (conclusion.cause, finding.first_bad_step, finding.good_prefix, finding.correctable) == (
        "perception_drift", 3, 3, True)
    assert "looked past" in finding.detail and dispatched(conclusion) == STEP_CORRECTION
    applied = cascaded_attribution(trajectory((LAUNCHER, OPEN), (HOME, tap("Headphones", 660)), (RESULTS, FILTER_TAP),
                                              (FILTERS, SWIPE), (lower, tap("Show results", 2060)), (SONY_RESULTS, SUCCESS)))
    assert (applied.cause, applied.finding.first_bad_step) == ("constraint_violation", 3)


def test_a_person_who_judged_it_wrong_is_not_overruled_by_level_one():
    derailed = [(LAUNCHER, OPEN), (HOME, tap("Headphones", 660)), (AD, tap("Learn more", 1660)), (PRODUCT, FAILURE)]
    conclusion = cascaded_attribution(trajectory(*derailed, adjudication="wrong"))
    assert conclusion.level == 3
    assert "a person adjudicated it the model's failure" in conclusion.evidence[0]["detail"]


def test_the_permission_settings_pages_are_not_a_permission_dialog():
    from devices.uitree import parse_hierarchy

    pages = screen(window(node("App permissions", bounds=(48, 100, 900, 260), package="com.android.permissioncontroller"),
                          button("Location", 600, package="com.android.permissioncontroller"),
                          package="com.android.permissioncontroller"))
    assert screen_interference(parse_hierarchy(pages)) == {}
    assert "permission" in screen_interference(parse_hierarchy(PERMISSION))
