"""High-frequency task data (Xiaomi-GUI-0 §3.1): for each in-scope function, "multiple functionally
equivalent trajectories spanning different entry points and intermediate pages".

Here a function's equivalent paths are GEM paths that end on the function's page (or on the page of
a node that is the same function reached another way, §2.2.1's reuse), each through its own entry
point: the page the route starts on and the first page it moves to. Two paths with one entry point
differ only deeper down and teach the same opening, so one path per entry point is kept: the
cheapest. Pure: the graph comes in as plain (edge id, source, target, cost) tuples.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

DEFAULT_MAX_STEPS = 12  # a detour longer than this is no route a person takes to the function


@dataclass(frozen=True)
class EntryPath:
    """One route to the function: `entry` is (start page, first page moved to; None when the start
    page is the function's page), `edges` the edge ids in order, `pages` the pages passed."""

    entry: tuple
    edges: tuple
    pages: tuple
    cost: float


def _adjacency(links) -> dict:
    """source → [(cost, edge id, target)]: the cheapest edge per (source, target), lowest id on a tie
    (two buttons to one page are one route, not two)."""
    best: dict = {}
    for edge_id, source, target, cost in links:
        if cost is None or source == target:
            continue
        key = (source, target)
        if key not in best or (cost, edge_id) < best[key][:2]:
            best[key] = (cost, edge_id, target)
    adjacency: dict = {}
    for (source, _target), item in best.items():
        adjacency.setdefault(source, []).append(item)
    for items in adjacency.values():
        items.sort(key=lambda item: (item[0], item[1]))
    return adjacency


def _cheapest_to(adjacency, start, targets, banned, max_steps):
    """(cost, edges, pages) of the cheapest path from `start` to any of `targets` that avoids
    `banned` and takes at most `max_steps` edges; None when there is none. Ties: fewer edges,
    then the lower edge ids, so the answer is the same on every run."""
    heap = [(0, 0, (), (start,))]
    settled = set()
    while heap:
        cost, steps, edges, pages = heapq.heappop(heap)
        node = pages[-1]
        if node in targets:
            return cost, edges, pages
        if node in settled:
            continue
        settled.add(node)
        if steps == max_steps:
            continue
        for step_cost, edge_id, nxt in adjacency.get(node, ()):
            if nxt in banned or nxt in settled or nxt in pages:
                continue
            heapq.heappush(heap, (cost + step_cost, steps + 1, edges + (edge_id,), pages + (nxt,)))
    return None


def equivalent_entry_paths(links, starts, targets, limit: int, max_steps: int = DEFAULT_MAX_STEPS) -> list[EntryPath]:
    """Up to `limit` functionally equivalent paths to the function, one per entry point, cheapest
    first (ties: fewer edges, then lower edge ids).

    links: (edge id, source page, target page, cost) of the usable edges (cost None: never taken);
    starts: the pages a route may start on (an app's start page after a launch);
    targets: the pages where the function is done (its page and its reuse nodes' pages).
    The rest of a path after its entry point never returns to its start page."""
    if limit <= 0:
        return []
    adjacency, targets = _adjacency(links), set(targets)
    found = []
    for start in sorted(set(starts), key=repr):
        if start in targets:
            found.append(EntryPath(entry=(start, None), edges=(), pages=(start,), cost=0))
            continue
        for step_cost, edge_id, first in adjacency.get(start, ()):
            rest = _cheapest_to(adjacency, first, targets, {start}, max_steps - 1)
            if rest is None:
                continue
            cost, edges, pages = rest
            found.append(EntryPath(entry=(start, first), edges=(edge_id, *edges), pages=(start, *pages),
                                   cost=step_cost + cost))
    found.sort(key=lambda path: (path.cost, len(path.edges), path.edges))
    return found[:limit]


def path_group_id(function_id) -> str:
    """The group a function's equivalent paths share: the mixture caps rows per group."""
    return f"hf-{function_id}"


def path_signature(edges) -> str:
    """A path's identity among its group (the same edges in the same order: the same path)."""
    return "-".join(str(edge) for edge in edges) or "start"
