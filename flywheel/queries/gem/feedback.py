"""Env_ERROR feedback into the Global Environment Memory (§2.2.5, closed loop with the ECDM).

An Env_ERROR trajectory whose query follows a GEM path marks the edge it broke on temporarily
unreachable (GEM_EDGE_COOLDOWN_S). Path queries (graph.py) leave such an edge out, so generation
stops using it; queries waiting in review or ready whose path uses it get an alternative path
between the same pages, or are held in review when there is none. Beat re-checks the edge on a
phone once its cool-down has passed (recheck.py) and restores it, and the held queries with it.
"""
from __future__ import annotations

import logging
from datetime import timedelta

import networkx as nx
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.utils import timezone

from flywheel.models import Edge, GemPage, Outcome, Query, Trajectory
from flywheel.queries.gem import graph as gem
from flywheel.screens.page_identity import fingerprint, match_page, thresholds_for

log = logging.getLogger(__name__)
MAX_COOLDOWN_S = 24 * 3600
OPEN_STATUSES = (Query.Status.REVIEW, Query.Status.READY)
HOLD_PREFIX = "GEM edge #"


def on_trajectory_routed(sender, trajectory_id, outcome, reason="", **kwargs):
    """trajectory_routed receiver: an Env_ERROR on a GEM path breaks the edge it stopped on.
    Never lets a GEM problem disturb routing: it is logged instead."""
    if outcome != Outcome.ENV_ERROR:
        return
    try:
        mark_trajectory_edge(trajectory_id, reason)
    except Exception:
        log.exception("GEM feedback for trajectory %s failed", trajectory_id)


def cooldown_for(failures: int) -> timedelta:
    """The first break waits GEM_EDGE_COOLDOWN_S; every further failure doubles it, up to a day."""
    seconds = int(settings.GEM_EDGE_COOLDOWN_S) * 2 ** max(0, failures - 1)
    return timedelta(seconds=min(seconds, MAX_COOLDOWN_S))


# -- which edge broke ----------------------------------------------------------------------------

def mark_trajectory_edge(trajectory_id, reason: str = "") -> Edge | None:
    """Find the edge of the query's GEM path the trajectory broke on and mark it unreachable."""
    trajectory = Trajectory.objects.select_related("query").get(pk=trajectory_id)
    wanted = [eid for eid in trajectory.query.gem_path or [] if isinstance(eid, int)]
    existing = set(Edge.objects.filter(id__in=wanted).values_list("id", flat=True))
    path = [eid for eid in wanted if eid in existing]
    if not path:
        return None
    found = broken_edge(trajectory, path)
    if found is None:
        log.info("trajectory %s: Env_ERROR before any step; no GEM edge to blame", trajectory_id)
        return None
    edge_id, how = found
    detail = reason or trajectory.stop_reason or "environment error"
    return mark_unreachable(edge_id, f"Env_ERROR in trajectory #{trajectory_id} ({how}): {detail}")


def broken_edge(trajectory: Trajectory, path: list[int]) -> tuple[int, str] | None:
    """(edge id, how it was found) for the step where the trajectory stopped: the first step an
    anomaly was injected before, else the last step. Its screen matched to a page of the path
    names the edge leaving that page; else, when the known path was being followed, the number of
    path actions done before it; else the path's last edge. None when there are no steps."""
    steps = list(trajectory.steps.order_by("index"))
    if not steps:
        return None
    breaking = next((step for step in steps if step.anomaly), steps[-1])
    done = [step.executed_action for step in steps if step.index < breaking.index and step.executed_action]
    position = _path_position(done, path) if trajectory.query.known_path or trajectory.line == "schema" else None
    page_id = _page_of_step(breaking, path)
    if page_id is not None:
        sources = dict(Edge.objects.filter(id__in=path).values_list("id", "source_id"))
        leaving = [i for i, eid in enumerate(path) if sources.get(eid) == page_id]
        if leaving:
            after = [i for i in leaving if position is None or i >= position]
            return path[(after or leaving)[0]], f"screen of step {breaking.index} is page #{page_id}"
    if position is not None:
        return path[min(position, len(path) - 1)], f"step {breaking.index} after {position} path actions"
    return path[-1], "last edge of the path"


