"""What every Teacher shares (flywheel/policies/teacher.py states the contract): the context of a
step to correct, the answer, the failure, what a Teacher may know of a query, the contexts built
from stored steps or a live state, and the pop-up dismissal. The offline and endpoint Teachers
import this; teacher.py picks one of them (teacher_for) and re-exports these names.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from devices.uitree import all_nodes, node_at, parse_hierarchy
from flywheel.blobs import read_blob
from flywheel.models import Edge
from flywheel.policies.base import PolicyError
from flywheel.policies.protocol import HistoryEntry
from flywheel.rules.repetition import same_action

DEFAULT_SCREEN = (1080, 2400)


@dataclass
class TeacherContext:
    goal: str
    history: list[HistoryEntry] = field(default_factory=list)     # the steps before N
    screenshot: bytes | None = None                                # step N's frame
    hierarchy_xml: str = ""                                        # step N's dump
    screen_size: tuple[int, int] = DEFAULT_SCREEN
    wrong_action: dict | None = None                               # what went wrong at step N
    foreground: dict = field(default_factory=dict)                 # package, activity, activity_stack
    apps: list[str] = field(default_factory=list)                  # the query's packages, first = start
    known_path: dict | None = None                                 # the query's known path
    gem_path: list[int] = field(default_factory=list)              # GEM edge ids of the known path
    target_pages: list[int] = field(default_factory=list)          # GemPage ids where the task ends
    step_index: int = 0
    history_hierarchies: list[str] = field(default_factory=list)   # dumps of the history's steps


@dataclass
class TeacherAnswer:
    action: dict                  # canonical action JSON (pixels on step N's screen for offline)
    cot: dict                     # the five tags
    confidence: float | None      # how sure the Teacher is, in [0, 1] (None: it cannot say)
    source: str                   # known_path | gem | goal | dismissal | endpoint model name
    rationale: str                # why this action, in words
    model_io: dict | None = None  # the endpoint exchange (image payloads as hashes)


class TeacherFailed(PolicyError):
    """The Teacher could not answer (endpoint timeout, garbage output); the exchange is kept."""

    def __init__(self, reason: str, model_io: dict | None = None):
        super().__init__(reason, model_io)
        self.reason = reason


def query_facts(query) -> dict:
    """What the Teacher may know of a query beyond its goal: known path, GEM path, target pages
    (the pages of its functions and the end of its GEM path)."""
    gem_path = [edge for edge in (query.gem_path or []) if isinstance(edge, int)]
    targets = []
    try:
        targets = list(query.functions.exclude(page=None).values_list("page_id", flat=True))
        if gem_path:
            end = Edge.objects.filter(pk=gem_path[-1]).values_list("target_id", flat=True).first()
            if end is not None:
                targets.append(end)
    except ValueError:  # an unsaved query has no relations yet
        pass
    return {"known_path": query.known_path or None, "gem_path": gem_path,
            "target_pages": list(dict.fromkeys(targets)), "apps": list(query.app_packages)}


# -- contexts ----------------------------------------------------------------------------------------

def _blob_text(field_file) -> str:
    if not field_file:
        return ""
    try:
        return read_blob(field_file.name).decode("utf-8", "replace")
    except OSError:
        return ""


def _blob_bytes(field_file) -> bytes:
    if not field_file:
        return b""
    try:
        return read_blob(field_file.name)
    except OSError:
        return b""


def _screen(step) -> tuple[int, int]:
    screen = (step.timings or {}).get("screen")
    try:
        width, height = int(screen[0]), int(screen[1])
    except (TypeError, ValueError, IndexError):
        return DEFAULT_SCREEN
    return (width, height) if width > 0 and height > 0 else DEFAULT_SCREEN


def _foreground(step) -> dict:
    package = step.foreground_package or ""
    stack = list(step.activity_stack or [])
    top = next((entry for entry in stack if isinstance(entry, str) and entry.startswith(package + "/")), "")
    return {"package": package, "activity": top.split("/", 1)[1] if top else "", "activity_stack": stack}


def context_for_step(trajectory, index: int) -> TeacherContext | None:
    """Step `index`'s context from the stored trajectory: its frame and dump, the executed steps
    before it as history, the action that went wrong there. None when the step or its frame is
    missing (the Teacher needs the screen it corrects on)."""
    step = trajectory.steps.filter(index=index).first()
    if step is None:
        return None
    screenshot = _blob_bytes(step.screenshot)
    if not screenshot:
        return None
    earlier = list(trajectory.steps.filter(index__lt=index, executed_action__isnull=False).order_by("index"))
    history = [HistoryEntry(cot=s.cot or {}, action=s.executed_action,
                            reply=str((s.edit or {}).get("clarify_answer") or "")) for s in earlier]
    query = trajectory.query
    return TeacherContext(
        goal=query.text, history=history, screenshot=screenshot, hierarchy_xml=_blob_text(step.hierarchy),
        screen_size=_screen(step), wrong_action=step.executed_action or step.proposed_action,
        foreground=_foreground(step), step_index=index,
        history_hierarchies=[_blob_text(s.hierarchy) for s in earlier], **query_facts(query))


def context_from_state(state, facts: dict | None = None, wrong_action: dict | None = None) -> TeacherContext:
    """A PolicyState (what a policy sees at a live step) as a Teacher's context."""
    facts = facts or {}
    return TeacherContext(
        goal=state.goal, history=list(state.history),
        screenshot=state.screenshots[-1] if state.screenshots else None, hierarchy_xml=state.hierarchy_xml,
        screen_size=tuple(state.screen_size), wrong_action=wrong_action, foreground=dict(state.foreground or {}),
        # The Teacher knows the query's apps; a goal-only policy's state carries the phone's.
        apps=list(facts.get("apps") or state.apps or []), known_path=state.known_path or facts.get("known_path"),
        gem_path=list(facts.get("gem_path") or []), target_pages=list(facts.get("target_pages") or []),
        step_index=len(state.history), history_hierarchies=list(facts.get("history_hierarchies") or []))


