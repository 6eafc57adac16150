"""Setup recipes from a JSONL file (one recipe per line), all or nothing: `python manage.py
import_recipes FILE`, or `seed_console --recipes FILE` (make up passes the farm's own file).

    {"key": "shopmart-signed-in", "label": "Signed in to ShopMart", "phrases": ["signed in to ShopMart"],
     "account": "com.google", "apps": ["com.sim.shop"], "steps": [{"action": "open", "app": "com.sim.shop"}, ...]}

A recipe with a known key is replaced (its phrases, account, apps and steps).
"""
from __future__ import annotations

import json

from django.db import transaction

from flywheel.models import SetupRecipe
from flywheel.rules.prerequisites import normalise, step_problems

FIELDS = ("key", "label", "phrases", "account", "apps", "steps")


class RecipesInvalid(ValueError):
    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


def recipe_problems(row) -> list[str]:
    if not isinstance(row, dict):
        return ["a recipe is a JSON object"]
    problems = [f"unknown field {name!r}" for name in row if name not in FIELDS]
    if not isinstance(row.get("key"), str) or not row["key"].replace("-", "").replace("_", "").isalnum():
        problems.append("key: letters, digits, - and _")
    if not isinstance(row.get("label"), str) or not row["label"].strip():
        problems.append("label: a few words")
    phrases = row.get("phrases")
    if not isinstance(phrases, list) or not phrases or not all(isinstance(p, str) and normalise(p) for p in phrases):
        problems.append("phrases: the prerequisites it meets, a list of texts")
    if not isinstance(row.get("account", ""), str):
        problems.append("account: a text")
    if not isinstance(row.get("apps", []), list) or not all(isinstance(a, str) for a in row.get("apps", [])):
        problems.append("apps: a list of packages")
    problems += [f"steps: {problem}" for problem in step_problems(row.get("steps", []))]
    return problems


def parse_recipes(text: str) -> list[dict]:
    rows, problems = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            problems.append(f"line {number}: not JSON ({error.msg})")
            continue
        problems += [f"line {number}: {problem}" for problem in recipe_problems(row)]
        rows.append(row)
    taken: dict[str, str] = {}
    for row in rows:
        for phrase in row.get("phrases") or []:
            other = taken.setdefault(normalise(phrase), row.get("key"))
            if other != row.get("key"):
                problems.append(f"{row.get('key')}: the phrase {phrase!r} is met by {other} too")
    if problems:
        raise RecipesInvalid(problems)
    return rows


def import_recipes(text: str, keep_existing: bool = False) -> dict:
    """{"created", "updated"}; `keep_existing`: a recipe whose key is there already is left as it is
    (a harness seeding the farm's recipes never undoes a manager's edit)."""
    rows = parse_recipes(text)
    created = updated = 0
    with transaction.atomic():
        for row in rows:
            if keep_existing and SetupRecipe.objects.filter(key=row["key"]).exists():
                continue
            _, made = SetupRecipe.objects.update_or_create(key=row["key"], defaults={
                "label": row["label"].strip(), "phrases": [p.strip() for p in row["phrases"]],
                "account": row.get("account", "").strip(), "apps": row.get("apps", []), "steps": row.get("steps", [])})
            created += made
            updated += not made
    return {"created": created, "updated": updated}
