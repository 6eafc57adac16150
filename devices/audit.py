"""The safety audit (report §3.3.1): every action on every line passes it before it reaches a phone.

It blocks actions that would confirm a payment, expose private data or do something irreversible,
judged from the action AND the current screen: the element the action would hit (the smallest
clickable node under its point; for `type` without a point, the focused field), that element's
text / content-desc / resource-id, and the whole page's text. `open` is judged once its app is
resolved: its element is the app (label and package). The rules are data
(devices.models.SafetyRule, seeded by migration 0003, edited in the admin).

Every input is audited as it is sent, on the screen as it is then (devices/gate.py), including
each tap and key a composite action makes.

`audit()` is a pure function over (action, hierarchy XML, rules); `audit_and_record()` loads the
enabled rules and records a block as an AuditEvent.

A typed-text pattern that starts with "@" names a built-in detector that a regex cannot express:
@card_number (Luhn-valid 13-19 digit numbers), @id_number (ID numbers with valid check digits),
@otp (one-time codes), @credential (a password or secret written out).

An element pattern "@act:<act>" (purchase, transfer, delete, reset) matches when the meaning judge
(devices/act_meaning.py) finds that touching the element does that act: by the element's words in
any language, its icon or resource-id, and for a generic "OK" by what the screen is about. The
rules that use it are seeded by migration 0007.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from functools import lru_cache

from devices.act_meaning import judge
from devices.actions import SCREEN_ACTIONS
from devices.sensitive_text import DETECTORS
from devices.uitree import focused_node, node_at, page_text, parse_hierarchy

logger = logging.getLogger(__name__)

# Leaving a screen must always be possible, or a blocked agent could not walk away from danger.
ESCAPE_BUTTONS = ("back", "home", "recents")
PASSWORD_MARK = "[password field]"
ACT_PATTERN = "@act:"
# What the meaning judge looks at: touches of an element (typing into a field buys nothing).
MEANING_ACTIONS = ("click", "double_click", "long_press", "swipe", "drag")


@dataclass
class AuditRule:
    """A rule as the pure audit sees it; SafetyRule instances have the same attributes."""

    name: str
    category: str
    reason: str
    action_types: list = field(default_factory=list)
    element_patterns: list = field(default_factory=list)
    page_patterns: list = field(default_factory=list)
    typed_text_patterns: list = field(default_factory=list)
    enabled: bool = True


@dataclass
class AuditDecision:
    allowed: bool
    reason: str = ""
    rule: object = None          # the rule that blocked (AuditRule or SafetyRule)
    element: dict | None = None  # what the action would have hit

    @property
    def blocked(self) -> bool:
        return not self.allowed

    @property
    def rule_name(self) -> str:
        return getattr(self.rule, "name", "")


# -- the pure audit ------------------------------------------------------------------------------

@lru_cache(maxsize=512)
def _compiled(pattern: str):
    try:
        return re.compile(pattern, re.IGNORECASE | re.MULTILINE)
    except re.error:
        logger.warning("safety rule pattern %r is not a valid regex; matching it literally", pattern)
        return re.compile(re.escape(pattern), re.IGNORECASE | re.MULTILINE)


def _matches(pattern: str, text: str) -> bool:
    if pattern in DETECTORS:
        return DETECTORS[pattern](text)
    return bool(_compiled(pattern).search(text))


def target_element(action: dict, roots):
    """The node an action would act on, or None (keys, open, take_notes...)."""
    name = action.get("action")
    point = action.get("point") or action.get("start")
    if name == "type" and not action.get("point"):
        return focused_node(roots)
    if name == "system_button":
        return focused_node(roots) if action.get("button") == "enter" else None
    if point and name in SCREEN_ACTIONS:
        return node_at(roots, int(point[0]), int(point[1]))
    return None


def element_text(node) -> str:
    """What element patterns look at, one item per line (so ^...$ anchors a whole label): a
    clickable element's texts and content-descs (with its children's, as a row's title and
    summary), its resource-id, and a mark for password fields."""
    if node is None:
        return ""
    nodes = node.walk() if (node.clickable or node.long_clickable or node.focused) else [node]
    lines = [part for n in nodes for part in (n.text, n.desc) if part]
    lines.append(node.resource_id)
    if node.password:
        lines.append(PASSWORD_MARK)
    return "\n".join(line for line in lines if line)


def typed_text(action: dict) -> str | None:
    if action.get("action") in ("type", "take_notes"):
        return action.get("text") or ""
    if action.get("action") == "set_scroll_widget":
        return action.get("value")
    return None


def _element_matches(pattern: str, element: str | None, act) -> bool:
    if pattern.startswith(ACT_PATTERN):
        return act is not None and act.act == pattern[len(ACT_PATTERN):].strip()
    return bool(element) and _matches(pattern, element)


def rule_applies(rule, action: dict, element: str | None, page: str, typed: str | None, act=None) -> bool:
    """A rule blocks when every condition it has holds (it needs at least one condition). `act`:
    the meaning judge's verdict on the element (an act_meaning.Verdict), for "@act:" patterns."""
    name = action.get("action")
    if not getattr(rule, "enabled", True):
        return False
    action_types = list(rule.action_types or [])
    if action_types and name not in action_types:
        return False
    if not action_types and name not in SCREEN_ACTIONS:
        return False
    conditions = 0
    if rule.element_patterns:
        conditions += 1
        if not any(_element_matches(p, element, act) for p in rule.element_patterns):
            return False
    if rule.page_patterns:
        conditions += 1
        if not all(_matches(p, page) for p in rule.page_patterns):
            return False
    if rule.typed_text_patterns:
        conditions += 1
        if not typed or not any(_matches(p, typed) for p in rule.typed_text_patterns):
            return False
    return conditions > 0


