"""What the compact policy sees: the candidate actions of a screen and one feature row per candidate.

One definition for acting (flywheel/policies/compact.py) and for training (training/compact.py,
which reads the same goal, history text and hierarchy back out of a pool export), so a trained
head scores at run time exactly the features it was trained on.

A candidate is an action the screen offers: tap or long-press a clickable element, type a span of
the goal into an editable field, swipe up or down, press back, home or enter, open one of the task's
apps, hand back to the user (call_user), terminate. Its features: sentence-embedding similarities (the
packaged MiniLM) of the candidate to the goal, to each clause of the goal and to the last decision; word
overlaps with the goal and with what was done (the history's decisions); where the goal names it and
whether it comes next there; its kind and the last two kinds done; where it sits on the screen and what
state it is in; and, for the two ending candidates only, how much of the goal the history and the screen
account for, so a stop is earned from evidence. Nothing here reads a task file or a known path.
"""
from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from devices.uitree import UiNode, all_nodes, parse_hierarchy
from flywheel.screens.embedding import get_model
from flywheel.screens.labels import goal_names_app, toggle_state, wanted_toggle_state
from flywheel.screens.labels import stems as offline_stems

KINDS = ("tap", "long_press", "type", "swipe_up", "swipe_down", "back", "home", "enter", "open", "terminate",
         "call_user")
STOP_KINDS = ("terminate", "call_user")   # the candidates that end the episode
BUTTONS = {"back": "back", "home": "home", "enter": "enter"}  # the system buttons a candidate presses
SYSTEM_PACKAGES = ("com.android.systemui",)
LAUNCHER_HINT = "launcher"
FILLER = frozenset("""open app tap click turn set go find show use want please make sure then into using called
named see check get let put change switch enable disable setting choose select press long stay the a an and to
in on of for my me it is be with from that this at by as or""".split())
# What the user must decide (the protocol hands over before payments, logins, CAPTCHAs).
HANDOFF_WORDS = frozenset("pay payment password login captcha purchase".split())
SUBMIT_WORDS = frozenset("""save send submit apply confirm done create post checkout show result search pay
place order claim subscribe connect pair return""".split())
# Words a goal uses about the interface, never as the text to enter.
UI_WORDS = frozenset("""type title write enter search message note notes text field button box name add send save
delete create post comment share open tap""".split())
KIND_TEXT = {"swipe_up": "scroll down to see more", "swipe_down": "scroll back up", "back": "go back",
             "home": "go to the home screen", "enter": "press enter to submit", "terminate": "the task is done",
             "call_user": "hand control back to the user to decide"}
_QUOTED = re.compile(r"(?<!\w)[\"“‘']([^\"“”‘’]{1,80}?)[\"”’'](?!\w)")
_AFTER = re.compile(r"\b(?:called|titled|named|type|write|message|comment|saying|says|as)\s+"
                    r"([A-Za-z0-9][\w .@'-]{0,60}?)(?=[,.;!?]|\s+(?:and|as|to|in|on|then|for|with)\b|$)")
_PROPER = re.compile(r"\b(?:[A-Z0-9][\w'-]*)(?:[ ,]+(?:[A-Z0-9][\w'-]*))*")
_HISTORY_ACTION = re.compile(r"<tool_call>(.*?)</tool_call>")
_CHUNKS = re.compile(r"[,.;:!?—–]|\band\b|\bthen\b", re.I)
_PUNCTUATION = re.compile(r"[^\w\s]")
_DECISION = re.compile(r"\[Decision\] (.*?) \[Memory\]")
MAX_SPANS = 14
MAX_TAPS = 60


@dataclass
class Candidate:
    kind: str
    label: str                     # what the element says (or the app / span), for the reasoning text
    action: dict                   # the protocol action, points in thousandths
    node: UiNode | None = None
    span: str = ""                 # the goal text a type candidate enters
    app: str = ""

    @property
    def text(self) -> str:
        """What is embedded for this candidate."""
        if self.kind == "tap":
            return f"tap {self.label}"
        if self.kind == "long_press":
            return f"long press {self.label}"
        if self.kind == "type":
            return f"type {self.span} into {self.label}"
        if self.kind == "open":
            return f"open {self.label or app_words(self.app)}"  # the app's name, as a goal says it
        return KIND_TEXT[self.kind]


