"""Screen-understanding samples derived from one stored frame and its UI dump (BlueLM §3.1.1: screen
understanding keeps grounding from drifting; Xiaomi-GUI-0 §6.1: grounding samples teach the model to
find visible elements and their coordinates, functions and text). No database: a frame's PNG and its
hierarchy in, samples out; every answer is read off the dump or the next recorded step, never guessed.

    grounding  element_to_box    "the "Wi-Fi" item" -> its bounds
               element_to_point  "Tap the "Wi-Fi" item." -> the protocol's click at its centre
               point_to_element  a point -> the element a touch there hits (uitree.node_at)
    screen_qa  page_offers       what the page offers: its labelled tappable elements, in reading order
               toggle_state      the state of a switch or checkbox (its row's, as flywheel.screens.labels reads it)
               selected_item     which of a row of sibling tabs / items is the selected one
    captions   tap_effect        what tapping an element did where a trajectory tapped it: the next step's
                                 page (its app, activity, first texts), or the element's switch turned

Coordinates are the protocol's (thousandths of the screen, converted by the rule chat.target_action
applies to executed actions); an element whose centre would not map back inside it, or that is
partly off screen, covered, unlabelled or described like another element of the page, gives none.
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass

from PIL import Image

from devices.actions import ActionError, to_pixels
from devices.uitree import UiNode, node_at, parse_hierarchy
from flywheel.policies.protocol import DEFAULT_COORDS
from flywheel.screens.labels import label_of, toggle_state
from flywheel.screens.page_identity import KEYBOARD_PACKAGE_HINTS
from training.exports.chat import IMAGE_PLACEHOLDER, target_action
from training.rules.screen_corpora import CAPTIONS, GROUNDING, SCREEN_QA
from training.step_judge import anchor_key

SYSTEM_UI = "com.android.systemui"  # the status bar's clock and icons: never a page's content
# What a person calls an element, by its class (first match; "item" for layouts and the rest).
KINDS = (("Switch", "switch"), ("ToggleButton", "switch"), ("CheckBox", "checkbox"),
         ("RadioButton", "radio button"), ("EditText", "text field"), ("Button", "button"), ("Tab", "tab"),
         ("ImageView", "image"), ("TextView", "text"))
NEXT_PAGE_TEXTS = 3
# meta "step_source" of a corpus sample: no one chose an action, its answer is read off the records.
DERIVED = "derived"


@dataclass(frozen=True)
class ScreenSample:
    corpus: str
    task: str
    question: str      # after the image placeholder
    answer: str


# -- reading a page --------------------------------------------------------------------------------------

def screen_size(png: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(png)) as image:
        return image.size


def thousandths(point, png: bytes) -> list[int]:
    """A pixel point in the protocol's unit, by the export's own conversion of executed actions."""
    return target_action({"action": "click", "point": list(point), "coords": "pixel"}, png)["point"]


def element_kind(node: UiNode) -> str:
    return next((kind for marker, kind in KINDS if marker in node.cls), "item")


def describe(node: UiNode) -> str:
    label = " ".join(label_of(node).split())
    return f'the "{label}" {element_kind(node)}'


def _actionable(node: UiNode) -> bool:
    return node.clickable or node.long_clickable


def _content(node: UiNode) -> bool:
    package = node.package.lower()
    return not (node.package.startswith(SYSTEM_UI) or any(hint in package for hint in KEYBOARD_PACKAGE_HINTS))


def _on_screen(node: UiNode, screen: tuple[int, int]) -> bool:
    x1, y1, x2, y2 = node.bounds
    return node.area > 0 and x1 >= 0 and y1 >= 0 and x2 <= screen[0] and y2 <= screen[1]


def _reading_order(node: UiNode) -> tuple:
    x1, y1, x2, y2 = node.bounds
    return y1, x1, y2, x2


@dataclass
class Page:
    """A parsed frame: its elements that can be named (tappable with a label, or a text outside any
    tappable element), which of them are named uniquely, and the sibling groups."""

    roots: list
    screen: tuple[int, int]
    png: bytes
    tappable: list        # labelled tappable elements, reading order
    texts: list           # texts outside any tappable element, reading order
    unique: list          # the elements of both whose description no other element shares
    groups: list          # [[sibling tappable elements]] of two or more

    @classmethod
    def read(cls, png: bytes, hierarchy_xml: str) -> Page:
        roots, screen = parse_hierarchy(hierarchy_xml or ""), screen_size(png)
        tappable, texts, groups = [], [], []

        def visit(node: UiNode, inside_tappable: bool):
            shown = _content(node) and _on_screen(node, screen)
            if shown and _actionable(node) and node.all_text().strip():
                tappable.append(node)
            elif shown and not inside_tappable and not _actionable(node) and node.own_text().strip():
                texts.append(node)
            siblings = [child for child in node.children if _actionable(child) and child.all_text().strip()
                        and _content(child) and _on_screen(child, screen)]
            if len(siblings) >= 2:
                groups.append(siblings)
            for child in node.children:
                visit(child, inside_tappable or _actionable(node))

        for root in roots:
            visit(root, False)
        tappable.sort(key=_reading_order)
        texts.sort(key=_reading_order)
        named = [*tappable, *texts]
        counts = {}
        for node in named:
            counts[describe(node)] = counts.get(describe(node), 0) + 1
        unique = sorted((node for node in named if counts[describe(node)] == 1), key=_reading_order)
        return cls(roots, screen, png, tappable, texts, unique, groups)

    def hit(self, node: UiNode) -> list[int] | None:
        """The node's centre in thousandths when a touch there reaches the node itself, else None."""
        point = thousandths(node.center, self.png)
        try:
            x, y = to_pixels(point, DEFAULT_COORDS, *self.screen)
        except ActionError:
            return None
        return point if node.contains(x, y) and node_at(self.roots, x, y) is node else None


