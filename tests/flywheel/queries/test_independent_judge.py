"""Gate 1's judge is independent of the writer (§2.2.6: "Newly generated queries must pass an
independent LLM judge"): the writer's own endpoint is refused at launch with a clear message, and an
independent endpoint judges gate 1 while the writer only writes and polishes."""
import pytest

from flywheel.models import GenerationRun, ModelVersion
from flywheel.queries.gates import JUDGE_PROMPT, JudgeNotIndependent, run_gates, same_endpoint
from flywheel.queries.generation.runs import generate_now, launch_generation
from tests.flywheel.openai_stub import StubOpenAI
from tests.flywheel.queries.test_gates import draft, world  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def endpoint(name, url="http://gpu-a:8000/v1", served=""):
    return ModelVersion.objects.create(name=name, kind="endpoint", endpoint_url=url, served_model_name=served)


def test_the_same_endpoint_is_the_same_version_or_the_same_model_at_the_same_url():
    writer = endpoint("writer-v1", served="qwen-72b")
    assert same_endpoint(writer, writer)
    assert same_endpoint(writer, endpoint("judge-alias", url="http://GPU-A:8000/v1/", served="qwen-72b"))
    assert not same_endpoint(writer, endpoint("judge", served="llama-70b"))          # another model there
    assert not same_endpoint(writer, endpoint("judge-b", url="http://gpu-b:8000/v1", served="qwen-72b"))
    assert not same_endpoint(writer, None) and not same_endpoint(None, None)


def test_launching_with_the_writer_as_judge_is_refused_before_anything_is_written():
    writer = endpoint("writer-v1", served="qwen-72b")
    alias = endpoint("judge-alias", served="qwen-72b")
    for judge in (writer, alias):
        with pytest.raises(JudgeNotIndependent, match="different model from the one that writes the drafts"):
            launch_generation({"per_leaf": 1}, None, writer, judge)
        with pytest.raises(JudgeNotIndependent, match=judge.name):
            generate_now({"per_leaf": 1}, model_version=writer, judge_version=judge)
    assert not GenerationRun.objects.exists()
    run = launch_generation({"per_leaf": 1}, None, writer, endpoint("judge", served="llama-70b"))
    assert run.judge_version.name == "judge" and run.model_version == writer


def test_the_generation_form_says_why_and_launches_nothing(client_as):
    writer = endpoint("writer-v1", served="qwen-72b")
    client = client_as("manager")
    answer = client.post("/generation/", {"model_version": writer.pk, "judge_version": writer.pk, "per_leaf": 1},
                         follow=True)
    page = answer.content.decode()
    assert "Nothing was launched" in page and "an independent" in page and "Traceback" not in page
    assert not GenerationRun.objects.exists()
    assert "Gate 1 judge" in client.get("/generation/").content.decode()


def test_gate1_is_judged_by_the_independent_endpoint_never_by_the_writer(world):  # noqa: F811
    with StubOpenAI(model="writer-7b") as writer_stub, StubOpenAI(model="judge-72b") as judge_stub:
        writer = ModelVersion.objects.create(name="writer", kind="endpoint", endpoint_url=writer_stub.url,
                                             served_model_name="writer-7b", sampling={"retries": 0})
        judge = ModelVersion.objects.create(name="judge", kind="endpoint", endpoint_url=judge_stub.url,
                                            served_model_name="judge-72b", sampling={"retries": 0})
        judge_stub.replies.append((200, judge_stub.chat_reply(
            '{"realism": 0.9, "completable": true, "reason": "reads like a person"}'), 0))
        [result] = run_gates([draft("Search for noise cancelling headphones in ShopMart", world)], writer, judge)
        with pytest.raises(JudgeNotIndependent):
            run_gates([draft("Search for a kettle in ShopMart", world)], writer, writer)
    gate1 = result.gate_results["gate1"]
    assert gate1["judged_by"] == "llm" and gate1["judge_reason"] == "reads like a person"
    assert [r["messages"][0]["content"] for r in judge_stub.requests] == [JUDGE_PROMPT]
    assert all(r["messages"][0]["content"] != JUDGE_PROMPT for r in writer_stub.requests)
