"""The tiny model's opt-in protocol tokenizer ({"tiny": {"vocab": "protocol"}}, training/trainer/tiny.py):
its BPE merges are learnt from training/trainer/protocol_corpus.txt, which this module writes from the
protocol itself (the trainer may not import flywheel). The file must match what the protocol says
today; after a change to the protocol's wording, rewrite it with

    .venv/bin/python manage.py shell -c "from tests.training.test_tiny_vocab import write_corpus; write_corpus()"
"""
import itertools

import pytest

from devices.actions import DESCRIPTIONS, SYSTEM_BUTTONS
from flywheel.policies.protocol import HistoryEntry, build_messages, describe_action, format_output, parse_output
from training.trainer.tiny import (
    PROTOCOL_CORPUS,
    ModelSpecError,
    build_tokenizer,
    load_model,
    load_processor,
    save_artifact,
)

pytestmark = pytest.mark.usefixtures("torch")

GOALS = ["Turn on Wi-Fi in the settings", "Set an alarm for 7:30 tomorrow morning",
         "Send a message to Alex saying I am running late", "Find the weather forecast for this weekend",
         "Add milk and eggs to my shopping list", "Play the most recent podcast episode",
         "Book a table for two at an Italian restaurant tonight", "Take a photo and share it with Sam",
         "Turn the screen brightness down and enable dark mode", "Call my mother on speaker",
         "Find the cheapest wireless headphones and note the price", "Create a calendar event on Friday at noon",
         "Open the last downloaded file and read its title", "Navigate to the nearest gas station",
         "Change the language of the phone to English", "Delete the oldest email in the inbox",
         "Check my bank balance", "Order a large pepperoni pizza for delivery",
         "Rename the recording from yesterday to Meeting notes", "Start a timer for ten minutes"]
PLAIN = ("The screen shows a list of items with a search bar at the top and a button at the bottom. "
         "A dialog asks for permission; the app is loading; the page did not change after the last tap. "
         "I should scroll down to find the option, then open it and check that the switch is on. "
         "The previous action failed because a pop-up covered the button, so I will close it first. "
         "The task is done: the setting is saved and the confirmation message is visible. "
         "The home screen is shown with a row of icons. The app is open and shows a menu with several options. "
         "Nothing happened, so I will wait a moment and try again. The keyboard is visible and the text field "
         "is focused. A new page opened with the details of the selected entry. The list is longer than the "
         "screen; the item I need is probably further down. The user must confirm the payment, so I hand "
         "control back. The instruction could mean two different contacts, so I ask which one is meant. "
         "I typed the name into the search field and the results appear below it. The toggle next to the "
         "option is now enabled. I remember the price and the name of the product for the final answer. "
         "Go back to the previous screen, select the first result, scroll up, press and hold the message, "
         "swipe left to see more, and drag the slider to the right until the value is correct.")


def example_actions():
    """Every action of the action space, in its documented form and with other values."""
    numbers = itertools.count(37, 97)
    for _, action in DESCRIPTIONS.values():
        yield dict(action)
        if "point" in action:
            yield {**action, "point": [next(numbers) % 1000, next(numbers) % 1000], "coords": "thousandths"}
    yield from ({"action": "system_button", "button": button} for button in SYSTEM_BUTTONS)
    for direction in ("up", "down", "left", "right"):
        yield {"action": "swipe", "direction": direction, "point": [500, 600], "distance": 0.5}
    yield {"action": "terminate", "status": "failure", "answer": "The option is not available"}
    yield {"action": "type", "text": "hello world", "point": [420, 130], "coords": "thousandths"}


def example_reply(goal: str, action: dict, step: int) -> tuple[dict, dict]:
    cot = {"Observation": f"The screen shows step {step} of the task: {goal.lower()}.",
           "Reflection": "" if step % 3 else "The last action did not change the screen.",
           "Plan": f"{describe_action(action)}, then check the result and continue toward the goal.",
           "Decision": describe_action(action, label="Search" if step % 2 else None),
           "Memory": "" if step % 2 else f"Goal: {goal}."}
    return cot, action


