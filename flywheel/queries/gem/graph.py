"""Global Environment Memory path queries (§2.2.5): pages are nodes, replayable actions are edges.

The graph is built from PostgreSQL rows (values_list, no model instances) into a networkx
MultiDiGraph and cached per process under a version stamp of the tables: a couple of aggregate
queries tell whether anything changed, so a path query answers in milliseconds and a new edge, a
broken one or a restored one is seen by the next query. Edges that an Env_ERROR made temporarily
unreachable (unreachable_until in the future, or reachable=False with no end) are left out of
path queries; once unreachable_until has passed they are usable again (and due for re-check).

Device priors (admins enter them) answer whether a function exists on a phone model / OS version.
"""
from __future__ import annotations

import json
import re
import threading

import networkx as nx
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from flywheel.models import App, DevicePrior, Edge, GemPage

# Which edge to take when several lead from one page to the next: a tap on the page first.
VIA_PREFERENCE = {"tap": 0, "back": 1, "launch": 2, "home": 3, "recents": 4, "share": 5, "clipboard": 6}
CROSS_VIAS = ("launch", "home", "recents", "share", "clipboard")

_lock = threading.Lock()
_cache: dict = {"stamp": None, "full": None, "down": [], "starts": {}, "views": {}}


# -- building and caching --------------------------------------------------------------------------

def version_stamp() -> tuple:
    """Changes whenever a page or edge is added, removed, re-seen, broken, re-checked or restored.
    One round trip of two aggregate scans (raw SQL: the ORM cannot UNION two tables' aggregates)."""
    edge, page = Edge._meta.db_table, GemPage._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*), MAX(id), MAX(created_at), MAX(last_checked_at), MAX(unreachable_until), "
            f"SUM(failures), SUM(CASE WHEN reachable THEN 0 ELSE 1 END) FROM {edge} UNION ALL "
            f"SELECT COUNT(*), MAX(id), MAX(first_seen_at), MAX(last_seen_at), NULL, NULL, "
            f"SUM(CASE WHEN is_start THEN 1 ELSE 0 END) FROM {page}")
        return tuple(tuple(row) for row in cursor.fetchall())


def _decode_all(values: list) -> list:
    """Decode a column of raw JSON values in one json.loads call (forty thousand calls cost most
    of a build); backends that hand back decoded values are passed through."""
    if all(isinstance(v, str) for v in values):
        return json.loads("[" + ",".join(v or "null" for v in values) + "]")
    return [json.loads(v) if isinstance(v, (str, bytes)) else v for v in values]


def _rows(queryset):
    """The rows of a values_list queryset without Django's per-value converters (fast for 40k rows)."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _build_full():
    graph = nx.MultiDiGraph()
    apps = {pk: (package, system) for pk, package, system in App.objects.values_list("id", "package", "is_system")}
    starts: dict[str, tuple] = {}  # package -> best (is_start first, depth, id)
    rows = _rows(GemPage.objects.values_list("id", "app_id", "name", "kind", "title", "is_start", "depth",
                                             "inputs", "outputs"))
    ios = _decode_all([row[7] for row in rows] + [row[8] for row in rows])
    for (pid, app_id, name, kind, title, is_start, depth, _, _), inputs, outputs in zip(rows, ios, ios[len(rows):]):
        package, system = apps[app_id]
        graph.add_node(pid, app=package, system=bool(system), name=name, kind=kind, title=title,
                       is_start=bool(is_start), depth=depth, inputs=inputs or [], outputs=outputs or [])
        rank = (0 if is_start else 1, depth, pid)
        if package not in starts or rank < starts[package]:
            starts[package] = rank
    # Dates and reasons only for the edges that are not reachable (few), read through the ORM.
    down_rows = {eid: (until, reason) for eid, until, reason in Edge.objects.filter(reachable=False).values_list(
        "id", "unreachable_until", "unreachable_reason")}
    down = []
    # Edges go straight into networkx's adjacency dicts, laid out exactly as MultiDiGraph.add_edge
    # lays them out (one key dict shared by _succ[u][v] and _pred[v][u]): add_edge's per-call
    # checks cost three times the whole build at 40k edges. test_gem checks the result equals
    # a graph built through add_edge.
    succ, pred = graph._succ, graph._pred
    rows = _rows(Edge.objects.values_list("id", "source_id", "target_id", "kind", "via", "action", "reachable"))
    actions = _decode_all([row[5] for row in rows])
    for (eid, source, target, kind, via, _, ok), action in zip(rows, actions):
        until, reason = down_rows.get(eid, (None, ""))
        keys = succ[source].get(target)
        if keys is None:
            keys = succ[source][target] = pred[target][source] = {}
        keys[eid] = {"kind": kind, "via": via, "action": action or {}, "reachable": bool(ok),
                     "unreachable_until": until, "reason": reason}
        if not ok:
            down.append((eid, source, target, until))
    return nx.freeze(graph), down, {package: rank[2] for package, rank in starts.items()}


def _current():
    """The cached full graph (rebuilt when the stamp moved), its not-reachable edges and start pages."""
    stamp = version_stamp()
    with _lock:
        if _cache["stamp"] != stamp:
            full, down, starts = _build_full()
            _cache.update(stamp=stamp, full=full, down=down, starts=starts, views={})
        return _cache["full"], _cache["down"], _cache["starts"], _cache["views"]


def invalidate():
    """Forget the cached graph (a writer in this process calls it; others see the stamp move)."""
    with _lock:
        _cache.update(stamp=None, full=None, down=[], starts={}, views={})


def edge_usable(data: dict, now=None) -> bool:
    """An edge's attributes → may a path use it now?"""
    if data.get("reachable", True):
        return True
    until = data.get("unreachable_until")
    return until is not None and until <= (now or timezone.now())


