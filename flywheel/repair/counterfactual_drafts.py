"""Adversarial query drafts for a recurring failure class (§2.5.2 counterfactual derivation).

Each draft targets the class's gap with a template in the report's spirit: "all three conditions
are mandatory" for multi-constraint filtering, "remember it on the first page, compare it on the
later one" for cross-page forgetting, "tap exactly X, not the neighbour" for perception drift.
Every slot is filled from real screens: the GEM's explored pages and their function-tree leaves
(the same LeafContext query generation uses), or, when the GEM does not know the apps, the
failing trajectories' own apps and the texts of the screens they failed on. Nothing here knows
an app.
"""
from __future__ import annotations

import random
import re

from devices.uitree import all_nodes, parse_hierarchy
from flywheel.queries.drafts import QueryDraft
from flywheel.queries.generation.grammar import apply_persona
from flywheel.queries.generation.planner import (
    CHROME,
    FILTER_CLASS,
    NUMBER,
    TOGGLE_CLASS,
    LeafContext,
    known_path,
)
from flywheel.queries.verification_drafts import draft_verification
from flywheel.queries.vocabulary import CAPABILITIES, PERSONAS, SUBCLASS_TIER
from flywheel.rules.ecdm import CONSTRAINT_VIOLATION, PERCEPTION_DRIFT, STATE_TRACKING

COUNT_WORDS = {2: "both", 3: "all three", 4: "all four"}

# The missing interaction intuition each gap stands for (the induced feature the Teacher targets).
MISSING_INTUITION = {
    "multi_constraint_filtering": "every stated condition is mandatory: apply all of them before settling on a result",
    "numerical_reasoning": "read the exact numbers on screen and work the answer out before replying",
    "conditional_logic": "check the condition on screen first, then act only on the branch it selects",
    "cross_page_state_tracking": "keep what an earlier page showed in memory across page transitions and use it later",
    "looping": "repeat the operation for every item asked, keeping count, without skipping or stopping early",
    "information_synthesis": "gather every piece asked for before composing the answer",
    PERCEPTION_DRIFT: "locate the exact element named, not a neighbour or a look-alike, before tapping",
    STATE_TRACKING: "know which page you are on after each transition instead of repeating actions that change nothing",
    CONSTRAINT_VIOLATION: "follow every restriction written in the task, not only its main goal",
}


def missing_intuition(cause: str, capability: str) -> str:
    return MISSING_INTUITION.get(capability) or MISSING_INTUITION.get(cause) or \
        "finish what the task asks and confirm it is on screen before declaring success"


# --- the adversarial templates: (subclass, capability claimed, text) or None without material ----

def all_conditions_mandatory(ctx, rng):
    if len(ctx.filters) < 2:
        return None
    chosen = ctx.filters[:3] if len(ctx.filters) <= 3 else rng.sample(ctx.filters, 3)
    conditions = ", ".join(chosen[:-1]) + " and " + chosen[-1]
    return ("state_constraint", "multi_constraint_filtering",
            f"In {ctx.app_label}, go to {ctx.label} and set {conditions}: {COUNT_WORDS[len(chosen)]} conditions are "
            f"mandatory, so don't stop until every one of them holds.")


def remember_and_compare(ctx, rng):
    later = ctx.numbers[-1:] or ctx.items
    if not ctx.path_texts or not later:
        return None
    earlier, other = rng.choice(ctx.path_texts), rng.choice(later)
    return ("dependent_operation", "cross_page_state_tracking",
            f"On the way to {ctx.title} in {ctx.app_label}, remember {earlier}; once you're there, compare it with "
            f"{other} and tell me which comes out ahead, without going back to look again.")


def exact_numbers(ctx, rng):
    if len(ctx.numbers) < 2:
        return None
    a, b = rng.sample(ctx.numbers, 2)
    return ("dependent_operation", "numerical_reasoning",
            f"Open {ctx.label} in {ctx.app_label}, find {a} and {b}, and tell me which is higher and by exactly "
            f"how much.")