def _path_position(done_actions: list[dict], path: list[int]) -> int:
    """How many of the path's actions the executed actions got through (extra scrolls, waits and
    the opening launch do not advance it, as the offline policy follows a known path)."""
    names = [step.get("action") for step in gem.known_path_steps(path)]
    position = 0
    for action in done_actions:
        if position < len(names) and action.get("action") == names[position]:
            position += 1
    return position


def _page_of_step(step, path: list[int]) -> int | None:
    """The page of the path (a source of one of its edges) the step's screen shows, if any."""
    if not step.screenshot or not step.hierarchy:
        return None
    try:
        with default_storage.open(step.screenshot.name, "rb") as handle:
            png = handle.read()
        with default_storage.open(step.hierarchy.name, "rb") as handle:
            xml = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    seen = fingerprint(png, xml)
    sources = Edge.objects.filter(id__in=path).values_list("source_id", flat=True)
    pages = [page for page in GemPage.objects.filter(id__in=sources).select_related("app")
             if page.layout_signature or page.phash]
    if not pages:
        return None
    page = match_page(seen, pages, thresholds_for(pages[0].app))
    return page.pk if page else None


# -- marking and restoring -----------------------------------------------------------------------

def mark_unreachable(edge_id: int, reason: str, now=None) -> Edge:
    """Take the edge out of path queries for its cool-down and reroute or hold the queries on it."""
    now = now or timezone.now()
    with transaction.atomic():
        edge = Edge.objects.select_for_update().get(pk=edge_id)
        edge.failures += 1
        edge.reachable = False
        edge.unreachable_until = now + cooldown_for(edge.failures)
        edge.unreachable_reason = reason[:2000]
        edge.save(update_fields=["failures", "reachable", "unreachable_until", "unreachable_reason"])
        result = reroute_queries(edge)
        transaction.on_commit(gem.invalidate)
    log.info("GEM edge %s unreachable until %s: %s (rerouted %s, held %s)", edge.pk, edge.unreachable_until,
             reason, result["rerouted"], result["held"])
    return edge


def restore_edge(edge: Edge, now=None) -> dict:
    """The edge works again: back in path queries; queries held for it go back where they were."""
    now = now or timezone.now()
    with transaction.atomic():
        Edge.objects.filter(pk=edge.pk).update(reachable=True, unreachable_until=None, unreachable_reason="",
                                               last_checked_at=now)
        edge.reachable, edge.unreachable_until, edge.unreachable_reason = True, None, ""
        edge.last_checked_at = now
        result = restore_queries(edge)
        transaction.on_commit(gem.invalidate)
    return result


def _queries_on(edge_id: int, statuses=OPEN_STATUSES):
    queries = Query.objects.filter(status__in=statuses).exclude(gem_path=[])
    if connection.features.supports_json_field_contains:
        return list(queries.filter(gem_path__contains=[edge_id]).values_list("id", flat=True))
    return [qid for qid, path in queries.values_list("id", "gem_path") if edge_id in (path or [])]


def reroute_queries(edge: Edge, now=None) -> dict:
    """Queries in review/ready whose GEM path uses `edge`: an alternative path between the same
    pages replaces it (gem_path and the known path's steps), or the query is held in review.
    Call inside the transaction that broke the edge."""
    now = now or timezone.now()
    graph = gem.gem_graph()
    without = nx.subgraph_view(graph, filter_edge=lambda u, v, k: k != edge.pk)
    rerouted, held = [], []
    for query in Query.objects.select_for_update().filter(id__in=_queries_on(edge.pk)).order_by("pk"):
        ends = _path_ends(query.gem_path)
        new_path = gem.shortest_path(*ends, graph=without) if ends else None
        results = dict(query.gate_results or {})
        record = dict(results.get("gem") or {})
        if new_path is not None:
            record.setdefault("reroutes", []).append(
                {"edge": edge.pk, "from": list(query.gem_path), "to": new_path, "at": now.isoformat()})
            if query.known_path:
                query.known_path = rewrite_known_path(query.known_path, query.gem_path, new_path)
            query.gem_path = new_path
            results["gem"] = record
            query.gate_results = results
            query.save(update_fields=["gem_path", "known_path", "gate_results", "updated_at"])
            rerouted.append(query.pk)
            continue
        if not record.get("held"):
            record["previous_status"], record["previous_reason"] = query.status, query.status_reason
        record["held"] = {"edge": edge.pk, "at": now.isoformat()}
        results["gem"] = record
        query.gate_results = results
        query.status = Query.Status.REVIEW
        query.status_reason = (f"{HOLD_PREFIX}{edge.pk} unreachable: {edge.unreachable_reason}; "
                               f"no alternative path")
        query.save(update_fields=["status", "status_reason", "gate_results", "updated_at"])
        held.append(query.pk)
    return {"rerouted": rerouted, "held": held}