# -- comparing actions -------------------------------------------------------------------------------

TAPS = ("click", "double_click", "long_press")


def same_choice(a: dict | None, b: dict | None, hierarchy_xml: str = "") -> bool:
    """Do two actions do the same thing on this screen? Taps agree when they hit the same element
    (or land close together); everything else as rules.repetition.same_action, with type's point
    read the same way."""
    if not a or not b or a.get("action") != b.get("action"):
        return False
    if a.get("action") in TAPS + ("type",) and a.get("point") and b.get("point") and hierarchy_xml:
        roots = parse_hierarchy(hierarchy_xml)
        hit_a, hit_b = node_at(roots, *map(int, a["point"])), node_at(roots, *map(int, b["point"]))
        if hit_a is not None and hit_a is hit_b:
            return a.get("action") != "type" or a.get("text") == b.get("text")
    if a.get("action") == "open":
        return (a.get("app") or a.get("package")) in (b.get("app"), b.get("package"))
    return same_action(a, b)


# -- pop-ups -----------------------------------------------------------------------------------------

# The way out of a pop-up, best first: never the button that accepts its offer (Update now, Log in,
# Learn more, Turn on Battery Saver). A permission dialog is answered for this time only: the
# task may need the permission, and a denial derails it (rules/attribution_environment.py).
PERMISSION_WAY_OUT = ("only this time", "while using the app", "allow")
DISMISS_WORDS = ("not now", "later", "no thanks", "dismiss", "close", "cancel", "skip", "got it", "wait",
                 "ok", "close app", "don't allow", "deny")
DIALOG_MARKERS = ("parentpanel", "alerttitle", "buttonpanel", "dialog", "popup", "ad_close", "ad_label",
                  "permission_", "captcha", "aerr_")
PERMISSION_PACKAGES = ("permissioncontroller", "packageinstaller")


def _words(node) -> str:
    return " ".join((node.text or node.desc or "").lower().split())


def dismissal_action(hierarchy_xml: str) -> dict | None:
    """The tap that closes the dialog or pop-up on this screen (its Close / Cancel / Not now /
    Later / Dismiss button; a permission dialog's allow-once), or None when the screen shows no
    pop-up or the pop-up has no such button."""
    roots = parse_hierarchy(hierarchy_xml or "")
    nodes = list(all_nodes(roots))
    if not nodes:
        return None
    permission = any(any(p in n.package for p in PERMISSION_PACKAGES) for n in nodes)
    marked = permission or any(any(m in n.resource_id.lower() for m in DIALOG_MARKERS) for n in nodes) or any(
        n.desc.lower() == "advertisement" for n in nodes)
    buttons = [n for n in nodes if (n.clickable or n.long_clickable) and n.enabled and n.area]
    if not marked:  # a page with an icon-only Close is a pop-up too (a sheet, a splash ad)
        marked = any(n.desc.lower() in ("close", "dismiss") and not n.text for n in buttons)
    if not marked:
        return None
    ranking = (PERMISSION_WAY_OUT if permission else ()) + DISMISS_WORDS
    for wanted in ranking:
        for button in buttons:
            labels = {_words(button), " ".join(button.desc.lower().split()), " ".join(button.text.lower().split())}
            if wanted in labels:
                return {"action": "click", "point": list(button.center), "coords": "pixel"}
    return None
