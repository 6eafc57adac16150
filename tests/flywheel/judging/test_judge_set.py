"""The judge-evaluation set replayed on a farm phone through the product's executor and judged by
Systems A, B, C and HTSC, every case persisted with its votes beside the farm's truth."""
import pytest

from devices.phone import PhoneConnection
from flywheel.judging.judge_set import judge_case, load_set, start_evaluation
from flywheel.models import JudgeCase
from simfarm.farm import Farm
from simfarm.serve import ServerThread

pytestmark = pytest.mark.django_db
META, CASES, _ = load_set("v1")


def first(**wanted):
    return next(c for c in CASES if all(c.get(k) == v for k, v in wanted.items()))


@pytest.fixture(scope="module")
def thread_farm():
    farms = {}

    def farm_for(real_phone: bool):
        if real_phone not in farms:
            farm = Farm(devices=1, seed=META["farm_seed"], real_phone=real_phone)
            server = ServerThread(farm).start()
            farms[real_phone] = (farm, server, PhoneConnection(f"127.0.0.1:{server.port}", META["phone"]))
        return farms[real_phone]

    yield farm_for
    for _, server, _ in farms.values():
        server.stop()


def judged(thread_farm, case, real_phone=False) -> JudgeCase:
    farm, _, phone = thread_farm(real_phone)
    farm.factory_reset(META["phone"])
    evaluation = start_evaluation(META["phone"], "v1", real_phone=real_phone)
    return judge_case(evaluation, phone, case)


def test_the_set_is_labelled_and_spans_skills_and_screen_kinds():
    assert META["cases"] == len(CASES) and META["true"] == sum(1 for c in CASES if c["truth"])
    assert {c["skill"] for c in CASES} >= {"expert", "pseudo", "near_miss", "wanderer", "looper", "quitter", "trap"}
    assert {c["screen_kind"] for c in CASES} == {"ordinary", "blind", "trap"}
    assert 0.3 < META["true"] / META["cases"] < 0.7
    for case in CASES:
        assert case["actions"][-1]["action"] == "terminate" and len(case["step_truth"]) == len(case["actions"])


def test_an_expert_success_is_true_and_a_pseudo_completion_false(thread_farm):
    expert = judged(thread_farm, first(task="shop-filter-sony-l1", skill="expert"))
    assert expert.truth and expert.outcome == "true"
    # The filter lives in the shop's own provider: on no phone does A read it (issue #36); B and C judge.
    assert expert.votes["A"]["vote"] == "abstain" and "no phone lets a shell read it" in expert.votes["A"]["rationale"]
    assert expert.votes["B"]["vote"] == "true" and len(expert.steps) == 6 and expert.screen_kind == "ordinary"
    dark = judged(thread_farm, first(task="settings-dark-theme-l1", skill="expert"))
    assert dark.truth and dark.outcome == "true" and dark.votes["A"]["vote"] == "true"   # a system setting
    pseudo = judged(thread_farm, first(task="settings-dark-theme-l1", skill="pseudo"))
    assert not pseudo.truth and pseudo.outcome == "false" and pseudo.votes["A"]["vote"] == "false"


def test_in_real_phone_mode_system_a_cannot_read_an_apps_own_state(thread_farm):
    case = judged(thread_farm, first(task="shop-filter-sony-l1", skill="expert"), real_phone=True)
    assert case.votes["A"]["vote"] == "abstain" and "not readable" in case.votes["A"]["rationale"]
    assert case.outcome == "true"          # B on the dump and C on the pixels agree


def test_on_a_blind_screen_b_abstains_and_c_reads_the_pixels(thread_farm):
    case = judged(thread_farm, first(task="tickets-book-jazz-b2-l1", skill="expert"))
    assert case.truth and case.screen_kind == "blind"
    assert case.votes["B"]["vote"] == "abstain" and "the UI dump is blind" in case.votes["B"]["rationale"]
    assert case.votes["C"]["vote"] == "true"
    # The booking is the app's own state, which A reads on no phone: with B blind, a person decides.
    assert case.votes["A"]["vote"] == "abstain" and case.outcome == "undetermined"


def test_calibration_reads_the_latest_finished_evaluation(thread_farm, monkeypatch):
    from flywheel.judging.calibration import CANDIDATES
    from flywheel.judging.calibration_purity import set_cases, where_purity_holds
    from flywheel.models import JudgeEvaluation

    farm, _, phone = thread_farm(False)
    evaluation = start_evaluation(META["phone"], "v1")
    for case in (first(task="shop-filter-sony-l1", skill="expert"), first(skill="pseudo", truth=False)):
        farm.factory_reset(META["phone"])
        judge_case(evaluation, phone, case)
    assert set_cases() == []                      # still running: not a measurement yet
    JudgeEvaluation.objects.filter(pk=evaluation.pk).update(status=JudgeEvaluation.Status.DONE)
    cases = set_cases()
    assert sorted(c.row.key for c in cases) == sorted(evaluation.cases.values_list("key", flat=True))
    from flywheel.judging import system_c

    def no_second_reading(*args, **kwargs):
        raise AssertionError("the votes recorded under these thresholds are read again")

    monkeypatch.setattr(system_c, "rules_vote", no_second_reading)
    chosen, note, figures = where_purity_holds(evaluation.thresholds, CANDIDATES, cases)
    assert chosen == evaluation.thresholds and figures["sft_purity"] == 1.0 and "holds" in note


def test_a_case_whose_task_presumes_sign_in_replays_its_setup_before_its_actions(thread_farm):
    """A case made from a task with prerequisites carries what the recipe did (`setup`): the replay redoes
    it after the reset, so the case's own actions start where they started when it was collected."""
    from devices.executor import ActionExecutor
    from flywheel.collection.prerequisites import meet
    from flywheel.judging.judge_set import replay
    from flywheel.rules.prerequisites import Recipe

    farm, _, phone = thread_farm(False)
    shop = "com.sim.shop"
    reset = {"force_stop": [shop], "clear": [shop], "home": True}
    recipe = Recipe.from_row({"key": "shop", "phrases": ["signed in to ShopMart"], "steps": [
        {"action": "open", "app": shop}, {"action": "click", "target": {"resource_id": f"{shop}:id/tab_me"}},
        {"action": "click", "target": {"resource_id": f"{shop}:id/sign_in_row"}},
        {"action": "click", "target": {"resource_id": f"{shop}:id/continue_account"}}]})
    farm.factory_reset(META["phone"])
    record, stop = meet(["signed in to ShopMart"], [recipe], phone, ActionExecutor(phone, rules=[]))
    assert stop is None and farm.phones[META["phone"]].app_state(shop)["logged_in"] is True
    setup = [done["action"] for ran in record["recipes"] for done in ran["actions"]]

    farm.factory_reset(META["phone"])
    case = {"reset": reset, "apps": [shop], "actions": [{"action": "terminate", "status": "success"}]}
    replay(phone, case)
    assert farm.phones[META["phone"]].app_state(shop)["logged_in"] is False     # no setup: signed out
    replay(phone, {**case, "setup": setup})
    assert farm.phones[META["phone"]].app_state(shop)["logged_in"] is True