def restore_queries(edge: Edge, now=None) -> dict:
    """Queries held for `edge` go back to their previous status (ready only if they were ready),
    unless another edge of their path is still unreachable (then they stay held for that one)."""
    now = now or timezone.now()
    blocked = gem.blocked_edges(now) - {edge.pk}
    reasons = dict(Edge.objects.filter(id__in=blocked).values_list("id", "unreachable_reason"))
    restored, still_held = [], []
    for query in Query.objects.select_for_update().filter(
            status=Query.Status.REVIEW, gate_results__gem__held__edge=edge.pk).order_by("pk"):
        results = dict(query.gate_results)
        record = dict(results["gem"])
        if not query.status_reason.startswith(HOLD_PREFIX):
            record["held"] = None  # a person took it over meanwhile: theirs to decide
        elif other := next((eid for eid in query.gem_path if eid in blocked), None):
            record["held"] = {"edge": other, "at": now.isoformat()}
            query.status_reason = f"{HOLD_PREFIX}{other} unreachable: {reasons[other]}; no alternative path"
            still_held.append(query.pk)
        else:
            record["held"] = None
            record.setdefault("restores", []).append({"edge": edge.pk, "at": now.isoformat()})
            query.status = record.get("previous_status") or Query.Status.REVIEW
            query.status_reason = record.get("previous_reason") or ""
            restored.append(query.pk)
        results["gem"] = record
        query.gate_results = results
        query.save(update_fields=["status", "status_reason", "gate_results", "updated_at"])
    return {"restored": restored, "still_held": still_held}


def _path_ends(path: list[int]) -> tuple[int, int] | None:
    rows = dict(Edge.objects.filter(id__in=[path[0], path[-1]]).values_list("id", "source_id")) if path else {}
    if not path or path[0] not in rows:
        return None
    last = Edge.objects.filter(pk=path[-1]).values_list("target_id", flat=True).first()
    return (rows[path[0]], last) if last is not None else None


# -- known path rewriting ------------------------------------------------------------------------

def rewrite_known_path(known_path: dict, old_path: list[int], new_path: list[int]) -> dict:
    """The known path with the steps of the changed part of the GEM path replaced: the edges both
    paths share at the start and at the end keep their steps, and so do steps between them that
    are not edges (typing into a field, a scroll)."""
    rows = {eid: (source, target, action) for eid, source, target, action in Edge.objects.filter(
        id__in=[*old_path, *new_path]).values_list("id", "source_id", "target_id", "action")}
    steps = list(known_path.get("steps") or [])
    new_actions = [rows[eid][2] for eid in new_path]
    prefix = 0
    while prefix < min(len(old_path), len(new_path)) and old_path[prefix] == new_path[prefix]:
        prefix += 1
    suffix = 0
    while (suffix < min(len(old_path), len(new_path)) - prefix
           and old_path[-1 - suffix] == new_path[-1 - suffix]):
        suffix += 1
    positions, cursor = [], 0
    for eid in old_path:  # each old edge's step, in order
        action = rows[eid][2] if eid in rows else None
        found = next((i for i in range(cursor, len(steps)) if steps[i] == action), None)
        if found is None:
            break
        positions.append(found)
        cursor = found + 1
    if len(positions) == len(old_path) and len(old_path) - suffix > prefix:
        first, last = positions[prefix], positions[len(old_path) - suffix - 1]
        steps = steps[:first] + new_actions[prefix:len(new_path) - suffix] + steps[last + 1:]
    else:  # the steps do not follow the edges: rebuild them around the launch and the ending
        lead = steps[:1] if steps and steps[0].get("action") == "open" else []
        tail = steps[-1:] if steps and steps[-1].get("action") == "terminate" else []
        steps = lead + new_actions + tail
    pages = [rows[new_path[0]][0], *(rows[eid][1] for eid in new_path)] if new_path else []
    titles = dict(GemPage.objects.filter(id__in=pages).values_list("id", "title"))
    return {**known_path, "steps": steps, "summary": " → ".join(titles[p] for p in pages if titles.get(p))}
