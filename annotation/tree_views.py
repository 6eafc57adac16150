"""The function-tree pruning queue (§2.2.1): trees per app, built from exploration, that people
approve, rename, merge, delete and re-parent (drag and drop or keyboard).

Who may do what: annotators, managers and admins prune (rename, merge, delete, restore, move),
since pruning a proposed tree is annotation work like any other queue; approving nodes and
building trees from exploration is a manager's call (admins pass every check), because approved
leaves are what coverage and generation count.
"""
import logging

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import ANNOTATOR, MANAGER, has_role, role_required
from flywheel.blobs import read_blob
from flywheel.models import App, FunctionNode, ModelVersion
from flywheel.queries.coverage import coverage, coverage_by_app
from flywheel.queries.function_tree import builder as function_tree

PRUNERS = (ANNOTATOR, MANAGER)
# action -> (roles allowed, what it needs from the form)
ACTIONS = {"approve": (MANAGER,), "approve-subtree": (MANAGER,), "rename": PRUNERS, "merge": PRUNERS,
           "delete": PRUNERS, "restore": PRUNERS, "reparent": PRUNERS}

logger = logging.getLogger(__name__)


def _tree(app):
    """Top-level nodes, each with `.kids` (children in order), for the nested list."""
    nodes = list(FunctionNode.objects.filter(app=app).select_related("reuse_of", "merged_into", "page")
                 .annotate(query_count=Count("queries", distinct=True)).order_by("position", "path"))
    by_parent = {}
    for node in nodes:
        by_parent.setdefault(node.parent_id, []).append(node)
    for node in nodes:
        node.kids = by_parent.get(node.pk, [])
    return by_parent.get(None, [])


def _tree_context(request, app, error=""):
    return {"app": app, "roots": _tree(app), "coverage": coverage(app), "error": error,
            "can_approve": has_role(request.user, MANAGER),
            "counts": dict(FunctionNode.objects.filter(app=app).values_list("status").annotate(n=Count("id")))}


@role_required(*PRUNERS)
def tree_list(request):
    apps = (App.objects.filter(is_system=False)
            .annotate(node_count=Count("function_nodes", distinct=True),
                      proposed_count=Count("function_nodes", filter=Q(function_nodes__status="proposed"), distinct=True),
                      page_count=Count("pages", distinct=True))
            .filter(Q(node_count__gt=0) | Q(page_count__gt=0)).order_by("package"))
    by_app = {row["app"].pk: row for row in coverage_by_app()}
    rows = [{"app": app, "coverage": by_app.get(app.pk)} for app in apps]
    return render(request, "annotation/tree_list.html", {
        "rows": rows, "overall": coverage(), "can_build": has_role(request.user, MANAGER),
        "versions": ModelVersion.objects.filter(kind=ModelVersion.Kind.ENDPOINT).order_by("name")})


@role_required(*PRUNERS)
def tree_detail(request, app_id):
    app = get_object_or_404(App, pk=app_id)
    return render(request, "annotation/tree_detail.html", _tree_context(request, app))


@role_required(MANAGER)
@require_POST
def build(request, app_id):
    """Build the tree from the app's explored pages: DB work only, quick enough to run here."""
    app = get_object_or_404(App, pk=app_id)
    version = None
    if request.POST.get("model_version"):
        version = get_object_or_404(ModelVersion, pk=request.POST["model_version"], kind=ModelVersion.Kind.ENDPOINT)
    summary = function_tree.build_tree_from_gem(app, model_version=version)
    _index_later(app)
    for problem in summary["problems"]:
        messages.warning(request, problem)
    messages.success(request, f"{app}: {summary['created']} node(s) proposed, {summary['linked']} existing node(s) "
                              f"linked to their page, {summary['reuse']} reuse relation(s); {summary['leaves']} leaves count.")
    return redirect("function-tree", app_id=app.pk)


def _index_later(app):
    """Gate 3's node embeddings are computed by a worker now, not by the next generation run."""
    from flywheel.queries.generation.tasks import index_function_tree

    try:
        index_function_tree.delay([app.package])
    except Exception:  # the broker is down: gate 3 embeds the nodes when it first needs them
        logger.warning("could not queue the embedding of %s's function tree", app.package, exc_info=True)


def _node_of(app, value, field):
    if value in (None, ""):
        return None
    try:
        return FunctionNode.objects.get(app=app, pk=int(value))
    except (ValueError, FunctionNode.DoesNotExist):
        raise function_tree.TreeEditError(f"{field}: no such node in {app}") from None


@role_required(*PRUNERS)
@require_POST
def node_action(request, app_id, node_id, action):
    if action not in ACTIONS:
        raise Http404("No such action.")
    if not has_role(request.user, *ACTIONS[action]):
        raise PermissionDenied(f"Only {' or '.join(ACTIONS[action])}s may {action.replace('-', ' ')} nodes.")
    app = get_object_or_404(App, pk=app_id)
    node = get_object_or_404(FunctionNode, pk=node_id, app=app)  # a node of another app is not found here
    user, error, done = request.user, "", ""
    try:
        if action == "approve":
            function_tree.approve(node, user)
            done = f"Approved {node.label}."
        elif action == "approve-subtree":
            done = f"Approved {function_tree.approve_subtree(node, user)} proposed node(s) under {node.label}."
        elif action == "rename":
            done = f"Renamed to {function_tree.rename(node, request.POST.get('label', ''), user).label}."
        elif action == "merge":
            into = _node_of(app, request.POST.get("into"), "into")
            if into is None:
                raise function_tree.TreeEditError("pick the node to merge into")
            done = f"Merged {node.label} into {function_tree.merge(node, into, user).label}."
        elif action == "delete":
            done = f"Deleted {node.label} ({function_tree.delete(node, user)} node(s) pruned; u restores)."
        elif action == "restore":
            done = f"Restored {function_tree.restore(node, user).label}."
        elif action == "reparent":
            parent = _node_of(app, request.POST.get("parent"), "parent")
            moved = function_tree.reparent(node, parent, user)
            done = f"Moved {moved.label} to {moved.path}."
    except function_tree.TreeEditError as problem:
        error = str(problem)
    if request.headers.get("HX-Request"):
        context = {**_tree_context(request, app, error=error), "done": done}
        return render(request, "annotation/tree_nodes.html", context)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, done)
    return redirect("function-tree", app_id=app.pk)


@role_required(*PRUNERS)
def node_screenshot(request, app_id, node_id):
    """The screenshot of the page where the node's function is done (pruners see the tree's pages)."""
    node = get_object_or_404(FunctionNode.objects.select_related("page"), pk=node_id, app_id=app_id)
    if node.page is None or not node.page.screenshot_sha:
        raise Http404("This node has no page screenshot.")
    try:
        data = read_blob(node.page.screenshot_sha)
    except OSError:
        raise Http404("The screenshot is not stored any more.") from None
    response = HttpResponse(data, content_type="image/png")
    response["Cache-Control"] = "private, max-age=3600"
    return response