def _state(node: UiNode) -> str:
    state = toggle_state(node)
    return "" if state is None else (" (on)" if state else " (off)")


def _tool_call(action: dict) -> str:
    return "<tool_call>" + json.dumps(action, ensure_ascii=False) + "</tool_call>"  # protocol.format_output's


# -- the samples ---------------------------------------------------------------------------------------------

def page_samples(png: bytes, hierarchy_xml: str) -> list[ScreenSample]:
    """The grounding and screen-QA samples of one frame, in reading order of their elements."""
    page = Page.read(png, hierarchy_xml)
    return [*grounding_samples(page), *screen_qa_samples(page)]


def grounding_samples(page: Page) -> list[ScreenSample]:
    samples = []
    for node in page.unique:
        point = page.hit(node)
        if point is None:
            continue
        x1, y1 = thousandths(node.bounds[:2], page.png)
        x2, y2 = thousandths(node.bounds[2:], page.png)
        description = describe(node)
        samples.append(ScreenSample(
            GROUNDING, "element_to_box",
            f"Give the bounding box of {description} as [x1, y1, x2, y2] in thousandths of the screen.",
            json.dumps({"box": [x1, y1, x2, y2], "coords": DEFAULT_COORDS})))
        if _actionable(node):
            samples.append(ScreenSample(GROUNDING, "element_to_point", f"Tap {description}.",
                                        _tool_call({"action": "click", "point": point, "coords": DEFAULT_COORDS})))
        samples.append(ScreenSample(
            GROUNDING, "point_to_element",
            f"Which element is at [{point[0]}, {point[1]}] (thousandths of the screen)?", description + _state(node)))
    return samples