def stems(text: str) -> set[str]:
    """The offline policy's content words (crudely singular), less the words every goal uses."""
    return offline_stems(text) - FILLER


def app_words(package: str) -> str:
    return " ".join(part for part in re.split(r"[._]", package) if part not in ("com", "android", "sim", "apps", "google"))


def goal_spans(goal: str) -> list[str]:
    """Text the goal asks to enter: quoted spans, what follows "called"/"titled"/…, names and numbers."""
    spans = [m.group(1).strip() for m in _QUOTED.finditer(goal)]
    spans += [m.group(1).strip() for m in _AFTER.finditer(goal)]
    for match in _PROPER.finditer(goal):
        text = match.group(0).strip(" ,")
        if match.start() == 0 or goal[:match.start()].rstrip().endswith((".", "!", "?", ":", "—")):
            text = text.split(" ", 1)[1].strip(" ,") if " " in text else ""  # a sentence's first word
        if text and len(text) > 1:
            spans.append(text)
            if "," in text:
                spans += [part.strip() for part in text.split(",") if part.strip()]
    spans += re.findall(r"\b\d[\d\s-]{3,}\d\b", goal)
    spans += [w for w in re.findall(r"[A-Za-z][\w'-]{3,}", goal)  # a single word: what a search box takes
              if w.lower() not in FILLER and w.lower() not in UI_WORDS]
    seen = OrderedDict()
    for span in (span.strip(" ,'\"“”‘’") for span in spans):
        if span and span.lower() not in FILLER and span.split(" ", 1)[0].lower() not in ("the", "a", "an", "my"):
            seen.setdefault(span.lower(), span)
    return list(seen.values())[:MAX_SPANS]


def _thousandths(point, screen) -> list[int]:
    width, height = screen
    return [min(1000, max(0, round(point[0] * 1000 / max(width, 1)))),
            min(1000, max(0, round(point[1] * 1000 / max(height, 1))))]


def _label(node: UiNode) -> str:
    text = " ".join(node.all_text().split())[:80]
    if text:
        return text
    rid = node.resource_id.rsplit("/", 1)[-1].replace("_", " ")
    return rid or node.cls.rsplit(".", 1)[-1]


def _editable(node: UiNode) -> bool:
    return "EditText" in node.cls


def candidates(hierarchy_xml: str, screen: tuple[int, int], goal: str, apps: list[str],
               extra_nodes: list[UiNode] = (), roots: list[UiNode] | None = None,
               app_labels: dict[str, str] | None = None) -> list[Candidate]:
    """`extra_nodes`: elements the dump lacks (flywheel.screens.ocr_candidates' lines read from the
    frame of a blind page), offered after the dump's own and featurized the same way. `roots`: the
    dump already parsed (featurize parses it once for the candidates and the screen's words)."""
    roots = parse_hierarchy(hierarchy_xml) if roots is None else roots
    found, seen = [], set()
    for node in [*all_nodes(roots), *extra_nodes]:
        if node.package in SYSTEM_PACKAGES or not node.area or not node.enabled:
            continue
        if not (node.clickable or _editable(node)):
            continue
        center = node.center
        if center in seen or not (0 <= center[0] < screen[0] and 0 <= center[1] < screen[1]):
            continue
        seen.add(center)
        point = _thousandths(center, screen)
        found.append(Candidate("tap", _label(node), {"action": "click", "point": point, "coords": "thousandths"},
                               node=node))
        if node.long_clickable and not _editable(node):
            found.append(Candidate("long_press", _label(node), {"action": "long_press", "point": point,
                                                                "coords": "thousandths"}, node=node))
        if _editable(node):
            for span in goal_spans(goal):
                found.append(Candidate("type", _label(node), {"action": "type", "text": span, "point": point,
                                                              "coords": "thousandths"}, node=node, span=span))
        if len(found) >= MAX_TAPS:
            break
    found.append(Candidate("swipe_up", "", {"action": "swipe", "direction": "up"}))
    found.append(Candidate("swipe_down", "", {"action": "swipe", "direction": "down"}))
    for kind, button in BUTTONS.items():
        found.append(Candidate(kind, "", {"action": "system_button", "button": button}))
    for app in dict.fromkeys(apps or []):
        label = (app_labels or {}).get(app) or app_words(app)
        found.append(Candidate("open", label, {"action": "open", "app": app}, app=app))
    found.append(Candidate("call_user", "", {"action": "call_user",
                                             "reason": "This step is the user's to decide"}))
    found.append(Candidate("terminate", "", {"action": "terminate", "status": "success"}))
    return found