def only_if(ctx, rng):
    if ctx.toggles:
        toggle = rng.choice(ctx.toggles)
        return ("conditional_operation", "conditional_logic",
                f"Open {ctx.label} in {ctx.app_label}: only if {toggle} is on, turn it off; if it's already off, "
                f"change nothing and tell me so.")
    if ctx.items:
        item = rng.choice(ctx.items)
        return ("conditional_operation", "conditional_logic",
                f"Open {ctx.label} in {ctx.app_label}; if {item} is there, open it, otherwise tell me it's "
                f"missing, and don't open anything else.")
    return None


def every_entry(ctx, rng):
    if len(ctx.items) < 2:
        return None
    chosen = ctx.items[:3]
    return ("dependent_operation", "looping",
            f"On {ctx.title} in {ctx.app_label}, open {', '.join(chosen[:-1])} and {chosen[-1]} one after another, "
            f"coming back each time, and don't skip any of them.")


def leave_nothing_out(ctx, rng):
    if len(ctx.items) < 2:
        return None
    a, b = rng.sample(ctx.items, 2)
    return ("parallel_operation", "information_synthesis",
            f"Read {a} and {b} on {ctx.title} in {ctx.app_label} and put both into one short summary for me, "
            f"leaving neither out.")


def exact_element(ctx, rng):
    if len(ctx.items) < 2:
        return None
    target, neighbour = rng.sample(ctx.items[:4], 2)
    return ("dependent_operation", "",
            f"In {ctx.app_label}, open {ctx.label} and tap exactly {target}, not {neighbour} next to it.")


def really_there(ctx, rng):
    return ("function_statement", "",
            f"Open {ctx.label} in {ctx.app_label} and only say you're done once {ctx.title} is really on screen.")


BY_CAPABILITY = {
    "multi_constraint_filtering": [all_conditions_mandatory],
    "numerical_reasoning": [exact_numbers],
    "conditional_logic": [only_if],
    "cross_page_state_tracking": [remember_and_compare],
    "looping": [every_entry],
    "information_synthesis": [leave_nothing_out],
}
BY_CAUSE = {
    PERCEPTION_DRIFT: [exact_element, only_if],
    STATE_TRACKING: [remember_and_compare, every_entry],
    CONSTRAINT_VIOLATION: [all_conditions_mandatory, only_if, exact_numbers],
}


def builders_for(cause: str, capability: str) -> list:
    """The templates that target this class, most specific first; `really_there` last."""
    chosen = list(BY_CAPABILITY.get(capability, [])) + [b for b in BY_CAUSE.get(cause, [])
                                                        if b not in BY_CAPABILITY.get(capability, [])]
    return chosen + [really_there]


# --- grounding without a GEM: the failing trajectories' own screens ------------------------------

def screen_texts(xml: str) -> list[str]:
    texts = []
    for node in all_nodes(parse_hierarchy(xml or "")):
        for text in (node.text, node.desc):
            text = (text or "").strip()
            if text and text not in texts:
                texts.append(text)
    return texts


def _classed(xml: str, pattern) -> list[str]:
    found = []
    for node in all_nodes(parse_hierarchy(xml or "")):
        label = (node.text or node.desc or "").strip()
        if label and pattern.search(node.cls or "") and label not in found:
            found.append(label)
    return found[:6]


def _content(texts, exclude) -> list[str]:
    return [t for t in texts if 2 < len(t) <= 60 and t not in exclude and t.lower() not in CHROME
            and not NUMBER.fullmatch(t)][:8]