def protocol_corpus() -> str:
    """System prompts, user turns with history and replies of every action, describe_action's
    sentences and plain English, in a fixed order."""
    parts, actions = [], list(example_actions())
    for index, goal in enumerate(GOALS):
        history = [HistoryEntry(*example_reply(goal, actions[(index + n) % len(actions)], n)) for n in range(3)]
        coords = ("thousandths", "pixel", "fraction")[index % 3]
        messages = build_messages(goal, history[: index % 4], [], coords=coords,
                                  context={"package": "com.android.launcher", "activity": "MainActivity"})
        parts.append(messages[0]["content"] if index < 3 else "")
        parts.append(messages[1]["content"][0]["text"])
    for step, (goal, action) in enumerate(itertools.product(GOALS[::3], actions)):
        parts.append(format_output(*example_reply(goal, action, step)))
    parts.append(PLAIN)
    return "\n\n".join(part for part in parts if part) + "\n"


def sample_reply() -> str:
    return format_output({"Observation": "Clock is open and shows the alarm list.", "Reflection": "",
                          "Plan": "Tap the add button, then set 7:30.", "Decision": "Tap \"Add alarm\" at (880, 910)",
                          "Memory": "Clock is open."},
                         {"action": "click", "point": [880, 910], "coords": "thousandths"})


def test_the_corpus_file_is_what_the_protocol_says_today():
    assert PROTOCOL_CORPUS.read_text(encoding="utf-8") == protocol_corpus(), \
        "protocol_corpus.txt is stale: rewrite it (see this module's docstring)"


def test_protocol_vocab_spells_a_reply_in_far_fewer_tokens_and_decodes_it_exactly(tmp_path):
    byte_tokenizer, protocol_tokenizer = build_tokenizer(), build_tokenizer("protocol")
    reply = sample_reply()
    byte_ids, ids = byte_tokenizer.encode(reply), protocol_tokenizer.encode(reply)
    assert len(byte_ids) == len(reply.encode())
    assert len(ids) * 2 < len(byte_ids)   # 96 against 263
    assert 1000 < len(protocol_tokenizer) <= 4096 + 7
    assert protocol_tokenizer.decode(ids) == reply
    assert parse_output(protocol_tokenizer.decode(ids)).action["point"] == [880, 910]
    odd = "Ünïcödé 🙂 \t tabs\n and 12345 numbers"   # bytes the corpus never shows still encode
    assert protocol_tokenizer.decode(protocol_tokenizer.encode(odd)) == odd
    assert build_tokenizer("protocol").get_vocab() == protocol_tokenizer.get_vocab()   # the RL reference's too


def test_a_tiny_model_with_the_protocol_vocab_round_trips_through_its_checkpoint(tmp_path):
    model, processor = load_model({"tiny": {"vocab": "protocol", "hidden_size": 32}})
    assert model.config.text_config.vocab_size >= len(processor.tokenizer)
    assert model.config.text_config.vocab_size <= 4160
    save_artifact(model, processor, tmp_path / "final")
    assert (tmp_path / "final" / "tokenizer.json").is_file()
    reloaded = load_processor(tmp_path / "final")
    reply = sample_reply()
    assert reloaded.tokenizer.encode(reply) == processor.tokenizer.encode(reply)
    assert reloaded.tokenizer.decode(reloaded.tokenizer.encode(reply)) == reply
    again, _ = load_model({"path": str(tmp_path / "final")})
    assert again.config.text_config.vocab_size == model.config.text_config.vocab_size
    with pytest.raises(ModelSpecError, match="vocab"):
        load_model({"tiny": {"vocab": "words"}})



def write_corpus() -> None:
    PROTOCOL_CORPUS.write_text(protocol_corpus(), encoding="utf-8")
