"""Function trees per app (§2.2.1), built from the explored Global Environment Memory.

The tree mirrors navigation. The app's start page is the root (the app itself, no node of its
own); every page reached by a tap hangs under the page it is first reached from (breadth-first
over the app's tap edges, edges in the order they were found), named after the element that was
tapped, else the page's title or first header. A page that also has other parents on a shortest
path from the start (the same function reached by several paths) gets, under each of them, a
reuse node pointing at the canonical one, not expanded again. Lateral edges (tab bars: same depth)
and edges back towards the start are navigation chrome, not other paths.

Leaves are target functions: pages with no child pages, plus each page's *actions*. An action is
an element that is clickable or checkable, not editable, has a readable name (text or content description, not
just a number, not a paragraph), is not back/close/OK chrome, is not one of a list's repeated rows
(its resource id occurs once on the page) and is not navigation: no tap edge anywhere in the app
left its page through an element with that selector or text (exploration records every tap that
navigated, so what remains switches, downloads, sends... in place, or was never tapped because the
safety audit holds irreversible actions back, which are functions too).

Both the offline builder and a VLM (vlm.py) produce the same JSON tree: a list of nodes
{"label", "page" (GemPage id or null), "kind": "page"|"action", "reuse": bool, "children": [...]}.
`write_tree` merges it into the stored tree without duplicating or overriding anything: a node is
matched by page first, then by path, then by normalised label; a matched node keeps its label,
status, parent and path (a person's approval, rename, pruning, merge or move survives), and only
gains the page it lacked. Nothing is expanded below a pruned node; below a merged one, children go
to the node it was merged into.
"""
import logging
import re
from collections import Counter, defaultdict, deque

from django.db import transaction

from flywheel.models import App, Edge, FunctionNode, GemPage, ModelVersion
from flywheel.queries.function_tree.edit import (  # the services live there; callers use them from here
    TreeEditError,
    approve,
    approve_subtree,
    delete,
    leaves,
    merge,
    refresh_leaves,
    rename,
    reparent,
    restore,
    taken_paths,
    unique_path,
)
from flywheel.queries.function_tree.labels import (
    element_label,
    human_label,
    is_chrome,
    label_from_resource_id,
    page_label,
    slug,
)
from flywheel.queries.function_tree.vlm import TreeExtractionError, vlm_spec

log = logging.getLogger(__name__)
SYSTEM_KINDS = (GemPage.Kind.LAUNCHER, GemPage.Kind.RECENTS, GemPage.Kind.SHARE_SHEET)


def _target(edge) -> dict:
    target = (edge.action or {}).get("target")
    return target if isinstance(target, dict) else {}


def _matches(element: dict, target: dict) -> bool:
    """Does a tap target (a selector, possibly partial) select this stored element?"""
    if not target:
        return False
    selector = {**(element.get("selector") or {})}
    if element.get("text") and "text" not in selector:
        selector["text"] = element["text"]
    return all(selector.get(key) == value for key, value in target.items())


def _tapped_label(edge, source) -> str:
    target = _target(edge)
    for element in source.elements or []:
        if _matches(element, target):
            label = element_label(element)
            if label:
                return label
    return (human_label(target.get("text")) or human_label(target.get("content_desc"))
            or label_from_resource_id(target.get("resource_id")))


def _keys(selector: dict) -> frozenset:
    return frozenset((key, str(value)) for key, value in selector.items())


def _element_keys(element: dict) -> set[frozenset]:
    """The tap targets that would select this element: its selector, or any one of its attributes."""
    selector = element.get("selector") or {}
    keys = {_keys(selector)}
    for key in ("resource_id", "text", "content_desc"):
        value = selector.get(key) or element.get(key)
        if value:
            keys.add(_keys({key: value}))
    return keys


def _actions(page, navigating: set[frozenset]) -> list[str]:
    """The page's in-place functions by the rule in the module docstring, in screen order."""
    elements = page.elements or []
    id_counts = defaultdict(int)
    for element in elements:
        resource_id = element.get("resource_id") or (element.get("selector") or {}).get("resource_id")
        if resource_id:
            id_counts[resource_id] += 1
    title = human_label(page.title).lower()
    found = []
    for element in elements:
        if not (element.get("clickable") or element.get("checkable")) or element.get("editable"):
            continue
        label = element_label(element)
        resource_id = element.get("resource_id") or (element.get("selector") or {}).get("resource_id")
        if (not label or is_chrome(label) or label.lower() == title
                or element.get("repeated") or (resource_id and id_counts[resource_id] > 1)
                or _element_keys(element) & navigating):
            continue
        if label.lower() not in (name.lower() for name in found):
            found.append(label)
    return found