def blocked_edges(now=None) -> set[int]:
    """Ids of the edges path queries leave out right now."""
    now = now or timezone.now()
    _, down, _, _ = _current()
    return {eid for eid, _, _, until in down if until is None or until > now}


def gem_graph(app_packages=None, include_unreachable=False) -> nx.MultiDiGraph:
    """The GEM as a frozen MultiDiGraph: nodes are GemPage ids (app, name, kind, title, is_start,
    depth, inputs, outputs), edges are keyed by Edge id (kind, via, action, reachable,
    unreachable_until, reason). Unusable edges are left out unless `include_unreachable`.
    `app_packages` keeps the pages of those apps only (add the launcher's package for cross edges)."""
    full, down, _, views = _current()
    now = timezone.now()
    blocked = frozenset() if include_unreachable else frozenset(
        eid for eid, _, _, until in down if until is None or until > now)
    packages = frozenset(app_packages) if app_packages else None
    key = (packages, blocked)
    with _lock:
        graph = views.get(key)
        if graph is None:
            graph = full
            if packages is not None or blocked:
                graph = nx.MultiDiGraph(full.subgraph(
                    [n for n, app in full.nodes(data="app") if app in packages]) if packages is not None else full)
                graph.remove_edges_from((s, t, eid) for eid, s, t, _ in down
                                        if eid in blocked and graph.has_edge(s, t, eid))
                graph = nx.freeze(graph)
            views[key] = graph
    return graph


# -- path queries -----------------------------------------------------------------------------------

# What a step costs when a path is chosen. Recents only lists apps used before, so a path through
# it holds only with that history: dearer than Home + launch. A clipboard edge says data flows
# (copy on one page, paste on another app's page); it is no step a phone can replay, so paths
# never take it.
STEP_COST = {"recents": 3, "clipboard": None}


def _step_cost(u, v, parallel: dict):
    costs = [STEP_COST.get(attrs.get("via"), 1) for attrs in parallel.values()]
    costs = [c for c in costs if c is not None]
    return min(costs) if costs else None


def _pick_edge(graph, u, v) -> int:
    usable = [item for item in graph[u][v].items() if STEP_COST.get(item[1].get("via"), 1) is not None]
    return min(usable, key=lambda item: (STEP_COST.get(item[1].get("via"), 1),
                                         VIA_PREFERENCE.get(item[1].get("via"), 9), item[0]))[0]


def edges_along(graph, nodes: list) -> list[int]:
    """The edge ids of a node path (the preferred edge between each pair)."""
    return [_pick_edge(graph, u, v) for u, v in zip(nodes, nodes[1:])]


def shortest_path(source_page_id, target_page_id, graph=None) -> list[int] | None:
    """Edge ids of the cheapest path over usable edges (each step 1, recents 3, clipboard never);
    [] when source is target; None when none."""
    graph = gem_graph() if graph is None else graph
    if source_page_id not in graph or target_page_id not in graph:
        return None
    try:
        nodes = nx.shortest_path(graph, source_page_id, target_page_id, weight=_step_cost)
    except nx.NetworkXNoPath:
        return None
    return edges_along(graph, nodes)


def reachable(source_page_id, target_page_id, graph=None) -> bool:
    graph = gem_graph() if graph is None else graph
    return shortest_path(source_page_id, target_page_id, graph) is not None


def start_page(app_package: str) -> int | None:
    """The page an app opens on after a fresh launch (is_start, else its shallowest page)."""
    return _current()[2].get(app_package)


def path_to_page(page_id, graph=None) -> list[int] | None:
    """Edge ids from the page's app start page (after a fresh launch) to the page; launcher and
    other cross edges may be part of it."""
    graph = gem_graph() if graph is None else graph
    if page_id not in graph:
        return None
    start = start_page(graph.nodes[page_id]["app"])
    return None if start is None else shortest_path(start, page_id, graph)


