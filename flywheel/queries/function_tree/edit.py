"""What a person does to a function tree on the pruning page: approve, rename, merge, delete,
re-parent, restore. Each is one transaction that locks the app's tree, records who did it in
Django's admin log (the node's History), and leaves `is_leaf` right for every node of the app.

A path is the node's identifier (queries name leaves as PACKAGE:path), so renaming changes the
label only; moving a node (re-parent, or a merge moving children) rewrites the paths of its subtree.
"""
from django.contrib.admin.models import CHANGE, LogEntry
from django.db import transaction
from django.utils import timezone

from flywheel.models import App, FunctionNode, QueryFunction

PRUNED = FunctionNode.Status.PRUNED


class TreeEditError(ValueError):
    """A change that would break the tree; the message says why, for the person who asked."""


def taken_paths(paths) -> set[str]:
    """Every path, and every prefix of one: a new node may take none of them."""
    taken = set()
    for path in paths:
        parts = path.split("/")
        taken.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
    return taken


def unique_path(taken: set, base: str) -> str:
    """`base`, or `base_2`, `base_3`...: not in `taken` (made by taken_paths); the caller adds it."""
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}_{n}"
    return candidate


def is_alive(node) -> bool:
    return node.status != PRUNED and node.merged_into_id is None


def leaves(app=None):
    """The leaves that count: target functions neither pruned nor merged away. A reuse node is
    the same function as its canonical node and counts there."""
    nodes = FunctionNode.objects.filter(is_leaf=True, merged_into__isnull=True, reuse_of__isnull=True).exclude(
        status=PRUNED)
    return nodes.filter(app=app) if app is not None else nodes


def refresh_leaves(app):
    """A node is a leaf when no live node hangs below it; a reuse node is what its canonical is."""
    nodes = list(FunctionNode.objects.filter(app=app).only("id", "parent_id", "reuse_of_id", "is_leaf",
                                                           "status", "merged_into_id"))
    with_children = {n.parent_id for n in nodes if n.parent_id and is_alive(n)}
    leaf = {n.pk: n.pk not in with_children for n in nodes}
    changed = []
    for node in nodes:
        value = leaf.get(node.reuse_of_id, leaf[node.pk]) if node.reuse_of_id else leaf[node.pk]
        if node.is_leaf != value:
            node.is_leaf = value
            changed.append(node)
    FunctionNode.objects.bulk_update(changed, ["is_leaf"], batch_size=500)


def _locked(node) -> FunctionNode:
    """The node as stored now, with its app's tree locked until the transaction ends."""
    App.objects.select_for_update().filter(pk=node.app_id).first()
    return FunctionNode.objects.select_related("app").get(pk=node.pk)


def _log(user, node, message):
    if user is not None and getattr(user, "pk", None):
        LogEntry.objects.log_actions(user.pk, [node], CHANGE, change_message=message, single_object=True)


def _subtree(node) -> list[FunctionNode]:
    """The node and everything below it, parents before children."""
    found, frontier = [node], [node.pk]
    while frontier:
        children = list(FunctionNode.objects.filter(parent_id__in=frontier))
        found += children
        frontier = [child.pk for child in children]
    return found


def _same_app(node, other, verb):
    if other.app_id != node.app_id:
        raise TreeEditError(f"cannot {verb} across apps: {node.path} is in {node.app.package}")


def _move(node, new_parent, position=None):
    """Hang `node` under `new_parent` (None: top level), rewriting the paths of its subtree."""
    subtree = _subtree(node)
    moving = {n.pk for n in subtree}
    taken = taken_paths(FunctionNode.objects.filter(app_id=node.app_id).exclude(pk__in=moving)
                        .values_list("path", flat=True))
    name = node.path.rsplit("/", 1)[-1]
    new_path = unique_path(taken, f"{new_parent.path}/{name}" if new_parent else name)
    old_path = node.path
    for member in subtree:
        if member.path == old_path or member.path.startswith(old_path + "/"):
            member.path = new_path + member.path[len(old_path):]
    node.parent = new_parent
    if position is not None:
        node.position = position
    FunctionNode.objects.bulk_update(subtree, ["path"], batch_size=500)
    node.save(update_fields=["parent", "position", "updated_at"])


def _next_position(parent, app_id):
    siblings = FunctionNode.objects.filter(app_id=app_id, parent=parent)
    return (max(siblings.values_list("position", flat=True), default=0) or 0) + 1


def approve(node, user) -> FunctionNode:
    with transaction.atomic():
        node = _locked(node)
        if node.merged_into_id:
            raise TreeEditError(f"{node.path} was merged into another node; approve that one")
        if node.status == PRUNED:
            raise TreeEditError(f"{node.path} was deleted; restore it first")
        node.status = FunctionNode.Status.APPROVED
        node.save(update_fields=["status", "updated_at"])
        _log(user, node, "Approved")
    return node


def approve_subtree(node, user) -> int:
    """Approve every proposed node of the subtree (the node included); return how many."""
    with transaction.atomic():
        node = _locked(node)
        proposed = [n.pk for n in _subtree(node) if n.status == FunctionNode.Status.PROPOSED and not n.merged_into_id]
        FunctionNode.objects.filter(pk__in=proposed).update(status=FunctionNode.Status.APPROVED,
                                                            updated_at=timezone.now())
        _log(user, node, f"Approved {len(proposed)} proposed node(s) of this subtree")
    return len(proposed)