# -- the prompt text both sides read -----------------------------------------------------------------

def prompt_parts(user_text: str) -> tuple[str, str, str]:
    """(goal, history text, foreground package) out of the protocol's user message text."""
    goal = re.search(r"^Goal: (.*?)\n\nHistory:\n", user_text, re.S)
    history = re.search(r"\n\nHistory:\n(.*?)(?:\n\nDevice: |\n\nThe last |\Z)", user_text, re.S)
    package = re.search(r"\n\nDevice: package=([^,\n]*)", user_text)
    return (goal.group(1) if goal else "", history.group(1) if history else "",
            package.group(1).strip() if package else "")


def history_actions(history_text: str) -> list[dict]:
    actions = []
    for raw in _HISTORY_ACTION.findall(history_text or ""):
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict):
            actions.append(value)
    return actions


def action_kind(action: dict) -> str:
    name = action.get("action")
    if name in ("click", "double_click"):
        return "tap"
    if name == "swipe":
        return "swipe_down" if action.get("direction") == "down" else "swipe_up"
    if name == "system_button":
        return {button: kind for kind, button in BUTTONS.items()}.get(action.get("button"), "")
    return name if name in KINDS else ""


# -- embeddings ---------------------------------------------------------------------------------------

class EmbeddingCache:
    """MiniLM sentence embeddings by text, computed once per text per process."""

    def __init__(self, size: int = 50_000):
        self.size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            vectors = get_model().encode(missing)
            with self._lock:
                for text, vector in zip(missing, vectors):
                    self._vectors[text] = vector
                while len(self._vectors) > self.size:
                    self._vectors.popitem(last=False)
        with self._lock:
            return np.stack([self._vectors[t] for t in texts]).astype(np.float32)


EMBED = EmbeddingCache()
# The first 64 columns are the layout heads were trained on before the stop evidence (their kind
# one-hots cover the first ten kinds); what came later is appended, so such a head still reads its own.
V1_SCALARS, V1_KINDS = 64, KINDS[:10]
SCALARS = 80


def _tapped_before(node: UiNode, past: list[dict]) -> int:
    """How many earlier taps (pixel points, as executed) landed inside this element's bounds."""
    hits = 0
    for action in past:
        point = action.get("point")
        if action.get("action") in ("click", "long_press") and isinstance(point, list) and len(point) == 2:
            hits += node.contains(int(point[0]), int(point[1])) if action.get("coords", "pixel") == "pixel" else 0
    return hits