def screen_context(package: str, app_label: str, label: str, failing_xml: str, earlier_xml: list[str],
                   activity: str = "") -> LeafContext | None:
    """A LeafContext from recorded screens: the screen the failure happened on and the ones before."""
    texts = screen_texts(failing_xml)
    if not texts:
        return None
    title = next((t for t in texts if t.lower() not in CHROME and 1 < len(t) <= 60), texts[0])
    ctx = LeafContext(leaf_id=None, package=package, app_label=app_label, label=label or title, page_id=0,
                      title=title, activity=activity)
    exclude = {title, ctx.label, app_label}
    ctx.items = _content(texts, exclude)
    ctx.filters = _classed(failing_xml, FILTER_CLASS)
    ctx.toggles = _classed(failing_xml, TOGGLE_CLASS)
    numbers = []
    for xml in [failing_xml, *earlier_xml]:
        for text in screen_texts(xml):
            numbers += [n for n in NUMBER.findall(text) if n not in numbers]
    ctx.numbers = numbers[:6]
    seen_later = set(texts)
    ctx.path_texts = [t for xml in earlier_xml for t in _content(screen_texts(xml), exclude | seen_later)][:5]
    ctx.milestone_titles = [title]
    return ctx


# --- drafts ------------------------------------------------------------------------------------------

def protected_labels(ctx) -> list[str]:
    return [ctx.label, ctx.app_label, ctx.title, *ctx.items, *ctx.filters, *ctx.toggles, *ctx.path_texts,
            *ctx.numbers, *ctx.other_labels, *(obj for _verb, obj in ctx.narration)]


def draft_for(ctx, builder, persona: str, rng, grounding: dict) -> QueryDraft | None:
    """One adversarial draft on one context, or None when the page lacks the template's material.
    `grounding`: source_trajectory, source_attribution, failure_class (key), functions (no-GEM)."""
    made = builder(ctx, rng)
    if made is None:
        return None
    subclass, capability, template_text = made
    text = apply_persona(template_text, persona, rng, protected_labels(ctx))
    tier = SUBCLASS_TIER[subclass]
    functions = [ctx.leaf_id] if ctx.leaf_id else list(grounding.get("functions") or [])
    steps = (known_path(ctx) or {}).get("steps") or []
    return QueryDraft(
        text=text, apps=[ctx.package], tier=tier, subclass=subclass, persona=persona,
        capabilities=[capability] if capability in CAPABILITIES else [], functions=functions,
        gem_path=list(ctx.edge_ids or []), known_path=known_path(ctx),
        verification=draft_verification(ctx.package, ctx.activity, ctx.title, ctx.milestone_titles),
        labels={"ambiguity": tier, "step_depth": max(0, len(steps) - 1), "persona_style": PERSONAS[persona][1],
                "leaf": ctx.label, "target_page": ctx.title, "adversarial": builder.__name__,
                "template_text": template_text,
                "failure_class": grounding.get("failure_class", ""),
                "grounded_in": "gem" if ctx.page_id else "trajectory screens",
                "source_trajectory": grounding.get("source_trajectory"),
                "source_attribution": grounding.get("source_attribution")})


def plan_adversarial(contexts: list[tuple[LeafContext, dict]], cause: str, capability: str, count: int,
                     seed: str) -> list[QueryDraft]:
    """Up to `count` drafts over (context, grounding) pairs, taken in order (the most relevant
    first): the class's targeted templates over every context (twice: another random choice of
    slots may make another sentence), personas in turn; the generic "really there" template only when no context has
    material for a targeted one. Texts are never repeated."""
    rng = random.Random(seed)
    builders = builders_for(cause, capability)
    personas = list(PERSONAS)
    drafts, texts = [], set()

    def add(builder, ctx, grounding):
        draft = draft_for(ctx, builder, personas[len(drafts) % len(personas)], rng, grounding)
        # Two personas over the same sentence are one query: the template's own text is compared.
        key = re.sub(r"\W+", " ", draft.labels["template_text"].lower()) if draft else ""
        if draft is not None and key not in texts:
            texts.add(key)
            drafts.append(draft)

    for _pass in range(2):
        for builder in builders[:-1]:
            for ctx, grounding in contexts:
                if len(drafts) >= count:
                    return drafts
                add(builder, ctx, grounding)
    if not drafts:
        for ctx, grounding in contexts[:count]:
            add(builders[-1], ctx, grounding)
    return drafts[:count]
