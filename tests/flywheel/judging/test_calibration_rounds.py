"""Calibration that compounds (§2.4.2): adjudicators' decisions retroactively calibrate System B's
milestone share and System C's loop length, give the LLM judge examples, and the consensus rate
is shown per round, rising or not."""
import pytest

from flywheel.blobs import store_blob
from flywheel.judging.calibration import calibrate, rounds_table
from flywheel.judging.llm_judge import judge_model_version
from flywheel.judging.system_b import system_b_vote
from flywheel.judging.system_c import system_c_vote
from flywheel.judging.thresholds import DEFAULT_THRESHOLDS, active_thresholds, judge_examples
from flywheel.judging.trajectory_view import StepView, TrajectoryView
from flywheel.models import Adjudication, CalibrationRound, ModelVersion, Query, Step, Trajectory, Verdict, Vote
from tests.flywheel.judging.pixels import frame_png, pictured, require_tesseract, texts_of
from tests.flywheel.judging.test_systems_b_c import DONE, screen
from tests.flywheel.openai_stub import StubOpenAI

CART, LIST, DETAIL, PAID = (screen("Cart", "Quantity 1", "+"), screen("Order list", "Order 17"),
                            screen("Order 17 details"), screen("Payment done"))
SKIPPING = {"milestones": [{"name": "list", "text": "Order list"}, {"name": "detail", "text": "Order 17 details"},
                           {"name": "paid", "text": "Payment done"}]}
PLUS = {"action": "click", "point": [1000, 220]}


def click(y):
    return {"action": "click", "point": [10, y]}


def as_view(steps, spec=None):
    """Each step's frame shows its dump's texts: System C reads the frames (needs tesseract)."""
    final = steps[-1][0]
    return pictured(TrajectoryView(goal="task", steps=[StepView(index=i, hierarchy=h, action=a)
                                                       for i, (h, a) in enumerate(steps)],
                                   final_hierarchy=final, verification=spec or {}))


LOOP_OF_3 = [(CART, PLUS)] * 3 + [(CART, DONE)]          # "add three more": a person says it is right
LOOP_OF_6 = [(CART, PLUS)] * 6 + [(CART, DONE)]          # stuck: a person says it is wrong
SHORTCUT = [(LIST, click(1)), (PAID, DONE)]               # skipped the detail page via a shortcut: right
NOT_PAID = [(LIST, click(1)), (LIST, DONE)]               # never paid: wrong


def test_the_rule_systems_take_thresholds_without_a_database():
    require_tesseract()
    assert system_c_vote(as_view(LOOP_OF_3)).vote == "false"  # defaults hold, nothing to read
    assert system_c_vote(as_view(LOOP_OF_3), thresholds={"loop_length": 4, "detour_factor": 3}).vote == "true"
    assert system_b_vote(as_view(SHORTCUT, SKIPPING)).vote == "false"
    vote = system_b_vote(as_view(SHORTCUT, SKIPPING), thresholds={"milestone_share": 0.67})
    assert vote.vote == "true" and "2 of 3 milestones" in vote.rationale and "detail" in vote.rationale
    assert system_b_vote(as_view(NOT_PAID, SKIPPING), thresholds={"milestone_share": 0.5}).vote == "false"


def adjudicated(steps, decision, spec=None, votes=("abstain", "false", "false"), note="",
                text="Add three more to the cart"):
    query = Query.objects.create(key=f"c{Query.objects.count()}", text=text, tier="L2",
                                 verification=spec or {})
    trajectory = Trajectory.objects.create(query=query, line="automatic", status="completed", verdict="undetermined",
                                           destination="adjudication")
    for i, (xml, action) in enumerate(steps):
        Step.objects.create(trajectory=trajectory, index=i, hierarchy=store_blob(xml.encode(), "xml"),
                            screenshot=store_blob(frame_png(*texts_of(xml)), "png"), executed_action=action)
    for system, vote in zip("ABC", votes):
        Vote.objects.create(trajectory=trajectory, system=system, vote=vote)
    Verdict.objects.create(trajectory=trajectory, outcome="undetermined")
    from django.utils import timezone

    Adjudication.objects.create(trajectory=trajectory, decision=decision, note=note, decided_at=timezone.now())
    return trajectory


@pytest.fixture
def cases(db):
    require_tesseract()
    for _ in range(3):
        adjudicated(LOOP_OF_3, "correct", note="the task asked for three taps")
    adjudicated(LOOP_OF_6, "wrong", votes=("abstain", "false", "false"))
    for _ in range(2):
        adjudicated(SHORTCUT, "correct", spec=SKIPPING, votes=("abstain", "false", "true"), text="Pay for order 17")
    adjudicated(NOT_PAID, "wrong", spec=SKIPPING, votes=("abstain", "false", "false"), text="Pay for order 17")


@pytest.mark.django_db
def test_without_a_round_the_defaults_hold():
    require_tesseract()
    assert active_thresholds() == DEFAULT_THRESHOLDS and judge_examples() == []
    assert system_c_vote(as_view(LOOP_OF_3)).vote == "false"
    assert rounds_table()["rows"] == []