def featurize(goal: str, history_text: str, hierarchy_xml: str, screen: tuple[int, int], apps: list[str],
              package: str, embed=EMBED, extra_nodes: list[UiNode] = (),
              app_labels: dict[str, str] | None = None) -> tuple[list[Candidate], np.ndarray]:
    """The screen's candidates and their feature rows (float32, [len(candidates), SCALARS]).

    The sentence embeddings enter as similarities (candidate to goal, to each clause of the goal, to
    the last decision), not as raw vectors: with a few hundred training steps a head on the raw
    384-d products memorises its training goals; on queries it never saw (leave-query-out over a
    demo's pools) the similarities alone ranked the expert's action first as often or more
    (0.69 against 0.67)."""
    roots = parse_hierarchy(hierarchy_xml)
    found = candidates(hierarchy_xml, screen, goal, apps, extra_nodes, roots=roots, app_labels=app_labels)
    past = history_actions(history_text)
    # What was done, in words: each step's [Decision] and the text it typed. Not the other tags: a
    # plan may restate the whole goal, and an observation lists the screen, neither of which is done.
    done = _DECISION.findall(history_text or "") + [str(a.get("text") or "") for a in past
                                                     if a.get("action") == "type"]
    last_step = _DECISION.findall(history_text or "")[-1:] or ["nothing done yet"]
    chunks = [c.strip() for c in _CHUNKS.split(goal) if len(c.strip()) > 2][:8] or [goal]
    vectors = embed([goal, last_step[0], *chunks, *[c.text for c in found]])
    goal_vec, last_vec = vectors[0], vectors[1]
    chunk_vecs, cand = vectors[2:2 + len(chunks)], vectors[2 + len(chunks):]
    chunk_sims = (cand @ chunk_vecs.T).max(axis=1) if len(found) else np.zeros(0)
    history_lower = " | ".join(done).lower()
    goal_stems, history_stems = stems(goal), stems(history_lower)
    goal_lower = goal.lower()
    covered = len(goal_stems & history_stems) / max(1, len(goal_stems))
    last_kinds = [action_kind(a) for a in past[-2:]][::-1]   # the last step first
    repeated = float(len(past) >= 2 and past[-1] == past[-2])
    opened = {a.get("app") for a in past if a.get("action") == "open"}
    typed = [str(a.get("text") or "").lower() for a in past if a.get("action") == "type"]
    on_launcher = float(LAUNCHER_HINT in package)
    wants_on = wanted_toggle_state(goal)
    kinds = len(V1_KINDS)
    rows = np.zeros((len(found), SCALARS), dtype=np.float32)
    # Where each element is named in the goal, and which named, not yet used element comes first
    # there: a narrated goal ("tap A, then B") is done in its order.
    positions, untouched = [], []
    for c in found:
        label_stems = stems(c.label if c.kind != "type" else c.span) if c.kind in ("tap", "type", "long_press") else set()
        hits = [m.start() for m in (re.search(rf"\b{re.escape(w)}", goal_lower) for w in label_stems) if m]
        positions.append(min(hits) / max(1, len(goal_lower)) if hits else 1.0)
        fresh = bool(hits) and not (c.label and c.label.lower() in history_lower) and \
            not (c.node is not None and _tapped_before(c.node, past))
        untouched.append(len(hits) / max(1, len(label_stems)) if fresh else 0.0)
    first_fresh = min((p for p, u in zip(positions, untouched) if u > 0), default=None)
    # A form is finished by its submit button: one on screen and not pressed yet says "not done".
    submits = [c.kind == "tap" and bool(stems(c.label) & SUBMIT_WORDS) for c in found]
    submit_waiting = float(any(is_submit and found[i].label.lower() not in history_lower
                               for i, is_submit in enumerate(submits)))
    last_submitted = float(bool(stems(last_step[0]) & SUBMIT_WORDS))
    best_fresh, strong_fresh = max(untouched, default=0.0), sum(u >= 0.5 for u in untouched)
    evidence = stop_evidence(goal, chunks, done, typed, screen_text(roots, extra_nodes), len(past))
    evidence += [submit_waiting, best_fresh, min(strong_fresh, 5) / 5, repeated, last_submitted]
    for i, c in enumerate(found):
        label_stems = stems(c.label if c.kind != "type" else c.span)
        overlap = len(label_stems & goal_stems)
        node = c.node
        values = [
            float(cand[i] @ goal_vec), float(cand[i] @ last_vec),
            overlap / max(1, len(label_stems)), overlap / max(1, len(goal_stems)),
            float(bool(c.label) and c.label.lower() in goal_lower),
            float(bool(c.label) and c.label.lower() in history_lower),
            len(label_stems & history_stems) / max(1, len(label_stems)),
            min(len(past), 20) / 10, covered, repeated, on_launcher,
            min(_tapped_before(node, past), 3) / 3 if node is not None else 0.0,
            float(chunk_sims[i]), positions[i], untouched[i],
            float(first_fresh is not None and untouched[i] > 0 and positions[i] == first_fresh),
            best_fresh, min(strong_fresh, 5) / 5, float(submits[i]), submit_waiting, last_submitted,
        ]
        if node is not None:
            x, y = node.center
            toggle = toggle_state(node)
            values += [x / max(screen[0], 1), y / max(screen[1], 1),
                       min(1.0, node.area / max(screen[0] * screen[1], 1) * 10),
                       (1.0 if toggle != wants_on else -1.0) if toggle is not None and wants_on is not None else 0.0,
                       float(node.focused or _editable(node))]
        else:
            values += [0.0] * 5
        span = c.span.lower()
        values += [float(c.kind == "type" and span in history_lower),
                   float(c.kind == "type" and node is not None and span in node.all_text().lower()),
                   float(c.kind == "type" and span in typed),
                   float(c.kind == "open" and c.app == package), float(c.kind == "open" and c.app in opened),
                   float(c.kind == "open" and goal_names_app(goal, c.app, c.label))]
        row = rows[i]
        row[:len(values)] = values
        base = len(values)                      # 32, then the kind and the last two kinds, one-hot
        if c.kind in V1_KINDS:
            row[base + V1_KINDS.index(c.kind)] = 1.0
        for k, kind in enumerate(last_kinds):
            if kind in V1_KINDS:
                row[base + kinds * (k + 1) + V1_KINDS.index(kind)] = 1.0
        # A stop is earned: only the ending candidates carry how much of the goal is done.
        row[V1_SCALARS] = float(c.kind == "call_user")
        if c.kind in STOP_KINDS:
            row[V1_SCALARS + 1:V1_SCALARS + 1 + len(evidence)] = evidence
    return found, rows