def offline_spec(app) -> list[dict]:
    """The navigation tree of an app's explored pages, as the JSON tree `write_tree` takes."""
    pages = {page.pk: page for page in GemPage.objects.filter(app=app).exclude(kind__in=SYSTEM_KINDS)}
    if not pages:
        return []
    start = next((p for p in pages.values() if p.is_start), None) or min(
        pages.values(), key=lambda p: (p.depth, p.pk))
    edges = list(Edge.objects.filter(source_id__in=pages, target_id__in=pages, via=Edge.Via.TAP)
                 .order_by("pk"))
    out = defaultdict(list)
    for edge in edges:
        if edge.source_id != edge.target_id:
            out[edge.source_id].append(edge)
    navigating = {_keys(t) for t in (_target(e) for e in edges if e.source_id != e.target_id) if t}

    depth, first_edge, queue = {start.pk: 0}, {}, deque([start.pk])
    while queue:  # breadth first: a page hangs under the page it is first reached from
        page_id = queue.popleft()
        for edge in out[page_id]:
            if edge.target_id not in depth:
                depth[edge.target_id] = depth[page_id] + 1
                first_edge[edge.target_id] = edge
                queue.append(edge.target_id)
    children, reuses = defaultdict(list), defaultdict(list)
    for target_id, edge in first_edge.items():
        children[edge.source_id].append((target_id, edge))
    for edge in edges:  # the other shortest-path parents: the same function by another path
        target_id = edge.target_id
        if (target_id in first_edge and edge.source_id in depth and edge.source_id != first_edge[target_id].source_id
                and depth[edge.source_id] == depth[target_id] - 1
                and all(target_id != other for other, _ in reuses[edge.source_id])):
            reuses[edge.source_id].append((target_id, edge))

    # A title names its page when no other page has it (a toolbar showing the app's name on every
    # page does not); else the tapped element does (a list row's text may be data, a title is not).
    titles = Counter(human_label(p.title).lower() for p in pages.values())

    def node(page_id, edge, reuse=False):
        page = pages[page_id]
        title = human_label(page.title)
        own_title = title if title and titles[title.lower()] == 1 and page_id != start.pk else ""
        label = own_title or _tapped_label(edge, pages[edge.source_id]) or page_label(page)
        spec = {"label": label, "page": page_id, "kind": "page", "reuse": reuse, "children": []}
        if not reuse:
            spec["children"] = subtree(page_id)
        return spec

    def subtree(page_id):
        nodes = [node(child, edge) for child, edge in children[page_id]]
        nodes += [node(target, edge, reuse=True) for target, edge in reuses[page_id]]
        taken = {n["label"].lower() for n in nodes}
        nodes += [{"label": label, "page": page_id, "kind": "action", "reuse": False, "children": []}
                  for label in _actions(pages[page_id], navigating) if label.lower() not in taken]
        return nodes

    return subtree(start.pk)


class _Tree:
    """The app's stored nodes, indexed for matching, with what this build changed."""

    def __init__(self, app):
        self.app = app
        self.nodes = {}
        self.paths = taken_paths(FunctionNode.objects.filter(app=app).values_list("path", flat=True))
        self.on_page, self.at_path, self.unlinked = defaultdict(list), {}, defaultdict(list)
        for node in FunctionNode.objects.filter(app=app).order_by("path"):
            self._index(node)
        self.created = self.linked = self.reuse = 0

    def _index(self, node):
        self.nodes[node.pk] = node
        if node.reuse_of_id is not None:
            return
        self.at_path[node.path] = node
        if node.page_id:
            self.on_page[node.page_id].append(node)
        else:
            for name in {slug(node.label), node.path.rsplit("/", 1)[-1]}:
                self.unlinked[name].append(node)

    def by_page(self, page_id, kind, label):
        candidates = self.on_page.get(page_id, [])
        if kind == "page":  # the page's own node, not one of the actions done on it
            candidates = [n for n in candidates if n.parent_id is None or self.nodes[n.parent_id].page_id != page_id]
        else:
            candidates = [n for n in candidates if slug(label) in (slug(n.label), _last_segment(n.path))]
        return min(candidates, key=lambda n: len(n.path), default=None)

    def by_label(self, parent, label):
        """An unlinked node of that name: under the same parent first, else the only one in the app."""
        named = [n for n in dict.fromkeys(self.unlinked.get(slug(label), [])) if n.page_id is None]
        siblings = [n for n in named if n.parent_id == (parent.pk if parent else None)]
        if siblings:
            return siblings[0]
        return named[0] if len(named) == 1 else None

    def path_under(self, parent, label, page_id=None):
        name = slug(label) or (f"page_{page_id}" if page_id else "function")
        return f"{parent.path}/{name}" if parent else name

    def find(self, spec, parent):
        page_id = spec.get("page")
        node = self.by_page(page_id, spec.get("kind", "page"), spec["label"]) if page_id else None
        if node is None:
            node = self.at_path.get(self.path_under(parent, spec["label"], page_id))
            node = node if node is not None and node.page_id in (None, page_id) else None
        if node is None:
            node = self.by_label(parent, spec["label"])
        if node is not None and node.page_id is None and page_id:
            node.page_id = page_id
            node.save(update_fields=["page", "updated_at"])
            self.on_page[page_id].append(node)
            self.linked += 1
        return node

    def create(self, spec, parent, origin, position, reuse_of=None):
        base = self.path_under(parent, spec["label"], spec.get("page"))
        path = unique_path(self.paths, base)
        node = FunctionNode.objects.create(
            app=self.app, path=path, label=spec["label"][:200], parent=parent, page_id=spec.get("page"),
            origin=origin, status=FunctionNode.Status.PROPOSED, position=position, reuse_of=reuse_of)
        self.paths.add(path)
        self._index(node)
        self.created += 1
        return node

    def live(self, node):
        """Follow merges; None when the node (hence its branch) was pruned by a person."""
        seen = set()
        while node is not None and node.merged_into_id and node.pk not in seen:
            seen.add(node.pk)
            node = self.nodes.get(node.merged_into_id)
        return None if node is None or node.status == FunctionNode.Status.PRUNED else node


