"""The offline Teacher's second source: Global Environment Memory (§2.2.5).

Which element on this page leads toward the target page: match the screen to a GemPage
(page_identity), take the cheapest GEM path to a target page (gem.shortest_path), and resolve its
first edge's replayable step on this screen. A screen that is a page of the query's GEM path takes
that path's next edge directly. Any database or GEM trouble means "no opinion", never an error.
"""
from __future__ import annotations

import logging

from flywheel.models import Edge, GemPage
from flywheel.policies.offline import GOAL_FILLER
from flywheel.policies.teacher_path import Candidate, _resolve, visible_nodes
from flywheel.queries.gem import graph as gem
from flywheel.screens.labels import label_node, label_of, stems
from flywheel.screens.page_identity import fingerprint, match_page, thresholds_for

log = logging.getLogger(__name__)
GEM_CONFIDENCE = 0.75        # the first edge of a GEM path resolved on this screen
GEM_PATH_CONFIDENCE = 0.8    # the query's own GEM path, at a page it passes
DETOUR_CONFIDENCE = 0.25     # a route that leaves the app to come back to it: below a goal guess
DETOUR_VIAS = ("home", "recents", "launch")


def current_page(ctx):
    """The GemPage this screen is (among the pages of the query's apps and the foreground app)."""
    packages = list(dict.fromkeys([*ctx.apps, (ctx.foreground or {}).get("package", "")]))
    pages = list(GemPage.objects.filter(app__package__in=[p for p in packages if p]).select_related("app"))
    if not pages:
        return None
    package = (ctx.foreground or {}).get("package", "")
    seen = fingerprint(ctx.screenshot or b"", ctx.hierarchy_xml, (ctx.foreground or {}).get("activity", ""))
    shown = [node.package for node in visible_nodes(ctx.hierarchy_xml)[:1]]
    if shown != [package]:
        seen.activity = ""  # a system surface over the app: its activity is not the app's (as exploration)
    own = [page for page in pages if page.app.package == (shown[0] if shown else package)] or pages
    return match_page(seen, own, thresholds_for(own[0].app))


def gem_candidates(ctx) -> list[Candidate]:
    try:
        return _gem_candidates(ctx)
    except Exception:  # the GEM is a hint: the Teacher goes on without it
        log.exception("teacher: GEM lookup failed")
        return []


def _gem_candidates(ctx) -> list[Candidate]:
    if not ctx.gem_path and not ctx.target_pages:
        return []
    edges = {edge.pk: edge for edge in Edge.objects.filter(pk__in=ctx.gem_path)}
    targets = list(dict.fromkeys([*ctx.target_pages, *([edges[ctx.gem_path[-1]].target_id]
                                                        if ctx.gem_path and ctx.gem_path[-1] in edges else [])]))
    graph = gem.gem_graph()
    package = (ctx.foreground or {}).get("package", "")
    for target in targets:  # the task's app is not in front: open it (Home's launch edges are per app)
        app = graph.nodes[target].get("app") if target in graph else None
        if app and app != package and app in ctx.apps:
            return [Candidate({"action": "open", "app": app}, None, GEM_CONFIDENCE, "gem",
                              f"the target page \"{graph.nodes[target].get('name')}\" is in {app}, not in front")]
    page = current_page(ctx)
    if page is None:
        return []
    nodes = visible_nodes(ctx.hierarchy_xml)
    out = []
    on_path = [eid for eid in ctx.gem_path if eid in edges and edges[eid].source_id == page.pk]
    for eid in on_path[-1:]:  # a page the path passes twice: its later edge moves further on
        action, label = _resolve(edges[eid].action or {}, nodes, ctx.screen_size)
        if action is not None:
            out.append(Candidate(action, label, GEM_PATH_CONFIDENCE, "gem",
                                 f"the query's GEM path passes page \"{page.name}\"; its next edge is {label or action}"))
    routes = [(route, target) for target in targets
              if (route := gem.shortest_path(page.pk, target, graph)) is not None]
    for route, target in sorted(routes, key=lambda item: len(item[0])):
        if not route:
            continue  # on the target page: what to do there is the goal's business, not the graph's
        edge = Edge.objects.filter(pk=route[0]).first()
        action, label = _goal_sibling(ctx.goal, *_resolve((edge.action if edge else {}) or {}, nodes, ctx.screen_size),
                                      nodes)
        if action is not None and not any(c.action == action for c in out):
            title = graph.nodes[target].get("title") or graph.nodes[target].get("name") or target
            # a route out of the app to a page of the same app: the GEM does not know the way in here
            detour = edge is not None and edge.via in DETOUR_VIAS and graph.nodes[target].get("app") == page.app.package
            out.append(Candidate(action, label, DETOUR_CONFIDENCE if detour else GEM_CONFIDENCE, "gem",
                                 f"on GEM page \"{page.name}\", {len(route)} step(s) from \"{title}\"; "
                                 f"the path starts with {label or action.get('action')}"))
    return out


def _goal_sibling(goal: str, action: dict | None, label: str | None, nodes) -> tuple[dict | None, str | None]:
    """The GEM knows that one row of a list leads on; the goal may name another row of the same kind
    (same class and resource-id, lined up with it): tap the row the goal names."""
    point = (action or {}).get("point")
    if not point or action.get("action") not in ("click", "long_press", "double_click"):
        return action, label
    tappable = [n for n in nodes if (n.clickable or n.long_clickable) and n.area]
    hit = min((n for n in tappable if n.contains(*point)), key=lambda n: n.area, default=None)
    if hit is None:
        return action, label
    x1, y1, x2, y2 = hit.bounds
    rows = [n for n in tappable if n.cls == hit.cls and n.resource_id == hit.resource_id
            and ((n.bounds[0], n.bounds[2]) == (x1, x2) or (n.bounds[1], n.bounds[3]) == (y1, y2))]
    wanted = stems(goal) - GOAL_FILLER

    def named(node):
        return len(stems(node.all_text()) & wanted)
    best = max(rows, key=named, default=hit)
    if named(best) <= named(hit):
        return action, label
    return {**action, "point": list(label_node(best, wanted).center)}, label_of(best)
