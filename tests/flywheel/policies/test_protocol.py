"""The agent protocol: prompt, round trip, and a parser that takes what models emit."""
import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devices.actions import ACTIONS
from flywheel.policies.protocol import (
    TAGS,
    HistoryEntry,
    ProtocolError,
    build_messages,
    format_output,
    parse_output,
    system_prompt,
)

COT = {"Observation": "Settings home page with a WLAN row", "Reflection": "",
       "Plan": "Open WLAN, then Advanced", "Decision": "Tap \"WLAN\" at (540, 400)", "Memory": ""}


def test_system_prompt_lists_all_fourteen_actions_and_the_five_tags():
    prompt = system_prompt()
    for name in ACTIONS:
        assert f"- {name} " in prompt
    for tag in TAGS:
        assert f"[{tag}]" in prompt
    assert "[0, 1000]" in prompt
    assert "WLAN → Advanced" in system_prompt(known_path={"mode": "tap", "summary": "Settings → WLAN → Advanced"})


def test_messages_keep_all_text_history_but_only_the_last_k_screenshots():
    history = [HistoryEntry(cot={**COT, "Decision": f"Tap step {i}"}, action={"action": "wait"})
               for i in range(7)]
    shots = [f"png-{i}".encode() for i in range(7)]
    messages = build_messages("Turn on WLAN", history, shots, k=3, context={"package": "com.android.settings"})
    assert messages[0]["role"] == "system"
    content = messages[1]["content"]
    text = content[0]["text"]
    assert "Goal: Turn on WLAN" in text and "package=com.android.settings" in text
    assert all(f"Tap step {i}" in text for i in range(7))
    images = [part["image_url"]["url"] for part in content[1:]]
    assert len(images) == 3
    assert [base64.b64decode(url.split(",", 1)[1]) for url in images] == shots[-3:]
    assert images[0].startswith("data:image/png;base64,")


@pytest.mark.parametrize("action", [
    {"action": "click", "point": [540, 400], "coords": "pixel"},
    {"action": "type", "text": "milk, eggs", "point": [100, 200], "coords": "thousandths"},
    {"action": "swipe", "direction": "up", "distance": 0.5},
    {"action": "system_button", "button": "back"},
    {"action": "terminate", "status": "success", "answer": "Done"},
    {"action": "clarify", "question": "Which one?", "choices": ["a", "b"]},
])
def test_round_trip(action):
    parsed = parse_output(format_output(COT, action), screen=(1080, 2400))
    assert parsed.cot == COT
    assert parsed.action == action


REAL_OUTPUTS = [
    # lower-case tags, extra spaces, colon after the tag, JSON in a code fence
    ("[ observation ]: Home screen\n[plan]  open notes\n[decision] open the Notes app\n"
     "```json\n{\"action\": \"open\", \"app\": \"notes\"}\n```", {"action": "open", "app": "notes"}),
    # Qwen-style tool call wrapper with "coordinate" in thousandths
    ("[Observation] list\n[Reflection]\n[Plan] tap item\n[Decision] tap the first item\n[Memory] none\n"
     "<tool_call>\n{\"name\": \"mobile_use\", \"arguments\": {\"action\": \"click\", \"coordinate\": [500, 120]}}\n</tool_call>",
     {"action": "click", "point": [500, 120], "coords": "thousandths"}),
    # bare JSON with fractions
    ("[OBSERVATION] form [PLAN] tap save [DECISION] tap Save {\"action\": \"click\", \"point\": [0.5, 0.91]}",
     {"action": "click", "point": [0.5, 0.91], "coords": "fraction"}),
    # pixels beyond 1000 are pixels
    ("[Observation] a [Plan] b [Decision] tap at (540, 2200)\n{\"action\":\"click\",\"point\":[540,2200]}",
     {"action": "click", "point": [540, 2200], "coords": "pixel"}),
    # point as a string
    ("[Observation] a [Plan] b [Decision] long press {\"action\":\"long_press\",\"point\":\"(300, 400)\"}",
     {"action": "long_press", "point": [300, 400], "coords": "thousandths"}),
]


@pytest.mark.parametrize("text,action", REAL_OUTPUTS)
def test_parser_accepts_what_models_emit(text, action):
    parsed = parse_output(text, screen=(1080, 2400))
    assert parsed.action == action
    assert parsed.cot["Observation"] and parsed.cot["Plan"] and parsed.cot["Decision"]


