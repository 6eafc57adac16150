"""What the demo's rounds train on: the query side's own output (§2.2), never the farm's task set.

The report's first principle is that queries evolve and cover the function tree. So the demo explores
the apps it trains on, builds their function trees from what it saw (GEM), generates queries for
every leaf in several tier subclasses and personas (intake gates 1–3), and takes every gate-passed one
as it stands (nobody reviews an unattended demo; the approval names the demo). Round 1 collects the
generated queries on the schema-guided line (GEM paths as known paths); the loop rounds roll out on an
RL pool banked from the same generated queries, goal alone. The farm's hand-written tasks are all
held out: the evaluation material.

Functions never trained on are held out by whole apps: a seeded share of the evaluation set's apps is
never explored, generated for or collected on, so a task that touches one of them asks for functions
(tree nodes) no round saw. Every other task asks for trained functions in words no round saw.
"""
from __future__ import annotations

import hashlib
from collections import defaultdict

from annotation.review import approve, version_of
from flywheel.models import App, GenerationRun, Query
from flywheel.queries.exploration.runs import launch_exploration
from flywheel.queries.function_tree.builder import build_tree_from_gem
from flywheel.queries.gates import index_function_nodes
from flywheel.queries.generation.runs import generate_now


def held_out_apps(packages: list[str], count: int, seed: int) -> list[str]:
    """The apps whose functions no round trains on: `count` of them, a seeded and stable choice;
    at least one app is always left to train on."""
    ranked = sorted(dict.fromkeys(packages), key=lambda p: hashlib.sha256(f"{seed}:{p}".encode()).hexdigest())
    return sorted(ranked[:max(0, min(count, len(ranked) - 1))])


def start_exploration(packages: list[str], config: dict, user=None):
    return launch_exploration(packages, {"max_seconds": config["explore_seconds"], "phones": config["phones"]},
                              user=user if getattr(user, "pk", None) else None)


def generate_training_queries(packages: list[str], config: dict) -> GenerationRun:
    """Function trees from the explored pages, then one generation run over their leaves; every
    gate-passed query is approved (as the query review would: status ready, its draft checks confirmed)."""
    for app in App.objects.filter(package__in=packages):
        build_tree_from_gem(app)
    index_function_nodes(packages)
    run = generate_now({"apps": packages, "per_leaf": config["phrasings"], "cross_app": config["cross_app"],
                        "seed": config["seed"]})
    passed = Query.objects.filter(generation_run=run, status=Query.Status.REVIEW)
    approve({query.pk: version_of(query) for query in passed}, None)  # reviewed_by stays empty: nobody did
    return run


def spread_over_leaves(run: GenerationRun, limit: int) -> list[str]:
    """Up to `limit` of the run's approved queries, round-robin over the function-tree leaves they
    exercise (every leaf's first phrasing before any leaf's second), in key order within a leaf."""
    by_leaf = defaultdict(list)
    ready = Query.objects.filter(generation_run=run, status=Query.Status.READY).prefetch_related("function_links")
    for query in ready.order_by("key"):
        leaf = next((link.function_id for link in query.function_links.all()), None)
        by_leaf[leaf].append(query.key)
    keys, depth = [], 0
    while len(keys) < limit and any(len(group) > depth for group in by_leaf.values()):
        keys += [group[depth] for _leaf, group in sorted(by_leaf.items(), key=lambda kv: str(kv[0]))
                 if len(group) > depth]
        depth += 1
    return keys[:limit]
