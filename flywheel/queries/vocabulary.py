"""The fixed vocabularies a query is labelled with (report §2.2.2–§2.2.4).

Tiers and their eleven subclasses say how the user speaks, the eight personas who speaks, and the
six capability dimensions how hard the task is. They are plain data so that the query format's
JSON Schema, the import, generation, the gates and the review page all read the same lists.
"""

TIER_SUBCLASSES = {
    "L1": {
        "plain_narration": "Plain narration: the exact path, step by step",
        "colloquial_steps": "Colloquial steps: the same path in casual words",
    },
    "L2": {
        "function_statement": "Function statement: names the function",
        "purpose_statement": "Purpose statement: says why, implying the function",
        "dependent_operation": "Dependent operation: A, then B that depends on it",
        "parallel_operation": "Parallel operation: A and, while at it, B",
        "conditional_operation": "Conditional operation: check, and if so act",
        "state_constraint": "State / spatio-temporal constraint",
    },
    "L3": {
        "incomplete_instruction": "Incomplete instruction: the goal only hinted at",
        "intent_inference": "Intent inference: no functional words at all",
        "colloquial_self_correction": "Colloquial noise / self-correction mid-sentence",
    },
}
SUBCLASS_TIER = {sub: tier for tier, subs in TIER_SUBCLASSES.items() for sub in subs}
SUBCLASSES = tuple(SUBCLASS_TIER)

# Persona → (label, style filter in the report's words: Table 1).
PERSONAS = {
    "novice": ("Average user / novice", "Plain speech"),
    "gen_z_student": ("College student / Gen Z", "Internet slang"),
    "programmer": ("Programmer", "Terse and direct"),
    "business_professional": ("Business professional", "Formal and precise"),
    "senior_citizen": ("Senior citizen", "Rambling / anxious"),
    "delivery_rider": ("Delivery rider", "Urgent and clipped"),
    "travel_blogger": ("Travel blogger", "Enthusiastic and lively"),
    "stay_at_home_parent": ("Stay-at-home parent", "Gentle, multitasking"),
}

# The first three raise decision difficulty within one point; the last three stretch the task
# across pages and apps (§2.2.4).
CAPABILITIES = {
    "multi_constraint_filtering": "Multi-constraint filtering",
    "numerical_reasoning": "Numerical reasoning & calculation",
    "conditional_logic": "Conditional logic",
    "cross_page_state_tracking": "Cross-page state tracking",
    "looping": "Looping & iterative execution",
    "information_synthesis": "Information synthesis",
}
STRUCTURAL_CAPABILITIES = ("cross_page_state_tracking", "looping", "information_synthesis")

# Cross-app relations that GEM grounds (§2.2.5): relay (A's output is B's input), contrast
# (the same need in two apps, compared) and parallel (independent work in two apps).
CROSS_APP_RELATIONS = ("relay", "contrast", "parallel")


def subclass_choices():
    return [(sub, f"{SUBCLASS_TIER[sub]} · {label}") for tier in TIER_SUBCLASSES
            for sub, label in TIER_SUBCLASSES[tier].items()]


def persona_choices():
    return [(key, label) for key, (label, _style) in PERSONAS.items()]


def capability_choices():
    return list(CAPABILITIES.items())


def vocabulary_errors(tier: str, subclass: str, persona: str, capabilities) -> list[str]:
    """What is wrong with a query's labels ([] when they are all from the vocabularies).
    Empty subclass and persona are allowed (a hand-written query need not say)."""
    errors = []
    if subclass:
        if subclass not in SUBCLASS_TIER:
            errors.append(f"unknown subclass {subclass!r}")
        elif tier and SUBCLASS_TIER[subclass] != tier:
            errors.append(f"subclass {subclass!r} belongs to {SUBCLASS_TIER[subclass]}, not {tier}")
    if persona and persona not in PERSONAS:
        errors.append(f"unknown persona {persona!r}")
    for capability in capabilities or []:
        if capability not in CAPABILITIES:
            errors.append(f"unknown capability {capability!r}")
    return errors