def screen_qa_samples(page: Page) -> list[ScreenSample]:
    samples = []
    offered = list(dict.fromkeys(describe(node) + _state(node) for node in page.tappable))
    if offered:
        samples.append(ScreenSample(SCREEN_QA, "page_offers", "What does this screen offer? List the elements "
                                    "you can tap, top to bottom.", "\n".join(f"- {item}" for item in offered)))
    unique = set(map(id, page.unique))
    for node in page.tappable:
        state = toggle_state(node)
        if state is not None and id(node) in unique:
            samples.append(ScreenSample(SCREEN_QA, "toggle_state", f"Is {describe(node)} on or off?",
                                        "on" if state else "off"))
    for group in page.groups:
        selected = [node for node in group if any(n.selected for n in node.walk())]
        labels = [" ".join(label_of(node).split()) for node in group]
        if len(selected) == 1 and len(set(labels)) == len(labels):
            choices = ", ".join(f'"{label}"' for label in labels)
            samples.append(ScreenSample(SCREEN_QA, "selected_item", f"Which of {choices} is selected?",
                                        f'"{" ".join(label_of(selected[0]).split())}"'))
    return samples


def tap_caption(png: bytes, hierarchy_xml: str, action: dict, next_xml: str, context: dict,
                next_context: dict) -> tuple[ScreenSample, UiNode] | None:
    """What the tap of `action` on this frame did, as the next recorded step shows it (None when the
    records do not say: not a tap, a tap on nothing nameable, no next dump, or no visible change).
    `context`, `next_context`: {"package", "activity"} of the two steps (chat.device_context)."""
    if not isinstance(action, dict) or action.get("action") != "click" or not next_xml:
        return None
    page = Page.read(png, hierarchy_xml)
    try:
        x, y = to_pixels(action.get("point"), action.get("coords") or "pixel", *page.screen)
    except ActionError:
        return None
    # The element hit; a bare switch (no label of its own) stands for the named row that holds it.
    hit = node_at(page.roots, x, y)
    holding = [n for n in page.unique if _actionable(n) and n.contains(x, y)]
    if hit is not None and not any(hit is n for n in holding) and toggle_state(hit) is not None:
        hit = min(holding, key=lambda n: n.area, default=None)
    if hit is None or not any(hit is n for n in holding):
        return None
    node = hit
    description = describe(node)
    after = _same_element(node, parse_hierarchy(next_xml))
    before_state, after_state = toggle_state(node), (toggle_state(after) if after is not None else None)
    if before_state is not None and after_state is not None and before_state != after_state:
        answer = f"It turns {description} {'on' if after_state else 'off'}."
    elif anchor_key(next_xml, "") == anchor_key(hierarchy_xml, ""):
        return None  # the next frame is the same screen: the records show no effect
    else:
        answer = "It leads to a screen"
        package, activity = next_context.get("package", ""), next_context.get("activity", "")
        if package and package != context.get("package", ""):
            answer += f" of {package}"
        if activity and activity != context.get("activity", ""):
            answer += f" ({activity})"
        shown = _first_texts(parse_hierarchy(next_xml))
        answer += (" that shows " + ", ".join(f'"{text}"' for text in shown) + ".") if shown else "."
    return ScreenSample(CAPTIONS, "tap_effect", f"What happens when you tap {description}?", answer), node


def _same_element(node: UiNode, roots: list) -> UiNode | None:
    for candidate in (n for root in roots for n in root.walk()):
        if (candidate.bounds, candidate.cls, candidate.resource_id) == (node.bounds, node.cls, node.resource_id) \
                and label_of(candidate) == label_of(node):
            return candidate
    return None


def _first_texts(roots: list) -> list[str]:
    nodes = sorted((n for root in roots for n in root.walk() if _content(n) and n.own_text().strip() and n.area),
                   key=_reading_order)
    return list(dict.fromkeys(" ".join(n.own_text().split())[:60] for n in nodes))[:NEXT_PAGE_TEXTS]


def corpus_record(sample: ScreenSample, image_path: str, meta: dict) -> dict:
    """One data.jsonl line: the frame and the question, the answer as the target, in the chat format
    of the trajectory samples. Its meta uses only keys those samples have (the corpus is its
    "source"): the HF json loader fixes the columns from the file's first 10 MB and refuses a later
    line with a key it has not seen."""
    return {"messages": [{"role": "user", "content": IMAGE_PLACEHOLDER + sample.question},
                         {"role": "assistant", "content": sample.answer}],
            "images": [image_path],
            "meta": {**meta, "source": sample.corpus, "step_source": DERIVED}}
