"""A query's prerequisites as data the console acts on (§2.2.6 "prerequisites"; Xiaomi-GUI-0 §2.2:
accounts and device states prepared before a task). A prerequisite ("signed in to ShopMart", "a bank
card bound") is met by a setup recipe: an account the phone must hold (its readiness profile says
which; device-pull scheduling matches it) and a short sequence of known-path steps run, audited,
after the task's reset. A prerequisite no recipe meets leaves the task not executable, with the
reason: it is never a failure of the model.

Pure: which recipes meet which phrases, and what they ask of a phone.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

MAX_SETUP_STEPS = 12


@dataclass(frozen=True)
class Recipe:
    key: str
    phrases: tuple[str, ...]        # the prerequisites it meets, normalised
    account: str = ""               # a piece of an account the phone must hold, e.g. "com.google"
    apps: tuple[str, ...] = ()
    steps: tuple[dict, ...] = ()    # known-path steps (flywheel/queries/query_format: known_path.steps)

    @classmethod
    def from_row(cls, row: dict) -> Recipe:
        """A recipe as stored or written in a recipes file ({"key", "phrases", "account", "apps", "steps"})."""
        return cls(key=row["key"], phrases=tuple(normalise(p) for p in row.get("phrases") or []),
                   account=row.get("account") or "", apps=tuple(row.get("apps") or []),
                   steps=tuple(row.get("steps") or []))


def normalise(phrase: str) -> str:
    """Case, spacing and end punctuation do not make two prerequisites different."""
    return re.sub(r"\s+", " ", str(phrase or "")).strip().strip(".;,。；").strip().lower()


def resolve(prerequisites: list[str], recipes: list[Recipe]) -> tuple[list[Recipe], list[str]]:
    """(the recipes that meet them, in the query's order and once each; the phrases none meets)."""
    by_phrase = {phrase: recipe for recipe in recipes for phrase in recipe.phrases}
    met, unmet = [], []
    for prerequisite in prerequisites or []:
        recipe = by_phrase.get(normalise(prerequisite))
        if recipe is None:
            if normalise(prerequisite):
                unmet.append(str(prerequisite).strip())
        elif recipe not in met:
            met.append(recipe)
    return met, unmet


def phone_requirements(recipes: list[Recipe]) -> dict:
    """What the recipes ask of a phone: {"accounts": [...], "apps": [...]} (empty lists left out)."""
    accounts = sorted({recipe.account for recipe in recipes if recipe.account})
    apps = sorted({app for recipe in recipes for app in recipe.apps})
    return {key: value for key, value in (("accounts", accounts), ("apps", apps)) if value}


def step_problems(steps) -> list[str]:
    """Why a recipe's steps cannot run (empty: they can): known-path steps that act, a handful."""
    if not isinstance(steps, list):
        return ["the steps are a list"]
    if len(steps) > MAX_SETUP_STEPS:
        return [f"at most {MAX_SETUP_STEPS} steps"]
    problems = []
    for number, step in enumerate(steps, 1):
        if not isinstance(step, dict) or step.get("action") not in ("open", "click", "type", "swipe", "system_button",
                                                                   "long_press", "wait"):
            problems.append(f"step {number}: an open, click, type, swipe, long_press, system_button or wait")
        elif step["action"] == "open" and not step.get("app"):
            problems.append(f"step {number}: an open names its app")
        elif step["action"] in ("click", "long_press") and not isinstance(step.get("target"), dict):
            problems.append(f"step {number}: a {step['action']} names its target (text, resource_id or content_desc)")
    return problems
