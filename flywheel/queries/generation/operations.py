"""What a query asks to *do* at an action leaf (§2.2.1: leaves are target functions, and an action
leaf is a function done in place: a switch, a download, a send).

A query that only names the page an action lives on teaches a policy to walk there and stop; the
tasks people give a phone are operations: turn a switch on, write a message and send it, add the
thing to the cart. So an action leaf's query carries its operation: the known path goes on past the
page with the operation's own steps (type the text into the page's field, then tap the action; or
tap the switch), the text asks for it, and the draft verification checks its outcome on the final
screen (the typed text is shown; the switch is in the state asked for). A page that is a form (a
field and the button that commits it: Save, Create, Rename) is asked as filling it in the same way.
Everything comes from the explored page (GEM elements); nothing here knows an app.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from flywheel.queries.function_tree.labels import element_label, human_label

# Actions that commit what was typed into the page's field (a send, a save, a search...).
SUBMIT_WORDS = frozenset("""send save post add create search reply comment publish submit done apply update
go find share rename note translate confirm""".split())
# Fields by what they take; the first vocabulary whose word the field's hint has is used.
SEARCH_WORDS = frozenset("search find query look".split())
SEARCH_TEXTS = ("running shoes", "pizza", "jazz", "coffee beans", "headphones", "Lisbon", "yoga mat",
                "rain jacket", "sunset photos", "budget")
FREE_TEXTS = ("Running late, see you soon", "Buy milk and eggs", "Call the dentist", "Meeting moved to 3pm",
              "Happy birthday", "Thanks for lunch", "Pick up the package", "Back in ten minutes",
              "Gym at 7", "Book the train tickets", "Water the plants", "Lunch on Friday")
# Text a check can find in the raw UI dump as written: no characters the XML escapes.
XML_SAFE = re.compile(r"^[^&<>\"']+$")


@dataclass
class Operation:
    kind: str                       # "toggle" | "choose" (a radio) | "tap" | "type_submit"
    label: str                      # the action's name on the screen
    steps: list[dict]               # the known-path steps after the page is reached
    field: str = ""                 # type_submit: the field's name
    text: str = ""                  # type_submit: what is typed
    turn_on: bool | None = None     # toggle: the state asked for (None: the page did not say)
    check: dict | None = None       # the final screen's proof of it, for the draft verification

    def retyped(self, rng) -> Operation:
        """The same operation with another text from the field's vocabulary (each phrasing its own)."""
        if self.kind != "type_submit":
            return self
        pool = SEARCH_TEXTS if self.text in SEARCH_TEXTS else FREE_TEXTS
        text = rng.choice(pool)
        typed, tap = self.steps
        return replace(self, text=text, steps=[{**typed, "text": text}, tap],
                       check={"check": "screen", "contains": text})


def _target(element: dict) -> dict:
    selector = dict(element.get("selector") or {})
    if not selector and element.get("text"):
        selector = {"text": element["text"]}
    return selector


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[^\W\d_]+", text or "")}


def is_action_leaf(leaf) -> bool:
    """An action hangs under the page it is done on (at the root: the app's start page); a page
    node's page is one its parent's page leads to."""
    if leaf.parent_id:
        return leaf.parent.page_id == leaf.page_id
    return leaf.page.is_start or leaf.page.depth == 0


def action_element(page, label: str) -> dict | None:
    """The page's element an action leaf is named after (clickable or checkable, not a field)."""
    for element in page.elements or []:
        if ((element.get("clickable") or element.get("checkable")) and not element.get("editable")
                and element_label(element).lower() == (label or "").lower()):
            return element
    return None


def _field(page) -> dict | None:
    return next((e for e in page.elements or [] if e.get("editable") and e.get("enabled", True)), None)


def _state_check(target: dict, want: bool) -> dict | None:
    """A screen check that the element, or the switch among its row's children, is checked as asked.
    uiautomator writes `checkable` and `checked` side by side; a row's other children (its title) are
    leaves, skipped whole, so the state read is the row's own switch, never a neighbour's."""
    for key, attribute in (("resource_id", "resource-id"), ("content_desc", "content-desc"), ("text", "text")):
        value = target.get(key)
        if value and XML_SAFE.match(str(value)):
            state = "true" if want else "false"
            return {"check": "screen", "matches": (f'{attribute}="{re.escape(str(value))}"'
                                                   f'(?:[^>]*>(?:\\s*<node [^>]*/>)*?\\s*<node )?'
                                                   f'[^>]*checkable="true" checked="{state}"')}
    return None


def _field_name(field: dict) -> str:
    """What a person calls the field: its hint when that reads as a name, else "the text box"."""
    name = human_label(field.get("hint")) or element_label(field)
    return name if name and len(name.split()) <= 4 and re.fullmatch(r"[^\W\d_][\w ]*", name) else "the text box"


def _typed(page, submit: dict, label: str, rng) -> Operation | None:
    field = _field(page)
    if field is None:
        return None
    name = _field_name(field)
    pool = SEARCH_TEXTS if (_words(name) | _words(label)) & SEARCH_WORDS else FREE_TEXTS
    text = rng.choice(pool)
    typed = {"action": "type", "text": text, "target": _target(field)}
    return Operation("type_submit", label, [typed, {"action": "click", "target": _target(submit)}], field=name,
                     text=text, check={"check": "screen", "contains": text})


def form_operation(page, rng) -> Operation | None:
    """A page that is a form (a field and a button that commits it: Save, Create, Rename...) asked
    as filling it in: type a text, tap the button (which may well leave the page)."""
    for element in page.elements or []:
        label = element_label(element)
        if (element.get("clickable") and not element.get("editable") and not element.get("checkable")
                and _words(label) & SUBMIT_WORDS):
            return _typed(page, element, label, rng)
    return None


def leaf_operation(page, label: str, rng) -> Operation | None:
    """The operation of an action leaf on `page`, or None when the page does not show the action
    (a renamed node, a page explored without it)."""
    element = action_element(page, label)
    if element is None:
        return None
    target = _target(element)
    tap = {"action": "click", "target": target}
    if element.get("checkable"):
        checked = element.get("checked")
        radio = "radio" in str(element.get("check_class", "")).lower()
        turn_on = True if radio else None if checked is None else not checked  # a radio is only ever chosen
        check = _state_check(target, turn_on) if turn_on is not None else None
        return Operation("choose" if radio else "toggle", label, [tap], turn_on=turn_on, check=check)
    if _words(label) & SUBMIT_WORDS:
        typed = _typed(page, element, label, rng)
        if typed is not None:
            return typed
    return Operation("tap", label, [tap])


def operation_clause(op: Operation, rng) -> str:
    """The words that ask for the operation, in one of a few ways people say it."""
    if op.kind == "toggle":
        if op.turn_on is None:
            return rng.choice([f"switch {op.label}", f"flip the {op.label} switch"])
        state = "on" if op.turn_on else "off"
        return rng.choice([f"turn {op.label} {state}", f"switch {op.label} {state}", f"set {op.label} to {state}"])
    if op.kind == "choose":
        return rng.choice([f"select {op.label}", f"choose {op.label}", f"pick {op.label}"])
    if op.kind == "type_submit":
        return rng.choice([f'type "{op.text}" into {op.field} and tap {op.label}',
                           f'write "{op.text}" in {op.field}, then hit {op.label}',
                           f'enter "{op.text}" and {op.label.lower()} it'])
    return rng.choice([f"tap {op.label}", f"press {op.label}", f"hit {op.label} there"])