@pytest.mark.parametrize("text,error", [
    ("[Observation] a [Plan] b [Decision] c", "no action found"),
    ("[Observation] a [Plan] b [Decision] c <tool_call>{\"action\": \"click\"", "never closed"),
    ("[Observation] a [Plan] b [Decision] c {\"action\":\"wait\"} {\"action\":\"wait\"}", "exactly one action"),
    ("[Observation] a [Plan] b [Decision] c <tool_call>{\"action\":\"fly\"}</tool_call>", "unknown action 'fly'"),
    ("[Observation] a [Plan] b [Decision] c <tool_call>{\"action\":\"click\"}</tool_call>", "needs point"),
    ("[Observation] a [Plan] b [Decision] c <tool_call>{\"action\":\"click\",\"point\":[1,2],\"speed\":3}</tool_call>",
     "no field 'speed'"),
    ("[Observation] a [Plan] b [Decision] c <tool_call>{\"action\":\"click\",\"point\":[1500,3000]}</tool_call>",
     "outside the 1080x2400 screen"),
    ("[Observation] a [Plan] b [Decision] c <tool_call>{\"action\":\"click\",\"point\":[1.5,0.2],\"coords\":\"fraction\"}</tool_call>",
     "outside [0, 1]"),
    ("[Observation] a [Plan] b [Decision] c <tool_call>{\"action\":\"click\",\"point\":[-1,2]}</tool_call>", "negative"),
    ("[Plan] b [Decision] c <tool_call>{\"action\":\"wait\"}</tool_call>", "[Observation]"),
    ("[Observation] a [Observation] a2 [Plan] b [Decision] c {\"action\":\"wait\"}", "more than once"),
    ("[Observation] a [Plan] b [Decision] c <tool_call>{\"action\": 'wait'}</tool_call>", "not valid JSON"),
    ("[Observation] a [Plan] b [Decision] c <tool_call>{\"action\":\"terminate\",\"status\":\"ok\"}</tool_call>",
     "status"),
    (None, "must be text"),
])
def test_parser_rejects_with_a_precise_error(text, error):
    with pytest.raises(ProtocolError) as raised:
        parse_output(text, screen=(1080, 2400))
    assert error in str(raised.value)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), st.binary(), st.none(), st.integers(), st.lists(st.text())))
def test_fuzz_any_input_gives_a_result_or_a_protocol_error(value):
    try:
        parsed = parse_output(value)
    except ProtocolError:
        return
    assert set(parsed.cot) == set(TAGS) and parsed.action["action"] in ACTIONS


TAG_CHUNK = st.sampled_from([f"[{t}]" for t in TAGS] + [f"[{t.lower()}] " for t in TAGS])
JSON_CHUNK = st.builds(json.dumps, st.fixed_dictionaries(
    {"action": st.sampled_from(list(ACTIONS) + ["tap", ""])},
    optional={"point": st.lists(st.one_of(st.integers(-5, 3000), st.floats(allow_nan=True)), max_size=3),
              "text": st.text(max_size=5), "coords": st.sampled_from(["pixel", "fraction", "x"]),
              "status": st.sampled_from(["success", "nope"]), "button": st.text(max_size=6)}))
WRAP = st.sampled_from(["{}", "<tool_call>{}</tool_call>", "```json\n{}\n```", "<tool_call>{}", "{}{}"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(TAG_CHUNK, st.text(max_size=20), st.builds(lambda w, j: w.replace("{}", j), WRAP, JSON_CHUNK)),
                max_size=12))
def test_fuzz_protocol_shaped_input(chunks):
    text = " ".join(chunks)
    try:
        parsed = parse_output(text, screen=(1080, 2400))
    except ProtocolError as error:
        assert str(error)
        return
    assert parsed.action["action"] in ACTIONS
    assert all(parsed.cot[tag] for tag in ("Observation", "Plan", "Decision"))


SAFE_TEXT = st.text(alphabet=st.characters(blacklist_characters="[]{}<>`", blacklist_categories=("Cs",)),
                    min_size=1, max_size=40).filter(lambda s: s.split())


@settings(max_examples=200, deadline=None)
@given(obs=SAFE_TEXT, plan=SAFE_TEXT, decision=SAFE_TEXT, text=SAFE_TEXT,
       x=st.integers(0, 1079), y=st.integers(0, 2399))
def test_fuzz_round_trip(obs, plan, decision, text, x, y):
    cot = {"Observation": obs, "Reflection": "", "Plan": plan, "Decision": decision, "Memory": ""}
    action = {"action": "type", "text": text, "point": [x, y], "coords": "pixel"}
    parsed = parse_output(format_output(cot, action), screen=(1080, 2400))
    assert parsed.action == action
    assert parsed.cot == {tag: " ".join(value.split()) for tag, value in cot.items()}