@pytest.mark.django_db
def test_a_round_moves_the_thresholds_towards_the_people_and_the_systems_use_them(cases, role_users):
    round_ = calibrate(role_users["adjudicator"])
    assert round_.number == 1 and round_.adjudications_used == 7 and round_.created_by == role_users["adjudicator"]
    assert round_.thresholds["C"]["loop_length"] == 4        # 3 taps are fine, 6 are a loop
    assert round_.thresholds["C"]["detour_factor"] == 3.0    # nothing said otherwise: unchanged
    assert round_.thresholds["B"]["milestone_share"] == 0.67  # the shortcut skipping one page is right
    assert round_.agreement_after["C"]["agreed"] > round_.agreement_before["C"]["agreed"]
    assert round_.agreement_after["B"]["rate"] == 1.0 and round_.agreement_before["B"]["rate"] < 1.0
    assert any("C.loop_length: 3 → 4" in change for change in round_.agreement_after["changed"])
    # the systems read the active calibration
    assert active_thresholds("C")["loop_length"] == 4
    assert system_c_vote(as_view(LOOP_OF_3)).vote == "true"
    assert system_c_vote(as_view(LOOP_OF_6)).vote == "false"
    assert system_b_vote(as_view(SHORTCUT, SKIPPING)).vote == "true"
    # examples for the judge: spread over the people's outcomes, the systems' misses first
    examples = judge_examples()
    assert 1 < len(examples) <= 4 and {e["outcome"] for e in examples} == {"true", "false"}
    assert all(e["history"].startswith("Step 0") for e in examples)
    assert any(e["missed_by_systems"] and e["note"] == "the task asked for three taps" for e in examples)


@pytest.mark.django_db
def test_too_few_adjudications_keep_the_thresholds():
    adjudicated(LOOP_OF_3, "correct")
    round_ = calibrate()
    assert round_.thresholds == DEFAULT_THRESHOLDS and "thresholds kept" in round_.agreement_after["note"]
    assert round_.created_by is None


@pytest.mark.django_db
def test_the_consensus_rate_per_round_rising_or_not():
    query = Query.objects.create(key="v", text="t", tier="L2")
    trajectory = Trajectory.objects.create(query=query, line="automatic")

    def verdicts(*outcomes):
        for outcome in outcomes:
            Verdict.objects.create(trajectory=trajectory, outcome=outcome)

    verdicts("true", "undetermined", "false", "undetermined")
    Verdict.objects.create(trajectory=trajectory, outcome="undetermined", rationale="flagged for a person: bad spec")
    first = calibrate()
    assert (first.consensus_rate, first.verdicts_counted) == (0.5, 4)  # the flagged one is not HTSC's
    verdicts("true", "true", "false", "undetermined")
    second = calibrate()
    assert (second.consensus_rate, second.verdicts_counted) == (0.75, 4)
    verdicts("undetermined", "undetermined")
    table = rounds_table()
    assert [row["trend"] for row in table["rows"]] == ["", "rising"]
    assert table["live"] == {"rate": 0.0, "verdicts": 2, "trend": "falling"}


@pytest.mark.django_db
def test_the_llm_judge_prompt_carries_the_rounds_examples(cases, settings):
    calibrate()
    with StubOpenAI(model="judge-7b") as stub:
        ModelVersion.objects.create(name="judge", kind="endpoint", endpoint_url=stub.url, served_model_name="judge-7b")
        settings.JUDGE_MODEL_VERSION = "judge"
        stub.replies.append((200, stub.chat_reply('{"vote": "true", "rationale": "three taps as asked"}'), 0))
        vote = system_c_vote(as_view(LOOP_OF_3), judge_model_version())
    assert vote.vote == "true"
    content = stub.requests[0]["messages"][1]["content"]  # text, then the frames as image parts
    prompt = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
    assert "Cases people decided" in prompt and "People's verdict: true" in prompt
    assert "the task asked for three taps" in prompt


# --- the page ---------------------------------------------------------------------------------------

pages = pytest.mark.django_db


@pages
def test_the_calibration_page_for_managers_and_adjudicators(client_as, client):
    response = client.get("/calibration/")
    assert response.status_code == 302 and "/login/" in response["Location"]
    for role in ("annotator", None):
        assert client_as(role).get("/calibration/").status_code == 403
        assert client_as(role).post("/calibration/run/").status_code == 403
    for role in ("manager", "adjudicator"):
        body = client_as(role).get("/calibration/").content.decode()
        assert "No calibration round yet" in body and "adjudication queue" in body and "Calibrate now" in body
    assert client_as("manager").get("/calibration/run/").status_code == 405


@pages
def test_calibrate_now_records_a_round_and_shows_it(cases, client_as):
    adjudicator = client_as("adjudicator")
    response = adjudicator.post("/calibration/run/", follow=True)
    body = response.content.decode()
    assert response.status_code == 200 and "Calibration round 1 from 7 adjudicated trajectories" in body
    assert "C.loop_length: 3 → 4" in body
    assert CalibrationRound.objects.count() == 1
    assert 'data-testid="round-1"' in body and 'data-testid="judge-examples"' in body
