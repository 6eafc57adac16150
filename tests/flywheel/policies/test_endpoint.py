"""The endpoint policy against a local OpenAI-compatible server."""
import base64
import hashlib
import math

import pytest

from flywheel.policies import EndpointPolicy, PolicyError, PolicyState, check_endpoint_health, policy_for
from flywheel.policies.protocol import HistoryEntry
from tests.flywheel.openai_stub import StubOpenAI

GOOD = ("[Observation] Settings list with \"WLAN\"\n[Reflection]\n[Plan] open WLAN\n"
        "[Decision] Tap \"WLAN\" at (500, 300)\n[Memory] none\n"
        "<tool_call>{\"name\": \"mobile_use\", \"arguments\": {\"action\": \"click\", \"coordinate\": [500, 300]}}</tool_call>")


def state(shots=7):
    return PolicyState(goal="Turn on WLAN", screenshots=[f"png{i}".encode() for i in range(shots)],
                       history=[HistoryEntry(cot={"Decision": "Open Settings"}, action={"action": "open", "app": "settings"})],
                       screen_size=(1080, 2400), foreground={"package": "com.android.settings", "activity": ".Settings"})


def test_request_is_pinned_and_carries_the_last_k_screenshots_as_data_urls():
    with StubOpenAI() as stub:
        stub.replies.append((200, stub.chat_reply(GOOD, logprobs=[-0.1, -0.3]), 0))
        policy = EndpointPolicy(stub.url, stub.model, sampling={"temperature": 0.7, "k_screenshots": 3, "bogus": 1})
        proposal = policy.propose(state())
    sent = stub.requests[0]
    assert sent["model"] == "gui-agent-7b" and sent["temperature"] == 0.7 and sent["seed"] == 0
    assert "bogus" not in sent and sent["max_tokens"] == 1024
    images = [part["image_url"]["url"] for part in sent["messages"][1]["content"] if part["type"] == "image_url"]
    assert [base64.b64decode(url.split(",")[1]) for url in images] == [b"png4", b"png5", b"png6"]
    assert "Open Settings" in sent["messages"][1]["content"][0]["text"]
    # the proposal, with coordinates in the protocol's thousandths
    assert proposal.action == {"action": "click", "point": [500, 300], "coords": "thousandths"}
    assert proposal.cot["Observation"].startswith("Settings list")
    assert proposal.confidence == pytest.approx(math.exp(-0.2), abs=1e-3)
    # the raw exchange is kept, images by hash
    stored = proposal.model_io["request"]["messages"][1]["content"][-1]["image_url"]["url"]
    assert stored == "sha256:" + hashlib.sha256(b"png6").hexdigest()
    assert proposal.model_io["response"]["choices"][0]["message"]["content"] == GOOD


def test_retries_on_server_errors_then_succeeds():
    with StubOpenAI() as stub:
        stub.replies += [(503, {"error": "loading"}, 0), (200, stub.chat_reply(GOOD), 0)]
        proposal = EndpointPolicy(stub.url, stub.model, retries=2).propose(state())
    assert [a.get("status") for a in proposal.model_io["attempts"]] == [503, 200]


def test_timeouts_are_bounded_and_reported():
    with StubOpenAI() as stub:
        stub.replies += [(200, stub.chat_reply(GOOD), 2.0), (200, stub.chat_reply(GOOD), 2.0)]
        policy = EndpointPolicy(stub.url, stub.model, timeout=0.3, retries=1)
        with pytest.raises(PolicyError, match="failed 2 time") as raised:
            policy.propose(state())
    assert all("error" in attempt for attempt in raised.value.model_io["attempts"])


def test_client_errors_are_not_retried_and_bad_output_keeps_the_exchange():
    with StubOpenAI() as stub:
        stub.replies += [(400, {"error": "bad model"}, 0)]
        with pytest.raises(PolicyError, match="HTTP 400"):
            EndpointPolicy(stub.url, stub.model).propose(state())
        assert len(stub.requests) == 1
        stub.replies += [(200, stub.chat_reply("I think I should tap somewhere"), 0)]
        with pytest.raises(PolicyError, match="does not follow the protocol") as raised:
            EndpointPolicy(stub.url, stub.model).propose(state())
    assert raised.value.model_io["response"]["choices"][0]["message"]["content"].startswith("I think")
    assert "no action found" in raised.value.model_io["parse_error"]


def test_health_check():
    with StubOpenAI() as stub:
        assert check_endpoint_health(stub.url)["models"] == ["gui-agent-7b"]
        assert check_endpoint_health(stub.url, model="gui-agent-7b")["ok"]
        wrong = check_endpoint_health(stub.url, model="other")
        assert not wrong["ok"] and "does not serve 'other'" in wrong["error"]
        port = stub.server.server_address[1]
    down = check_endpoint_health(f"http://127.0.0.1:{port}/v1", timeout=1)
    assert not down["ok"] and down["error"]


@pytest.mark.django_db
def test_policy_for_a_registered_model_version():
    from flywheel.models import ModelVersion

    version = ModelVersion.objects.create(name="agent-v3", kind="endpoint", endpoint_url="http://h:8000/v1/",
                                          served_model_name="agent", sampling={"temperature": 0.2})
    policy = policy_for(version)
    assert isinstance(policy, EndpointPolicy)
    assert policy.base_url == "http://h:8000/v1" and policy.model == "agent" and policy.sampling["temperature"] == 0.2
    assert policy_for(None).name == "offline-rules-v1"


@pytest.mark.django_db
def test_on_the_rl_line_an_endpoint_samples_and_returns_logprobs():
    from flywheel.models import ModelVersion

    version = ModelVersion.objects.create(name="agent-v4", kind="endpoint", endpoint_url="http://h:8000/v1",
                                          sampling={"rl_temperature": 0.9, "max_tokens": 256})
    collected = policy_for(version, line="automatic").sampling
    assert collected["temperature"] == 0.0 and collected["seed"] == 0 and "logprobs" not in collected
    rl = policy_for(version, line="rl").sampling
    # a group's rollouts can disagree: sampled, no fixed seed; logprobs for the trainer
    assert rl["temperature"] == 0.9 and rl["logprobs"] is True and "seed" not in rl and rl["max_tokens"] == 256
    version.sampling = {}
    assert policy_for(version, line="rl").sampling["temperature"] == 0.7
