"""The "Judges vs truth" page: managers and adjudicators see each system's confusion matrix per screen
kind, HTSC's figures beside their targets and the wrong verdicts with every vote; others get 403."""
import pytest

from flywheel.models import JudgeCase, JudgeEvaluation

pytestmark = pytest.mark.django_db

THRESHOLDS = {"B": {"milestone_share": 1.0}, "C": {"loop_length": 3, "detour_factor": 3.0}}


def evaluation_with_cases():
    evaluation = JudgeEvaluation.objects.create(set_version="v1", set_sha256="0" * 64, phone_serial="sim-0001",
                                                real_phone=True, blind_share=0.2, thresholds=THRESHOLDS,
                                                status=JudgeEvaluation.Status.DONE, cases_total=3)
    votes = lambda a, b, c: {"A": {"vote": a, "rationale": "terminal state not readable"},  # noqa: E731
                             "B": {"vote": b, "rationale": "all 2 milestones reached in order"},
                             "C": {"vote": c, "rationale": "coherent progress over 4 steps"}}
    JudgeCase.objects.create(evaluation=evaluation, key="shop-sony/expert", task="shop-sony", skill="expert",
                             screen_kind="ordinary", truth=True, votes=votes("abstain", "true", "true"), outcome="true")
    JudgeCase.objects.create(evaluation=evaluation, key="notes-save/near_miss", task="notes-save", skill="near_miss",
                             screen_kind="trap", truth=False, truth_detail="content: 'Groceries' not in ''",
                             votes=votes("abstain", "true", "true"), outcome="true")
    JudgeCase.objects.create(evaluation=evaluation, key="tickets-seat/expert", task="tickets-seat", skill="expert",
                             screen_kind="blind", truth=True, votes=votes("abstain", "abstain", "true"),
                             outcome="undetermined")
    return evaluation


def test_a_manager_sees_figures_matrices_and_the_wrong_verdict_with_its_votes(client_as):
    evaluation_with_cases()
    body = client_as("manager").get("/judges/").content.decode()
    assert "real-phone mode" in body
    purity = body.split('data-testid="figure-sft_purity"')[1].split("</tr>")[0]
    assert "50.0%" in purity and "✗ not met" in purity          # 2 True, one truly done
    trap = body.split('data-testid="figure-trap_purity"')[1].split("</tr>")[0]
    assert "0.0%" in trap
    blind = body.split('data-testid="figure-blind_purity"')[1].split("</tr>")[0]
    assert "no case of this kind reached True" in blind
    undetermined = body.split('data-testid="figure-undetermined_rate"')[1].split("</tr>")[0]
    assert "33.3%" in undetermined
    for system in ("A", "B", "C", "HTSC"):
        assert f'data-testid="matrix-{system}"' in body
    wrong = body.split('data-testid="wrong-verdicts"')[1]
    assert "notes-save/near_miss" in wrong and "Trap screens" in wrong
    assert "all 2 milestones reached in order" in wrong            # the votes behind the wrong verdict
    assert "shop-sony/expert" not in wrong


def test_adjudicators_see_it_and_other_roles_do_not(client_as):
    evaluation_with_cases()
    assert client_as("adjudicator").get("/judges/").status_code == 200
    for role in ("annotator", None):
        assert client_as(role).get("/judges/").status_code == 403


def test_without_an_evaluation_the_page_says_how_to_make_one(client_as):
    body = client_as("manager").get("/judges/").content.decode()
    assert 'data-testid="judges-empty"' in body and "make judges" in body


def test_an_evaluation_stopped_on_the_way_says_so_and_keeps_what_was_judged(monkeypatch):
    from flywheel.judging import judge_set

    evaluation = judge_set.start_evaluation("sim-0001", "v1", thresholds=THRESHOLDS)
    judged = []

    def judge_then_stop(evaluation, phone, case):
        if judged:
            raise KeyboardInterrupt
        judged.append(JudgeCase.objects.create(evaluation=evaluation, key=case["key"], task=case["task"],
                                               skill=case["skill"], screen_kind="ordinary", truth=case["truth"],
                                               votes={}, outcome="undetermined"))

    monkeypatch.setattr(judge_set, "judge_case", judge_then_stop)
    with pytest.raises(KeyboardInterrupt):
        judge_set.run_evaluation(evaluation, phone=None)
    evaluation.refresh_from_db()
    assert evaluation.status == JudgeEvaluation.Status.FAILED and "stopped before the end" in evaluation.error
    assert evaluation.cases.count() == 1 and evaluation.finished_at is not None