def _last_segment(path):
    """A path's last part without the suffix that kept it unique ('dark_mode_2' -> 'dark_mode')."""
    return re.sub(r"_\d+$", "", path.rsplit("/", 1)[-1])


def _canonical_order(spec_nodes):
    """Breadth-first (parent before child), so a page's canonical node is the shallowest one."""
    queue = deque((spec, None) for spec in spec_nodes)
    while queue:
        spec, parent_key = queue.popleft()
        yield spec, parent_key
        for child in spec.get("children") or []:
            queue.append((child, id(spec)))


def write_tree(app, spec_nodes, origin=FunctionNode.Origin.EXPLORED) -> dict:
    """Merge a JSON tree into the app's stored tree (see the module docstring); one transaction."""
    with transaction.atomic():
        App.objects.select_for_update().filter(pk=app.pk).first()  # one build or edit of a tree at a time
        tree = _Tree(app)
        stored = {None: None}  # id(spec) -> the stored node its children go under
        page_nodes, pruned_pages, pending_reuse = {}, set(), []
        for position, (spec, parent_key) in enumerate(_canonical_order(spec_nodes)):
            if parent_key not in stored:
                continue  # below a pruned branch
            parent = stored[parent_key]
            page_id, kind = spec.get("page"), spec.get("kind", "page")
            if kind == "page" and page_id and (spec.get("reuse") or page_id in page_nodes):
                pending_reuse.append((spec, parent, position))
                continue
            node = tree.find(spec, parent) or tree.create(spec, parent, origin, position)
            node = tree.live(node)
            if node is None:
                if kind == "page":
                    pruned_pages.add(page_id)
                continue
            stored[id(spec)] = node
            if kind == "page" and page_id:
                page_nodes[page_id] = node
        for spec, parent, position in pending_reuse:  # once every canonical node is known
            canonical = page_nodes.get(spec["page"])
            if spec["page"] in pruned_pages:
                continue
            if canonical is None:  # its only occurrence was marked reuse: it is the canonical one
                page_nodes[spec["page"]] = tree.find(spec, parent) or tree.create(spec, parent, origin, position)
                continue
            if canonical.parent_id == (parent.pk if parent else None) or _is_ancestor(tree, canonical, parent):
                continue  # a way back up, not another path
            if any(n.parent_id == (parent.pk if parent else None) for n in canonical.reused_by.all()):
                continue
            tree.create(spec, parent, origin, position, reuse_of=canonical)
            tree.reuse += 1
        refresh_leaves(app)
    return {"created": tree.created, "linked": tree.linked, "reuse": tree.reuse,
            "leaves": leaves(app).count()}


def _is_ancestor(tree, node, of):
    current = of
    while current is not None:
        if current.pk == node.pk:
            return True
        current = tree.nodes.get(current.parent_id)
    return False


def build_tree_from_gem(app, model_version=None) -> dict:
    """Build (or extend) an app's function tree from its explored pages; return a summary:
    {"created", "linked", "reuse", "leaves", "origin", "problems"}. With an endpoint model version
    a VLM extracts the tree; a failed or malformed answer falls back to the offline tree."""
    problems, origin = [], FunctionNode.Origin.EXPLORED
    spec = offline_spec(app)
    if model_version is not None and model_version.kind == ModelVersion.Kind.ENDPOINT:
        try:
            spec, origin = vlm_spec(app, model_version, draft=spec), FunctionNode.Origin.VLM
        except TreeExtractionError as error:
            problems.append(f"{model_version.name}: {error}; the tree was built offline instead")
            log.warning("function tree of %s: %s", app.package, problems[-1])
    if not spec:
        problems.append("no explored pages: run an exploration of this app first")
    summary = write_tree(app, spec, origin=origin)
    return {**summary, "origin": origin, "problems": problems}


__all__ = ["TreeEditError", "approve", "approve_subtree", "build_tree_from_gem", "delete", "label_from_resource_id",
           "leaves", "merge", "offline_spec", "refresh_leaves", "rename", "reparent", "restore", "write_tree"]