def audit(action: dict, hierarchy_xml: str, rules, extra_nodes=()) -> AuditDecision:
    """Judge one normalized (pixel) action against the screen it would act on. `extra_nodes`: what
    the dump does not show but the screen does (the words a web view draws, read from its pixels)."""
    if action.get("action") == "system_button" and action.get("button") in ESCAPE_BUTTONS:
        return AuditDecision(True)
    roots = [*parse_hierarchy(hierarchy_xml or ""), *extra_nodes]
    rules = list(rules)
    node = None
    if action.get("action") == "open":
        element, described = opened_app(action)
    else:
        node = target_element(action, roots)
        element, described = element_text(node), (node.describe() if node is not None else None)
    page = page_text(roots)
    typed = typed_text(action)
    act = None
    if action.get("action") in MEANING_ACTIONS and any(_judges_meaning(rule) for rule in rules):
        act = judge(node, page.splitlines())
    for rule in rules:
        if rule_applies(rule, action, element, page, typed, act):
            return AuditDecision(False, reason=block_reason(rule, act), rule=rule, element=described)
    return AuditDecision(True, element=described)


def _judges_meaning(rule) -> bool:
    return any(str(p).startswith(ACT_PATTERN) for p in rule.element_patterns or [])


def block_reason(rule, act) -> str:
    said = f" ({act.evidence})" if act is not None and _judges_meaning(rule) else ""
    return f"{rule.reason}{said} (safety rule '{rule.name}')"


def opened_app(action: dict) -> tuple[str, dict | None]:
    """What element patterns see of an `open`: the resolved app's label and package, one a line."""
    parts = [action.get("label") or "", action.get("package") or ""]
    if not any(parts):
        return "", None
    return "\n".join(part for part in parts if part), {"label": parts[0], "package": parts[1]}


# -- with the database ---------------------------------------------------------------------------

def enabled_rules() -> list:
    from devices.models import SafetyRule

    return list(SafetyRule.objects.filter(enabled=True))


def audit_and_record(action: dict, hierarchy_xml: str, *, phone=None, device=None, holder: str = "",
                     rules=None) -> AuditDecision:
    """audit() with the enabled rules of the database; a block is stored as an AuditEvent."""
    decision = audit(action, hierarchy_xml, enabled_rules() if rules is None else rules)
    if decision.blocked:
        record_block(action, decision, phone=phone, device=device, holder=holder)
    return decision


def record_block(action: dict, decision: AuditDecision, *, phone=None, device=None, holder: str = ""):
    """Store a blocked action as an AuditEvent (the rule is linked when it is a database rule)."""
    from devices.models import AuditEvent, Device, SafetyRule

    if device is None and phone is not None:
        device = Device.objects.filter(adb_server=phone.address, serial=phone.serial).first()
    return AuditEvent.objects.create(
        device=device, holder=holder or "", action=action,
        rule=decision.rule if isinstance(decision.rule, SafetyRule) else None,
        reason=decision.reason[:300], element=decision.element)
