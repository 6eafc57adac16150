"""Step-by-step instructions (L1 plain narration, §2.2.2) read as a sequence of targets.

"Open Settings, tap Display & brightness and switch on Dark theme." becomes
[("click", "Display & brightness"), ("click", "Dark theme")]: the offline policy then follows it
like a known path, matching each target's words to the elements on screen.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

VERBS = [  # longest first: "long-press" before "press"
    (r"long[- ]press|press and hold", "long_press"),
    (r"type|enter|write|fill in", "type"),
    (r"switch on|switch off|turn on|turn off|toggle", "click"),
    (r"tap|press|click|choose|pick|select|hit", "click"),
    (r"go to|go into|open", "click"),
    (r"confirm", "confirm"),
]
_VERB_RE = re.compile(r"\b(" + "|".join(pattern for pattern, _ in VERBS) + r")\b", re.IGNORECASE)
_SPLIT_RE = re.compile(r",\s*(?:and\s+|then\s+)*|\s+and\s+(?:then\s+)?|\s+then\s+|\.\s+", re.IGNORECASE)
# A quote opens after a space or the start and closes before one: "Mom's chat" is not a quote.
_QUOTED_RE = re.compile(r"(?<!\w)[\"“”']([^\"“”]{1,80}?)[\"“”'](?!\w)")
NOISE = frozenset("""the a an button icon category photo order tab option list at bottom top under in on of
from for your to it its this that""".split())


@dataclass
class NarratedStep:
    action: str          # click, long_press, type, confirm
    target: str          # words naming the element (for type: the field, e.g. "title")
    text: str = ""       # what to type
    toggle: bool | None = None  # "switch on X": True; "turn off X": False


def _verb(clause: str):
    match = _VERB_RE.search(clause)
    if not match:
        return None, clause
    word = match.group(1).lower()
    action = next(name for pattern, name in VERBS if re.fullmatch(pattern, word))
    return action, clause[match.end():]


def narrated_steps(goal: str, app_words: set[str]) -> list[NarratedStep]:
    """The goal's clauses as steps; [] when it does not read as a step-by-step narration."""
    quotes = []

    def protect(match):
        quotes.append(match.group(1))
        return f"\x00{len(quotes) - 1}\x00"

    text = _QUOTED_RE.sub(protect, goal.strip().rstrip("."))
    steps, previous, opened_app = [], None, False
    for index, clause in enumerate(part.strip() for part in _SPLIT_RE.split(text) if part and part.strip()):
        action, rest = _verb(clause)
        verb = _VERB_RE.search(clause)
        toggle = None
        if verb and re.fullmatch(r"(switch|turn) (on|off)", verb.group(1).lower()):
            toggle = verb.group(1).lower().endswith("on")
        if action is None:
            action = previous
        if action is None:
            continue
        rest = re.sub(r"\x00(\d+)\x00", lambda m: "\x01" + quotes[int(m.group(1))] + "\x01", rest)
        if index == 0 and (re.match(r"\s*open\b", clause, re.I) or (
                re.match(r"\s*(go to|go into)\b", clause, re.I) and _names_app(
                    re.sub(r"\b(in|at|under)\s+(the\s+)?[\w ]*$", "", rest), app_words))):
            previous, opened_app = "click", True
            continue  # "Open ShopMart": the policy opens the app first anyway
        if action == "type":
            quoted = re.findall(r"\x01([^\x01]*)\x01", rest)
            typed = quoted[0] if quoted else re.split(r"\s+(?:as|into|in)\s+", rest.strip(), maxsplit=1)[0]
            field = re.split(r"\s+(?:as|into|in)\s+", rest, maxsplit=1)
            steps.append(NarratedStep("type", field[1].replace("\x01", "") if len(field) > 1 else "", typed.strip()))
        else:
            target = re.sub(r"\b(in|at|under)\s+(the\s+)?[\w ]*$", "", rest.replace("\x01", "")).strip() \
                if action != "confirm" else ""
            target = re.sub(r"'s\b", "", target or rest.replace("\x01", "")).strip()
            target = re.sub(r"(?<!\w)\+(?!\w)", "add new", target)  # "the + button" is an add/new button
            steps.append(NarratedStep(action, target, toggle=toggle))
        previous = action if action != "confirm" else "click"
    narrated = len(steps) >= 2 or opened_app or any(step.action == "type" for step in steps)
    return steps if narrated else []


def _names_app(rest: str, app_words: set[str]) -> bool:
    """True when every word left names the app ("ShopMart" for com.sim.shop), nothing inside it."""
    words = {w.lower() for w in re.findall(r"\w+", rest)} - NOISE
    return bool(words) and all(any(w.startswith(name) or name.startswith(w) for name in app_words) for w in words)
