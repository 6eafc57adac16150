"""The GEM page (drawn per app and across apps, with a path finder) and the device priors admins enter."""
from __future__ import annotations

import json

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_POST

from accounts.roles import ADMIN, MANAGER, has_role, role_required
from flywheel.models import App, DevicePrior, Edge, GemPage
from flywheel.queries.gem import graph as gem
from flywheel.rules.step_words import edge_words

MAX_DRAWN_PAGES = 400  # more nodes than this make an unreadable drawing and a slow browser
CROSS = "cross"        # the app selector's value for the cross-app graph


# -- the page and its JSON ------------------------------------------------------------------------

@role_required(MANAGER)
def gem_page(request):
    apps = list(App.objects.filter(pages__isnull=False).distinct().order_by("is_system", "package"))
    selected = request.GET.get("app") or CROSS
    return render(request, "flywheel/gem.html", {
        "apps": [app for app in apps if not app.is_system], "selected": selected, "cross": CROSS,
        "pages": GemPage.objects.count(), "edges": gem.gem_graph(include_unreachable=True).number_of_edges(),
        "blocked": len(gem.blocked_edges()),
        "graph_url": f"{reverse('gem-graph-json')}?app={selected}", "path_url": reverse("gem-path-json"),
        "priors": DevicePrior.objects.count(), "exploration_url": _exploration_url()})


def _exploration_url() -> str:
    try:
        return reverse("exploration-list")
    except NoReverseMatch:  # the exploration pages name their URL differently
        return "/exploration/"


def _drawn_pages(graph, app: str) -> tuple[list[int], int]:
    """(page ids to draw, how many the selection has): an app's pages with the pages its cross
    edges reach, or, across apps, the system pages and every page a cross edge touches."""
    if app == CROSS:
        chosen = {n for n, system in graph.nodes(data="system") if system}
        chosen |= {n for u, v, kind in graph.edges(data="kind") if kind == Edge.Kind.CROSS for n in (u, v)}
    else:
        own = {n for n, package in graph.nodes(data="app") if package == app}
        chosen = set(own)
        for u, v, kind in graph.edges(data="kind"):
            if kind == Edge.Kind.CROSS and (u in own or v in own):
                chosen |= {u, v}
    ordered = sorted(chosen, key=lambda n: (graph.nodes[n]["app"] != app, graph.nodes[n]["depth"], n))
    return ordered[:MAX_DRAWN_PAGES], len(ordered)


@role_required(MANAGER)
def gem_graph_json(request):
    """Nodes and edges to draw: ?app=<package> or ?app=cross (capped at MAX_DRAWN_PAGES)."""
    app = request.GET.get("app") or CROSS
    graph = gem.gem_graph(include_unreachable=True)
    drawn, total = _drawn_pages(graph, app)
    details = {pid: rest for pid, *rest in GemPage.objects.filter(id__in=drawn).values_list(
        "id", "screenshot_sha", "activity", "description")}
    nodes = []
    for pid in drawn:
        data = graph.nodes[pid]
        shot, activity, description = details.get(pid, ("", "", ""))
        nodes.append({"id": pid, "label": data["title"] or data["name"], "name": data["name"], "kind": data["kind"],
                      "app": data["app"], "depth": data["depth"], "is_start": data["is_start"],
                      "activity": activity, "description": description, "inputs": data["inputs"],
                      "outputs": data["outputs"], "screenshot": reverse("media", args=[shot]) if shot else None})
    keep = set(drawn)
    edges = [{"id": key, "source": u, "target": v, "via": data["via"], "kind": data["kind"],
              "action": data["action"], "usable": gem.edge_usable(data), "reason": data["reason"],
              "unreachable_until": data["unreachable_until"].isoformat() if data["unreachable_until"] else None}
             for u, v, key, data in graph.edges(keys=True, data=True) if u in keep and v in keep]
    note = (f"Showing {len(drawn)} of {total} pages (the shallowest); pick an app to see its own graph."
            if total > len(drawn) else "")
    return JsonResponse({"app": app, "nodes": nodes, "edges": edges, "total_pages": total,
                         "truncated": total > len(drawn), "note": note})


