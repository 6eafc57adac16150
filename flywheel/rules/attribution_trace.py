"""What the cascaded failure attribution (§2.5.1) reads of a trajectory, as plain records.

The service (flywheel/repair/attribution.py) builds a Trace from the database: every step's
screen (uiautomator XML), its executed action and reasoning, the anomaly injected before it, a
page fingerprint, the query's milestones that hold on it and the GEM distance to the target page.
The rules (attribution_environment.py, attribution_model.py, attribution.py) are pure functions of
a Trace, so each of the report's cases is a test with screens and actions written out. What the
pixels show comes in as data too: the OCR words of a step's frame (SeenWord, in screen pixels) and
whether its dump is blind, both read by the service (the rules read no image).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from devices.uitree import UiNode, all_nodes, node_at, parse_hierarchy
from flywheel.rules.stops import agent_ending

CLEAR, FOUND = "clear", "found"
NEUTRAL_ACTIONS = ("swipe", "wait", "take_notes")     # looking around: never a wrong step on their own
_QUOTED = re.compile(r"[\"“”']([^\"“”']{1,80})[\"“”']")


@dataclass(frozen=True)
class StepFacts:
    index: int
    hierarchy: str = ""                 # the screen the action was taken on ('' unknown or unreadable)
    action: dict | None = None          # the executed action, in pixels; None: nothing was executed
    cot: dict = field(default_factory=dict)
    package: str = ""
    anomaly: dict | None = None         # the anomaly record injected before this step was observed
    page: str = ""                      # page fingerprint ('' unknown)
    milestones: tuple = ()              # indices of the query's milestones that hold on this screen
    gem_distance: int | None = None     # GEM edges from this screen's page to the target page
    screenshot: bool = True             # a screenshot was stored
    answer: str = ""                    # the answer a clarify at this step got ('' none)
    words: tuple | None = None          # SeenWord: the OCR words of its frame (None: not read)
    blind: bool = False                 # the dump cannot be read (web view, canvas): only pixels tell


@dataclass(frozen=True)
class SeenWord:
    """One word OCR read on a step's frame, its box in screen pixels (as the action's points)."""

    text: str
    bounds: tuple                       # (x1, y1, x2, y2)


@dataclass(frozen=True)
class TaskSpec:
    text: str = ""
    tier: str = ""
    verification: dict = field(default_factory=dict)
    known_path: dict | None = None
    capabilities: tuple = ()

    @property
    def milestones(self) -> list:
        return list((self.verification or {}).get("milestones") or [])

    @property
    def terminal(self) -> list:
        return list((self.verification or {}).get("terminal") or [])

    @property
    def handoff(self) -> str:
        return str((self.verification or {}).get("handoff") or "")

    @property
    def path_steps(self) -> list:
        return [s for s in ((self.known_path or {}).get("steps") or []) if isinstance(s, dict)]


@dataclass(frozen=True)
class VoteFacts:
    system: str
    vote: str
    rationale: str = ""
    details: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Trace:
    steps: tuple = ()                   # StepFacts, in index order
    spec: TaskSpec = field(default_factory=TaskSpec)
    stop_kind: str = ""                 # a StopKind ('' not stopped, or unknown)
    stop_reason: str = ""               # the words a person reads of it
    votes: tuple = ()                   # VoteFacts, the latest vote of each system
    verdict: str = ""
    adjudication: str = ""              # a person's latest decision: correct | wrong | environment | ''
    safety: str = ""                    # the safety violation that vetoed it ('' none)

    @property
    def acting(self) -> list:
        return [s for s in self.steps if s.action]

    def vote(self, system: str) -> VoteFacts | None:
        return next((v for v in self.votes if v.system == system), None)


@dataclass
class Finding:
    """One level's conclusion. Level 3 (and Level 1 with a known step) also locate the failure."""

    level: int
    conclusion: str = CLEAR
    cause: str = ""
    detail: str = ""
    steps: list = field(default_factory=list)
    check: str = ""
    features: dict = field(default_factory=dict)
    first_bad_step: int | None = None
    good_prefix: int = 0
    wrong_steps: int = 0
    correctable: bool = False
    interruption_known: bool = False

    @property
    def found(self) -> bool:
        return self.conclusion == FOUND

    def evidence(self) -> dict:
        record = {"level": self.level, "conclusion": self.conclusion, "cause": self.cause,
                  "detail": self.detail, "steps": sorted(set(self.steps))}
        if self.check:
            record["check"] = self.check
        return record


# -- endings -------------------------------------------------------------------------------------

def last_action(trace: Trace) -> dict:
    acting = trace.acting
    return acting[-1].action if acting else {}