def screen_text(roots: list[UiNode], extra_nodes: list[UiNode] = ()) -> str:
    """Every word the screen shows (the parsed dump's text and descriptions, and what OCR read of a blind page)."""
    return " ".join([*(root.all_text() for root in roots),
                     *(node.all_text() for node in extra_nodes)])


def stop_evidence(goal: str, chunks: list[str], done: list[str], typed: list[str], shown: str,
                  steps: int) -> list[float]:
    """How much of the goal the history and the screen account for: the share of the goal's clauses
    whose content words (at least half) were done or are shown, and done alone; the share of the text
    it asks to enter that was typed or is shown; the share of its words on screen; the steps taken per
    clause; no step yet; a screen and a goal that speak of what the user must decide (a payment)."""
    def words(text: str) -> set[str]:  # quotes and punctuation apart: 'Groceries' is Groceries
        return stems(_PUNCTUATION.sub(" ", text))

    done_stems, shown_stems, goal_stems = words(" ".join(done)), words(shown), words(goal)
    clauses = [found for found in (words(chunk) for chunk in chunks) if found]

    def accounted(words: set[str], by: set[str]) -> bool:
        return len(words & by) * 2 >= len(words)

    spans = [span.lower() for span in goal_spans(goal)]
    entered, shown_lower = " | ".join(typed + [d.lower() for d in done]), shown.lower()
    return [
        sum(accounted(words, done_stems | shown_stems) for words in clauses) / max(1, len(clauses)),
        sum(accounted(words, done_stems) for words in clauses) / max(1, len(clauses)),
        sum(span in entered or span in shown_lower for span in spans) / max(1, len(spans)),
        len(goal_stems & shown_stems) / max(1, len(goal_stems)),
        min(steps / max(1, len(clauses)), 3.0) / 3, float(steps == 0),
        float(bool(shown_stems & HANDOFF_WORDS)), float(bool(goal_stems & HANDOFF_WORDS)),
    ]


# -- the training target ---------------------------------------------------------------------------------

def target_index(found: list[Candidate], action: dict, screen: tuple[int, int]) -> int | None:
    """Which candidate an executed (thousandths) action is, or None when the screen offers none like it."""
    kind = action_kind(action)
    if kind in ("tap", "long_press"):
        point = action.get("point")
        if not isinstance(point, list | tuple) or len(point) != 2:
            return None
        x, y = point[0] * screen[0] / 1000, point[1] * screen[1] / 1000
        inside = [(c.node.area, i) for i, c in enumerate(found)
                  if c.kind == kind and c.node is not None and c.node.contains(int(x), int(y))]
        return min(inside)[1] if inside else None
    if kind == "type":
        text = str(action.get("text") or "").strip().lower()
        typed = [i for i, c in enumerate(found) if c.kind == "type" and c.span.lower() == text]
        point = action.get("point")
        if typed and isinstance(point, list | tuple) and len(point) == 2:
            x, y = point[0] * screen[0] / 1000, point[1] * screen[1] / 1000
            hit = [i for i in typed if found[i].node.contains(int(x), int(y))]
            typed = hit or typed
        focused = [i for i in typed if found[i].node.focused]
        return (focused or typed or [None])[0]
    if kind == "open":
        return next((i for i, c in enumerate(found) if c.kind == "open" and c.app == action.get("app")), None)
    if kind == "terminate" and action.get("status", "success") != "success":
        return None
    return next((i for i, c in enumerate(found) if c.kind == kind), None) if kind else None
