"""What an endpoint policy sampled is stored with the step: on the RL line the server's token
log-probabilities of the completion and the sampler's settings (the RL trainer's π_old check);
a line or a server without logprobs stores nothing."""
import io

import pytest
from PIL import Image

from devices.observation import Observation
from flywheel.collection import recorder
from flywheel.models import ModelVersion, Query, Step, Trajectory
from flywheel.policies import PolicyError, policy_for
from tests.flywheel.openai_stub import StubOpenAI
from tests.flywheel.policies.test_endpoint import GOOD

pytestmark = pytest.mark.django_db


def observation() -> Observation:
    out = io.BytesIO()
    Image.new("RGB", (8, 16), (20, 40, 60)).save(out, "PNG")
    return Observation(png=out.getvalue(), hierarchy_xml='<?xml version="1.0" ?><hierarchy rotation="0"/>',
                       width=1080, height=2400, foreground={"package": "com.android.settings"})


def propose_once(stub, reply, line: str) -> Step:
    version = ModelVersion.objects.create(name=f"agent-{line}-{ModelVersion.objects.count()}", kind="endpoint",
                                          endpoint_url=stub.url, served_model_name=stub.model,
                                          sampling={"rl_temperature": 0.8})
    query = Query.objects.get_or_create(key="wlan", defaults={"text": "Turn on WLAN", "tier": "L1"})[0]
    trajectory = Trajectory.objects.create(query=query, line=line)
    seen = observation()
    step = recorder.record_observation(trajectory, 0, seen)
    stub.replies.append((200, reply, 0))
    recorder.propose(step, seen, policy_for(version, line=line))
    step.refresh_from_db()
    return step


def test_an_rl_step_stores_the_sampled_tokens_and_their_logprobs():
    with StubOpenAI() as stub:
        reply = stub.chat_reply(GOOD, logprobs=[-0.25, -1.5, -0.125])
        reply["choices"][0]["logprobs"]["content"][2]["token"] = "<|im_end|>"
        step = propose_once(stub, reply, "rl")
        assert stub.requests[-1]["logprobs"] is True and stub.requests[-1]["temperature"] == 0.8
        assert step.sampled == {"temperature": 0.8, "top_p": 1.0, "top_k": 0, "tokens": ["x", "x", "<|im_end|>"],
                                "logprobs": [-0.25, -1.5, -0.125]}
        assert step.proposed_action["action"] == "click"   # nothing else changes
        # a server that answers without logprobs (or a line that does not ask): nothing stored
        assert propose_once(stub, stub.chat_reply(GOOD), "rl").sampled == {}
        assert propose_once(stub, stub.chat_reply(GOOD), "automatic").sampled == {}


def test_a_failed_proposal_stores_no_sample():
    with StubOpenAI() as stub:
        with pytest.raises(PolicyError):
            propose_once(stub, stub.chat_reply("not the protocol", logprobs=[-0.5]), "rl")
    step = Step.objects.get()
    assert step.sampled == {} and "error" in step.model_io
