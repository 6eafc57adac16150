"""The VLM Teacher against a local OpenAI-compatible server: answers, timeouts and garbage."""
import base64

import pytest

from flywheel.models import ModelVersion
from flywheel.policies.base import PolicyState
from flywheel.policies.protocol import HistoryEntry
from flywheel.policies.teacher import TeacherContext, TeacherFailed, teacher_for
from flywheel.policies.teacher_endpoint import EndpointTeacher
from flywheel.policies.teacher_offline import OfflineTeacher
from tests.flywheel.openai_stub import StubOpenAI

WRONG = {"action": "click", "point": [540, 600], "coords": "pixel"}
ANSWER = ("[Observation] Settings shows \"Bluetooth\" and \"Display\".\n[Reflection]\n"
          "[Plan] Open the Bluetooth page.\n[Decision] Tap \"Bluetooth\" at (500, 300)\n[Memory]\n"
          "Confidence: 0.85\n"
          "<tool_call>{\"action\": \"click\", \"point\": [500, 300], \"coords\": \"thousandths\"}</tool_call>")


def context(**extra):
    values = {"goal": "Open the Bluetooth settings", "screenshot": b"frame-png", "screen_size": (1080, 2400),
              "history": [HistoryEntry(cot={"Decision": "Open Settings"}, action={"action": "open", "app": "settings"})],
              "wrong_action": WRONG, "foreground": {"package": "com.android.settings", "activity": ".Settings"},
              "apps": ["com.android.settings"], "known_path": {"summary": "Settings → Bluetooth", "steps": []}}
    values.update(extra)
    return TeacherContext(**values)


def test_the_teacher_is_asked_with_the_screen_the_history_and_the_wrong_action():
    with StubOpenAI() as stub:
        stub.replies.append((200, stub.chat_reply(ANSWER), 0))
        answer = EndpointTeacher(stub.url, stub.model, retries=0).correct(context())
    sent = stub.requests[0]
    text = sent["messages"][1]["content"][0]["text"]
    assert "Open the Bluetooth settings" in text and "Open Settings" in text
    assert "was wrong" in text and "[540, 600]" in text
    assert "Settings → Bluetooth" in sent["messages"][0]["content"]     # the known path, when the query has one
    image = sent["messages"][1]["content"][1]["image_url"]["url"]
    assert base64.b64decode(image.split(",")[1]) == b"frame-png"
    # thousandths → pixels of step N's screen; the stated confidence
    assert answer.action == {"action": "click", "point": [540, 720], "coords": "pixel"}
    assert answer.confidence == pytest.approx(0.85)
    assert answer.cot["Plan"] == "Open the Bluetooth page." and "Confidence" not in answer.cot["Memory"]
    assert answer.model_io["request"]["messages"][1]["content"][1]["image_url"]["url"].startswith("sha256:")


def test_an_answer_that_repeats_the_wrong_action_is_a_failure():
    with StubOpenAI() as stub:
        stub.replies.append((200, stub.chat_reply(ANSWER), 0))
        with pytest.raises(TeacherFailed, match="very action that went wrong"):
            EndpointTeacher(stub.url, stub.model, retries=0).correct(
                context(wrong_action={"action": "click", "point": [540, 720], "coords": "pixel"}, hierarchy_xml=""))


def test_a_confidence_comes_from_logprobs_when_the_teacher_states_none():
    plain = ANSWER.replace("Confidence: 0.85\n", "")
    with StubOpenAI() as stub:
        stub.replies.append((200, stub.chat_reply(plain, logprobs=[-0.1, -0.1]), 0))
        stub.replies.append((200, stub.chat_reply(plain), 0))
        teacher = EndpointTeacher(stub.url, stub.model, retries=0)
        assert teacher.correct(context(wrong_action=None)).confidence == pytest.approx(0.905, abs=1e-3)
        assert teacher.correct(context(wrong_action=None)).confidence is None   # unknown: a person decides


def test_timeouts_raise_teacher_failed_with_the_exchange():
    with StubOpenAI() as stub:
        stub.replies += [(200, stub.chat_reply(ANSWER), 2.0), (200, stub.chat_reply(ANSWER), 2.0)]
        with pytest.raises(TeacherFailed) as raised:
            EndpointTeacher(stub.url, stub.model, timeout=0.3, retries=1).correct(context())
    assert "failed 2 time" in raised.value.reason
    assert len(raised.value.model_io["attempts"]) == 2 and all("error" in a for a in raised.value.model_io["attempts"])


@pytest.mark.parametrize("reply, why", [
    ((200, "this is not json at all", 0), "HTTP 200"),
    ((200, {"object": "chat.completion", "choices": []}, 0), "no choices"),
    ((400, {"error": "bad request"}, 0), "HTTP 400"),
])
def test_garbage_and_refusals_raise_teacher_failed(reply, why):
    with StubOpenAI() as stub:
        stub.replies.append(reply)
        with pytest.raises(TeacherFailed, match=why) as raised:
            EndpointTeacher(stub.url, stub.model, retries=0).correct(context())
    assert raised.value.model_io["attempts"]


def test_output_that_breaks_the_protocol_raises_teacher_failed_and_keeps_it():
    with StubOpenAI() as stub:
        stub.replies.append((200, stub.chat_reply("I would tap on Bluetooth I think."), 0))
        stub.replies.append((200, stub.chat_reply("[Observation] a\n[Plan] b\n[Decision] c\n"
                                                  "<tool_call>{\"action\": \"fly\"}</tool_call>"), 0))
        teacher = EndpointTeacher(stub.url, stub.model, retries=0)
        with pytest.raises(TeacherFailed, match="does not follow the protocol") as raised:
            teacher.correct(context())
        assert "no action found" in raised.value.model_io["parse_error"]
        assert raised.value.model_io["response"]["choices"][0]["message"]["content"].startswith("I would")
        with pytest.raises(TeacherFailed, match="unknown action"):
            teacher.correct(context())


def test_takeover_proposals_speak_the_policy_protocol():
    state = PolicyState(goal="Open the Bluetooth settings", history=[], screenshots=[b"a", b"b"],
                        screen_size=(1080, 2400), foreground={"package": "com.android.settings"})
    with StubOpenAI() as stub:
        stub.replies.append((200, stub.chat_reply(ANSWER), 0))
        proposal = EndpointTeacher(stub.url, stub.model, retries=0, name="teacher-vlm").propose(state)
    assert proposal.action["action"] == "click" and proposal.confidence == pytest.approx(0.85)
    assert proposal.policy == "teacher-vlm" and proposal.model_io["teacher"]["name"] == "teacher-vlm"
    assert "was wrong" not in stub.requests[0]["messages"][1]["content"][0]["text"]


@pytest.mark.django_db
def test_teacher_for_follows_the_setting(settings):
    settings.TEACHER_MODEL_VERSION = ""
    assert isinstance(teacher_for(), OfflineTeacher)
    settings.TEACHER_MODEL_VERSION = "no-such-version"
    assert isinstance(teacher_for(), OfflineTeacher)
    ModelVersion.objects.create(name="teacher-72b", kind="endpoint", endpoint_url="http://127.0.0.1:9/v1",
                                served_model_name="qwen-vl-72b")
    settings.TEACHER_MODEL_VERSION = "teacher-72b"
    teacher = teacher_for()
    assert isinstance(teacher, EndpointTeacher) and teacher.name == "teacher-72b"
    assert teacher.endpoint.model == "qwen-vl-72b"
    assert isinstance(teacher_for(ModelVersion.objects.create(name="offline-x", kind="offline")), OfflineTeacher)