def rename(node, label, user) -> FunctionNode:
    label = " ".join(str(label or "").split())
    if not label:
        raise TreeEditError("a name cannot be empty")
    if len(label) > 200:
        raise TreeEditError("a name has at most 200 characters")
    with transaction.atomic():
        node = _locked(node)
        before, node.label = node.label, label
        node.save(update_fields=["label", "updated_at"])
        _log(user, node, f"Renamed from {before!r} to {label!r}")
    return node


def merge(node, into, user) -> FunctionNode:
    """`node` is the same function as `into`: its queries, children and reuse relations move there;
    `node` stays, pruned, with merged_into set, so nothing is lost and a rebuild follows it."""
    with transaction.atomic():
        node, into = _locked(node), FunctionNode.objects.get(pk=into.pk)
        _same_app(node, into, "merge")
        if node.pk == into.pk:
            raise TreeEditError("a node cannot be merged into itself")
        if not is_alive(node) or not is_alive(into):
            raise TreeEditError("only live nodes can be merged (neither deleted nor merged already)")
        if into.reuse_of_id:
            raise TreeEditError(f"{into.path} is a reuse of another node; merge into that one instead")
        if into.pk in {n.pk for n in _subtree(node)}:
            raise TreeEditError(f"{into.path} lies below {node.path}; move it out first")
        already = set(QueryFunction.objects.filter(function=into).values_list("query_id", flat=True))
        QueryFunction.objects.filter(function=node, query_id__in=already).delete()
        moved_queries = QueryFunction.objects.filter(function=node).update(function=into)
        position = _next_position(into, node.app_id)
        for offset, child in enumerate(FunctionNode.objects.filter(parent=node).order_by("position", "path")):
            _move(child, into, position + offset)
        FunctionNode.objects.filter(reuse_of=node).update(reuse_of=into)
        if into.page_id is None and node.page_id:
            into.page_id = node.page_id
        if node.exercised_at and (into.exercised_at is None or node.exercised_at < into.exercised_at):
            into.exercised_at = node.exercised_at
        into.save(update_fields=["page", "exercised_at", "updated_at"])
        node.status, node.merged_into = PRUNED, into
        node.save(update_fields=["status", "merged_into", "updated_at"])
        refresh_leaves(node.app)
        _log(user, node, f"Merged into {into.path} ({moved_queries} query link(s) moved)")
    return into


def delete(node, user) -> int:
    """Prune the node, its subtree and the reuse nodes of any of them; queries keep their links
    (the history stays) but the leaves stop counting. Return how many nodes were pruned."""
    with transaction.atomic():
        node = _locked(node)
        pruned = {n.pk for n in _subtree(node)}
        pruned |= set(FunctionNode.objects.filter(reuse_of_id__in=pruned).values_list("pk", flat=True))
        FunctionNode.objects.filter(pk__in=pruned).update(status=PRUNED, updated_at=timezone.now())
        refresh_leaves(node.app)
        _log(user, node, f"Deleted with its subtree ({len(pruned)} node(s) pruned)")
    return len(pruned)


def restore(node, user) -> FunctionNode:
    """Undo a deletion: the node, its pruned subtree and their reuse nodes come back approved
    (merged nodes stay merged)."""
    with transaction.atomic():
        node = _locked(node)
        if node.merged_into_id:
            raise TreeEditError(f"{node.path} was merged; it lives on in the node it was merged into")
        if node.parent_id and not is_alive(node.parent):
            raise TreeEditError(f"its parent {node.parent.path} is deleted; restore the parent first")
        ids = [n.pk for n in _subtree(node) if n.status == PRUNED and not n.merged_into_id]
        ids += list(FunctionNode.objects.filter(reuse_of_id__in=ids, status=PRUNED, merged_into__isnull=True)
                    .values_list("pk", flat=True))  # delete pruned them with their canonical node
        FunctionNode.objects.filter(pk__in=ids).update(status=FunctionNode.Status.APPROVED, updated_at=timezone.now())
        refresh_leaves(node.app)
        _log(user, node, f"Restored ({len(ids)} node(s))")
    return FunctionNode.objects.get(pk=node.pk)


def reparent(node, new_parent, user) -> FunctionNode:
    """Move the node (with its subtree) under `new_parent`, or to the top level when None."""
    with transaction.atomic():
        node = _locked(node)
        if new_parent is not None:
            new_parent = FunctionNode.objects.get(pk=new_parent.pk)
            _same_app(node, new_parent, "move a node")
            if new_parent.pk in {n.pk for n in _subtree(node)}:
                raise TreeEditError(f"cannot move {node.path} under {new_parent.path}: "
                                    "a node cannot be moved inside itself (that would make a cycle)")
            if new_parent.reuse_of_id:
                raise TreeEditError(f"{new_parent.path} is a reuse node and has no children of its own")
            if not is_alive(new_parent):
                raise TreeEditError(f"{new_parent.path} is deleted or merged; pick a live node")
        if not is_alive(node):
            raise TreeEditError(f"{node.path} is deleted or merged; restore it before moving it")
        if node.parent_id != (new_parent.pk if new_parent else None):
            _move(node, new_parent, _next_position(new_parent, node.app_id))
            refresh_leaves(node.app)
            _log(user, node, f"Moved under {new_parent.path if new_parent else 'the top level'}")
    return FunctionNode.objects.get(pk=node.pk)