@role_required(MANAGER)
def gem_path_json(request):
    """The shortest usable path between two pages: ?source=<page id>&target=<page id>."""
    try:
        source, target = int(request.GET["source"]), int(request.GET["target"])
    except (KeyError, ValueError):
        return HttpResponseBadRequest("source and target are page ids")
    graph = gem.gem_graph()
    if source not in graph or target not in graph:
        return JsonResponse({"path": None, "reason": "no such page"}, status=404)
    path = gem.shortest_path(source, target, graph)
    if path is None:
        return JsonResponse({"path": None, "nodes": [], "steps": [],
                             "reason": "no usable path (an edge may be unreachable for now)"})
    nodes, hops = [source], []
    for eid in path:
        u, v, data = next((u, v, d) for u, v, k, d in graph.out_edges(nodes[-1], keys=True, data=True) if k == eid)
        nodes.append(v)
        hops.append((eid, u, v, data))
    names = App.display_labels(graph.nodes[v]["app"] for _e, _u, v, _d in hops)
    # Each step with its words ("text"), which the page shows; the action stays for programs.
    steps = [{"edge": eid, "from": graph.nodes[u]["title"] or graph.nodes[u]["name"],
              "to": graph.nodes[v]["title"] or graph.nodes[v]["name"], "via": data["via"], "action": data["action"],
              "text": edge_words(data["via"], data["action"], names.get(graph.nodes[v]["app"], ""))}
             for eid, u, v, data in hops]
    return JsonResponse({"path": path, "nodes": nodes, "steps": steps})


# -- device priors --------------------------------------------------------------------------------

class DevicePriorForm(forms.ModelForm):
    settings_path = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 5}),
        help_text='One label per line ("Settings", "Display", "Dark mode"), or a JSON list of '
                  'query-format steps ([{"action": "click", "target": {"text": "Display"}}]).')

    class Meta:
        model = DevicePrior
        fields = ["device_model", "os_version", "app", "function", "exists", "settings_path", "note"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["app"].required = False
        if self.instance.pk and self.instance.settings_path and not self.is_bound:
            path = self.instance.settings_path
            self.initial["settings_path"] = ("\n".join(path) if all(isinstance(s, str) for s in path)
                                             else json.dumps(path, ensure_ascii=False))

    def clean_settings_path(self):
        text = self.cleaned_data.get("settings_path", "").strip()
        if not text:
            return []
        if text.startswith("["):
            try:
                steps = json.loads(text)
            except json.JSONDecodeError as error:
                raise forms.ValidationError(f"not valid JSON: {error.msg} (line {error.lineno})") from error
            if not isinstance(steps, list) or not all(
                    isinstance(s, str) or (isinstance(s, dict) and isinstance(s.get("action"), str)) for s in steps):
                raise forms.ValidationError('a JSON list of labels or of steps with an "action"')
            return steps
        return [line.strip() for line in text.splitlines() if line.strip()]


@role_required(MANAGER)
def prior_list(request):
    """Everyone on the GEM page reads the priors; admins add them here."""
    form = None
    if has_role(request.user, ADMIN):
        form = DevicePriorForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            prior = form.save(commit=False)
            prior.created_by = request.user
            prior.save()
            messages.success(request, f"Added the prior: {prior}.")
            return redirect("gem-priors")
    elif request.method == "POST":
        raise PermissionDenied("Only admins enter device priors.")
    priors = DevicePrior.objects.select_related("app", "created_by")
    return render(request, "flywheel/gem_priors.html", {"priors": priors, "form": form})


@role_required(ADMIN)
def prior_edit(request, pk):
    prior = get_object_or_404(DevicePrior, pk=pk)
    form = DevicePriorForm(request.POST or None, instance=prior)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Saved the prior: {prior}.")
        return redirect("gem-priors")
    return render(request, "flywheel/gem_prior_form.html", {"form": form, "prior": prior})


@role_required(ADMIN)
@require_POST
def prior_delete(request, pk):
    prior = get_object_or_404(DevicePrior, pk=pk)
    label = str(prior)
    prior.delete()
    messages.success(request, f"Deleted the prior: {label}.")
    return redirect("gem-priors")