def cross_app_path(source_page_id, target_page_id, graph=None) -> list[int] | None:
    """A path between pages of two apps: apps connect only through cross edges (Home, launch,
    recents, share sheet, clipboard), so any path between them goes through those."""
    return shortest_path(source_page_id, target_page_id, graph)


def known_path_steps(edge_ids) -> list[dict]:
    """The replayable query-format steps (each edge's action), in path order."""
    edge_ids = list(edge_ids)
    actions = dict(Edge.objects.filter(id__in=edge_ids).values_list("id", "action"))
    missing = [eid for eid in edge_ids if eid not in actions]
    if missing:
        raise ValueError(f"GEM edge #{missing[0]} no longer exists")
    return [actions[eid] for eid in edge_ids]


# -- input/output compatibility -----------------------------------------------------------------

# A few words that name the same thing; anything else must share a word to match.
SYNONYMS = {"keyword": "query", "keywords": "query", "search": "query", "term": "query",
            "title": "name", "heading": "name", "label": "name", "message": "text", "body": "text",
            "content": "text", "note": "text", "memo": "text", "comment": "text", "caption": "text",
            "address": "location", "place": "location", "destination": "location", "city": "location",
            "url": "link", "photo": "image", "picture": "image", "price": "amount", "cost": "amount",
            "total": "amount", "phone": "number", "contact": "person", "recipient": "person"}
# Inputs that take any text of the same kind (what one types into a search box, a note, a message).
FREE_TEXT = frozenset({"query", "text"})
STOPWORDS = frozenset("a an the of to for in on and or with by from its your my this that".split())


def parse_io(entry: str) -> tuple[str, str]:
    """'text: search keyword' -> ('text', 'search keyword'); no kind -> ('text', entry)."""
    kind, sep, description = str(entry).partition(":")
    return (kind.strip().lower(), description.strip()) if sep else ("text", kind.strip())


def concept_words(description: str) -> set[str]:
    words = {w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
             for w in re.findall(r"[a-z0-9]+", description.lower()) if w not in STOPWORDS}
    return {SYNONYMS.get(w, w) for w in words}


def io_match(output: str, wanted_input: str) -> float:
    """How well an output fills an input: 0 when the kinds differ or the meanings do not meet."""
    out_kind, out_text = parse_io(output)
    in_kind, in_text = parse_io(wanted_input)
    if out_kind != in_kind:
        return 0.0
    have, want = concept_words(out_text), concept_words(in_text)
    overlap = len(have & want) / max(1, min(len(have), len(want)))
    if overlap:
        return 0.5 + overlap / 2
    return 0.4 if want & FREE_TEXT else 0.0


def compatible_endpoints(page_id, graph=None) -> list[tuple[int, str]]:
    """Pages of other apps whose inputs this page's outputs can fill, best first:
    [(page id, the matched input "kind: description")]."""
    graph = gem_graph(include_unreachable=True) if graph is None else graph
    if page_id not in graph:
        return []
    node = graph.nodes[page_id]
    scored = []
    for other, data in graph.nodes(data=True):
        if data["app"] == node["app"] or data.get("system") or not data["inputs"]:
            continue
        for wanted in data["inputs"]:
            score = max((io_match(output, wanted) for output in node["outputs"]), default=0.0)
            if score:
                scored.append((-score, other, wanted))
    scored.sort()
    return [(other, wanted) for _, other, wanted in scored]


# -- device priors --------------------------------------------------------------------------------

def _version_applies(prior_version: str, version: str) -> bool:
    """'14' applies to 14 and 14.x; blank to every version."""
    return not prior_version or version == prior_version or version.startswith(prior_version + ".")


def priors_for(device) -> list[DevicePrior]:
    """The priors that apply to a phone (its model and OS version), most specific first."""
    model, version = (device.model or "").strip(), (device.os_version or "").strip()
    candidates = DevicePrior.objects.select_related("app").filter(Q(device_model="") | Q(device_model__iexact=model))
    applying = [p for p in candidates if _version_applies(p.os_version.strip(), version)]
    return sorted(applying, key=lambda p: (not p.device_model, -len(p.os_version), p.pk))


def function_exists(device, app_package, function) -> bool | None:
    """What the most specific prior says about `function` of the app on this phone; None when no
    prior says. A prior names the function by path ('display/dark mode') or by its last part."""
    wanted = str(function).strip().lower()
    for prior in priors_for(device):
        if prior.app is not None and prior.app.package != app_package:
            continue
        named = prior.function.strip().lower()
        if named == wanted or named == wanted.rsplit("/", 1)[-1] or wanted == named.rsplit("/", 1)[-1]:
            return prior.exists
    return None
