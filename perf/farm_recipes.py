"""The farm's setup recipes for harnesses that drive a phone outside the console's runs: a task's
prerequisites ("signed in to ShopMart") are met after its reset exactly as the engine meets them
(flywheel/collection/prerequisites.meet), with the recipes of simfarm/setup_recipes.jsonl.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

RECIPES = Path(__file__).resolve().parent.parent / "simfarm" / "setup_recipes.jsonl"


@lru_cache(maxsize=1)
def farm_recipes() -> tuple:
    from flywheel.queries.recipes import parse_recipes
    from flywheel.rules.prerequisites import Recipe

    return tuple(Recipe.from_row(row) for row in parse_recipes(RECIPES.read_text(encoding="utf-8")))


def set_up(phone, task: dict, rules=None) -> tuple[str, list[dict]]:
    """(why the task cannot run here, '' when its prerequisites hold; the actions the recipes ran),
    on a phone its reset has just restored. `rules`: the safety rules the executor audits with, as the
    harness's own actions are (None: the enabled rules in the database)."""
    from devices.executor import ActionExecutor
    from flywheel.collection.prerequisites import meet

    if not task.get("prerequisites"):
        return "", []
    record, stop = meet(task["prerequisites"], list(farm_recipes()), phone,
                        ActionExecutor(phone, holder="harness-setup", rules=rules))
    actions = [done["action"] for recipe in record["recipes"] for done in recipe["actions"]]
    return (stop.detail if stop else ""), actions
