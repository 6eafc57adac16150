"""Systems B and C with an LLM judge behind a local OpenAI-compatible server."""
import pytest

from flywheel.judging.llm_judge import judge_model_version
from flywheel.judging.system_b import system_b_vote
from flywheel.judging.system_c import system_c_vote
from flywheel.models import ModelVersion
from tests.flywheel.judging.pixel_judge import text_of
from tests.flywheel.judging.test_systems_b_c import DONE, HOME, MAC, SETTINGS, WLAN, click, view
from tests.flywheel.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db


@pytest.fixture
def judge(settings):
    with StubOpenAI(model="judge-7b") as stub:
        ModelVersion.objects.create(name="judge", kind="endpoint", endpoint_url=stub.url,
                                    served_model_name="judge-7b")
        settings.JUDGE_MODEL_VERSION = "judge"
        yield stub, judge_model_version()


def test_the_judge_derives_milestones_for_system_b(judge):
    stub, version = judge
    stub.replies.append((200, stub.chat_reply(
        'Here: {"milestones": [{"name": "wlan", "text_contains": "Advanced"}, '
        '{"name": "mac", "text_contains": "MAC address"}]}'), 0))
    trajectory = view([(HOME, click(1, 1)), (SETTINGS, click(1, 1)), (WLAN, click(1, 1)), (MAC, DONE)], MAC, spec={})
    vote = system_b_vote(trajectory, version)
    assert vote.vote == "true" and "derived by judge" in vote.rationale
    assert "show my MAC address" in stub.requests[0]["messages"][1]["content"]


def test_the_judge_votes_for_system_c_and_rules_take_over_when_it_fails(judge):
    stub, version = judge
    trajectory = view([(HOME, click(1, 1)), (SETTINGS, DONE)], SETTINGS)
    stub.replies.append((200, stub.chat_reply('{"vote": "false", "rationale": "stopped on the Settings list"}'), 0))
    vote = system_c_vote(trajectory, version)
    assert vote.vote == "false" and vote.rationale.startswith("LLM judge: stopped")
    assert "Step 0" in text_of(stub.requests[0])
    stub.replies.append((500, {"error": "overloaded"}, 0))
    fallback = system_c_vote(trajectory, version)
    assert "LLM judge failed" in fallback.rationale and fallback.vote in ("true", "false")