def ending(trace: Trace) -> str:
    """How the agent ended (Table 3, as System C reads it): success, failure, handoff,
    premature_success (declared done where the user was to take over) or none."""
    return agent_ending(last_action(trace), trace.spec.handoff)


def good_prefix_before(trace: Trace, index: int | None) -> int:
    """Executed steps before step `index` (the golden prefix's length)."""
    if index is None:
        return 0
    return sum(1 for s in trace.acting if s.index < index)


# -- screens -------------------------------------------------------------------------------------

def roots_of(step: StepFacts) -> list[UiNode]:
    return parse_hierarchy(step.hierarchy) if step.hierarchy else []


def screen_words(step: StepFacts) -> str:
    return " \n".join(f"{n.text} {n.desc}" for n in all_nodes(roots_of(step))).lower()


def hit_node(step: StepFacts) -> UiNode | None:
    """The element the step's pointed action touched (None: no point, no dump, nothing there)."""
    point = (step.action or {}).get("point")
    if not (isinstance(point, (list, tuple)) and len(point) == 2):
        return None
    return node_at(roots_of(step), int(point[0]), int(point[1]))


def root_of(roots: list[UiNode], node: UiNode) -> int | None:
    """The index of the window (top-level node) the node belongs to."""
    for position, root in enumerate(roots):
        if any(n is node for n in root.walk()):
            return position
    return None


def decision_label(cot: dict) -> str:
    """The element the [Decision] names in quotes ('' when it names none)."""
    found = _QUOTED.findall(str((cot or {}).get("Decision") or ""))
    return found[0].strip() if found else ""


def _contains_words(text: str, piece: str) -> bool:
    return bool(piece) and re.search(rf"(?<![\w]){re.escape(piece)}(?![\w])", text) is not None


def label_matches(node: UiNode, label: str) -> bool:
    """The node shows the label, word for word (a row shows its title)."""
    wanted = " ".join(label.lower().split())
    text = " ".join(node.all_text().lower().split())
    return bool(wanted) and (wanted == text or _contains_words(text, wanted))


def selector_nodes(roots: list[UiNode], selector: dict) -> list[UiNode]:
    """Elements a known-path target or a milestone names (text, text_contains, resource_id,
    content_desc; `index` picks the n-th match)."""
    tests = {"text": lambda n, v: n.text == v,
             "text_contains": lambda n, v: str(v).lower() in n.text.lower(),
             "resource_id": lambda n, v: n.resource_id == v,
             "content_desc": lambda n, v: n.desc == v}
    used = [key for key in tests if key in (selector or {})]
    if not used:
        return []
    found = [n for n in all_nodes(roots) if all(tests[key](n, selector[key]) for key in used)]
    index = selector.get("index")
    if isinstance(index, int):
        return found[index:index + 1] if 0 <= index < len(found) else []
    return found


def clickable_ancestor_hit(roots: list[UiNode], targets: list[UiNode], point) -> bool:
    """Whether a touch at `point` lands on one of the targets: inside its bounds, or on the
    clickable element that holds it (a row whose title the target is)."""
    if not targets or not (isinstance(point, (list, tuple)) and len(point) == 2):
        return False
    x, y = int(point[0]), int(point[1])
    if any(t.contains(x, y) for t in targets):
        return True
    hit = node_at(roots, x, y)
    if hit is None or not (hit.clickable or hit.long_clickable):
        return False
    return any(n is t for n in hit.walk() for t in targets)


# -- pixels --------------------------------------------------------------------------------------

def _token(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", text.lower().replace("’", "'"))


def words_showing(words, label: str) -> list[tuple]:
    """The boxes (x1, y1, x2, y2) where the label's words appear on the frame, in order and next to
    each other (OCR reading order), the punctuation and case aside."""
    wanted = [t for t in (_token(w) for w in label.split()) if t]
    seen = [(t, w.bounds) for w in words or () if (t := _token(w.text))]
    found = []
    for i in range(len(seen) - len(wanted) + 1):
        if wanted and [t for t, _ in seen[i:i + len(wanted)]] == wanted:
            boxes = [b for _, b in seen[i:i + len(wanted)]]
            found.append((min(b[0] for b in boxes), min(b[1] for b in boxes),
                          max(b[2] for b in boxes), max(b[3] for b in boxes)))
    return found


def distance_to(box: tuple, x: int, y: int) -> float:
    x1, y1, x2, y2 = box
    return math.dist((x, y), (min(max(x, x1), x2), min(max(y, y1), y2)))


def words_near(words, x: int, y: int, radius: float) -> str:
    """The words within `radius` px of a point, nearest first (at most five)."""
    close = sorted((distance_to(w.bounds, x, y), w.text) for w in words or ())
    return " ".join(text for d, text in close[:5] if d <= radius)
