"""GEM path queries over a GEM built in the database (shaped as exploration writes it)."""
import hashlib
import json
from datetime import timedelta

import networkx as nx
import pytest
from django.utils import timezone

from devices.models import Device
from flywheel.models import App, DevicePrior, Edge, GemPage
from flywheel.queries.gem import graph as gem

pytestmark = pytest.mark.django_db
LAUNCHER = "com.sim.launcher"


# -- factories (the other GEM test modules use them too) -------------------------------------------

def make_app(package, system=False, label=""):
    return App.objects.get_or_create(package=package, defaults={"is_system": system, "label": label or package})[0]


def make_page(app, name, kind="page", is_start=False, depth=0, title=None, inputs=(), outputs=(), **fields):
    return GemPage.objects.create(app=app, name=name, kind=kind, is_start=is_start, depth=depth,
                                  title=name.replace("_", " ").title() if title is None else title,
                                  inputs=list(inputs), outputs=list(outputs), **fields)


def tap(resource_id):
    return {"action": "click", "target": {"resource_id": resource_id}}


def make_edge(source, target, via="tap", action=None, **fields):
    if action is None:
        action = {"home": {"action": "system_button", "button": "home"},
                  "back": {"action": "system_button", "button": "back"},
                  "launch": {"action": "open", "app": target.app.package}}.get(via) or tap(f"x:id/{target.name}")
    kind = "cross" if source.app_id != target.app_id else "intra"
    key = hashlib.sha1((via + json.dumps(action, sort_keys=True)).encode()).hexdigest()[:40]
    return Edge.objects.create(source=source, target=target, via=via, kind=kind, action=action, action_key=key,
                               **fields)


def build_world():
    """Two apps and a launcher:
    notes: home(start) -> search -> note, home -> folders -> search (a longer way), home -> editor (fab),
           note -> editor, editor -back-> home, home -home-> launcher
    shop:  start -> product (yields a product title), start -> shop search (takes a keyword);
           product -home-> launcher; launcher -launch-> both apps; an unconnected page."""
    launcher_app, notes, shop = make_app(LAUNCHER, system=True), make_app("com.sim.notes"), make_app("com.sim.shop")
    p = {"launcher": make_page(launcher_app, "launcher", kind="launcher", is_start=True),
         "home": make_page(notes, "home", is_start=True, title="Notes"),
         "search": make_page(notes, "search", depth=1, inputs=["text: search keyword"]),
         "folders": make_page(notes, "folders", depth=1),
         "note": make_page(notes, "note", depth=2, outputs=["text: note body"]),
         "editor": make_page(notes, "editor", depth=1, inputs=["text: note title", "text: note body"]),
         "shop": make_page(shop, "shop_home", is_start=True),
         "product": make_page(shop, "product", depth=1, outputs=["text: product title", "amount: price"]),
         "shop_search": make_page(shop, "shop_search", depth=1, inputs=["text: search keyword"]),
         "cart": make_page(shop, "cart", depth=1, inputs=["number: quantity"]),
         "island": make_page(shop, "island", depth=5)}
    e = {"home>search": make_edge(p["home"], p["search"]),
         "search>note": make_edge(p["search"], p["note"]),
         "home>folders": make_edge(p["home"], p["folders"]),
         "folders>search": make_edge(p["folders"], p["search"], action=tap("x:id/folder_search")),
         "home>editor": make_edge(p["home"], p["editor"], action=tap("com.sim.notes:id/fab_add")),
         "note>editor": make_edge(p["note"], p["editor"], action=tap("x:id/edit_note")),
         "editor>home": make_edge(p["editor"], p["home"], via="back"),
         "home>launcher": make_edge(p["home"], p["launcher"], via="home"),
         "launcher>home": make_edge(p["launcher"], p["home"], via="launch"),
         "launcher>shop": make_edge(p["launcher"], p["shop"], via="launch"),
         "shop>product": make_edge(p["shop"], p["product"]),
         "shop>search": make_edge(p["shop"], p["shop_search"]),
         "shop>cart": make_edge(p["shop"], p["cart"]),
         "product>launcher": make_edge(p["product"], p["launcher"], via="home")}
    return p, e


@pytest.fixture
def world():
    return build_world()


def ids(*edges):
    return [edge.pk for edge in edges]


# -- path queries ------------------------------------------------------------------------------------

def test_shortest_path_reachability_and_steps(world):
    p, e = world
    assert gem.shortest_path(p["home"].pk, p["note"].pk) == ids(e["home>search"], e["search>note"])
    assert gem.shortest_path(p["note"].pk, p["note"].pk) == []
    assert gem.reachable(p["editor"].pk, p["note"].pk)          # back to home, then search
    assert not gem.reachable(p["home"].pk, p["island"].pk)
    assert gem.shortest_path(p["home"].pk, p["island"].pk) is None
    assert gem.shortest_path(p["home"].pk, 10 ** 9) is None
    assert gem.path_to_page(p["note"].pk) == ids(e["home>search"], e["search>note"])
    assert gem.path_to_page(p["home"].pk) == []
    assert gem.known_path_steps(ids(e["home>editor"], e["editor>home"])) == [
        tap("com.sim.notes:id/fab_add"), {"action": "system_button", "button": "back"}]
    with pytest.raises(ValueError, match="no longer exists"):
        gem.known_path_steps([10 ** 9])


def test_graph_attributes_and_app_filter(world):
    p, e = world
    graph = gem.gem_graph()
    assert graph.nodes[p["product"].pk]["outputs"] == ["text: product title", "amount: price"]
    assert graph.nodes[p["launcher"].pk]["kind"] == "launcher"
    data = graph.edges[p["home"].pk, p["editor"].pk, e["home>editor"].pk]
    assert data["via"] == "tap" and data["action"] == tap("com.sim.notes:id/fab_add")
    assert graph.edges[p["launcher"].pk, p["shop"].pk, e["launcher>shop"].pk]["kind"] == "cross"
    notes_only = gem.gem_graph(app_packages=["com.sim.notes"])
    assert set(notes_only.nodes) == {p[n].pk for n in ("home", "search", "folders", "note", "editor")}
    assert gem.shortest_path(p["home"].pk, p["shop"].pk, graph=notes_only) is None


def test_unreachable_edges_are_left_out_until_their_time_passes(world):
    p, e = world
    broken = e["home>search"]
    Edge.objects.filter(pk=broken.pk).update(reachable=False, unreachable_until=timezone.now() + timedelta(hours=1),
                                             unreachable_reason="network error")
    # The longer way round through folders is taken instead.
    assert gem.shortest_path(p["home"].pk, p["note"].pk) == ids(e["home>folders"], e["folders>search"], e["search>note"])
    assert broken.pk in gem.blocked_edges()
    assert not gem.gem_graph().has_edge(p["home"].pk, p["search"].pk, broken.pk)
    full = gem.gem_graph(include_unreachable=True)
    assert not gem.edge_usable(full.edges[p["home"].pk, p["search"].pk, broken.pk])
    # Without the folders way, the note is out of reach.
    Edge.objects.filter(pk=e["folders>search"].pk).update(reachable=False, unreachable_until=None)
    assert not gem.reachable(p["home"].pk, p["note"].pk)
    # Once the cool-down has passed, the edge is usable again (and due for re-check).
    Edge.objects.filter(pk=broken.pk).update(unreachable_until=timezone.now() - timedelta(seconds=1))
    assert gem.shortest_path(p["home"].pk, p["note"].pk) == ids(e["home>search"], e["search>note"])
    assert broken.pk not in gem.blocked_edges() and e["folders>search"].pk in gem.blocked_edges()


def test_cross_app_path_goes_through_the_launcher(world):
    p, e = world
    path = gem.cross_app_path(p["product"].pk, p["editor"].pk)
    assert path == ids(e["product>launcher"], e["launcher>home"], e["home>editor"])
    vias = dict(Edge.objects.filter(id__in=path).values_list("id", "via"))
    assert [vias[eid] for eid in path] == ["home", "launch", "tap"]
    Edge.objects.filter(pk=e["launcher>home"].pk).update(reachable=False)
    assert gem.cross_app_path(p["product"].pk, p["editor"].pk) is None


def test_compatible_endpoints_match_outputs_to_other_apps_inputs(world):
    p, _ = world
    found = gem.compatible_endpoints(p["product"].pk)
    pages = [page for page, _ in found]
    # A product title can be a note's title (shared word after synonyms) and can be typed into a
    # search box or a note body (free text); the shop's own search and a number input cannot.
    assert (p["editor"].pk, "text: note title") in found and (p["search"].pk, "text: search keyword") in found
    assert pages.index(p["editor"].pk) == 0  # "title" meets "title": the best match first
    assert p["shop_search"].pk not in pages and p["cart"].pk not in pages
    assert gem.compatible_endpoints(p["island"].pk) == []
    assert gem.io_match("amount: price", "text: note body") == 0
    assert gem.io_match("text: place name", "text: destination address") > 0.5


def test_cached_graph_is_reused_until_the_tables_change(world):
    p, e = world
    first = gem.gem_graph()
    assert gem.gem_graph() is first
    with pytest.raises(nx.NetworkXError, match="Frozen"):  # callers cannot change the shared graph
        first.add_edge(1, 2)
    make_edge(p["note"], p["home"], via="back")
    second = gem.gem_graph()
    assert second is not first and second.number_of_edges() == first.number_of_edges() + 1
    GemPage.objects.filter(pk=p["island"].pk).update(last_seen_at=timezone.now())
    assert gem.gem_graph() is not second


# -- device priors ------------------------------------------------------------------------------------

def test_priors_apply_by_model_and_os_version_most_specific_first():
    settings_app = make_app("com.android.settings", system=True)
    phone = Device(serial="s1", adb_server="x:1", model="Pixel 7", os_version="14.1")
    generic = DevicePrior.objects.create(app=settings_app, function="display/dark mode", exists=True)
    pixel = DevicePrior.objects.create(device_model="pixel 7", os_version="14", app=settings_app,
                                       function="display/dark mode", exists=False,
                                       settings_path=["Settings", "Display"])
    DevicePrior.objects.create(device_model="Galaxy S23", app=settings_app, function="display/edge panels")
    DevicePrior.objects.create(os_version="13", app=settings_app, function="display/old thing")
    assert gem.priors_for(phone) == [pixel, generic]
    assert gem.function_exists(phone, "com.android.settings", "display/dark mode") is False
    assert gem.function_exists(phone, "com.android.settings", "dark mode") is False
    other = Device(serial="s2", adb_server="x:1", model="Galaxy S23", os_version="14")
    assert gem.function_exists(other, "com.android.settings", "display/dark mode") is True
    assert gem.function_exists(other, "com.android.settings", "display/edge panels") is True
    assert gem.function_exists(phone, "com.android.settings", "display/edge panels") is None
    assert gem.function_exists(other, "com.sim.notes", "display/dark mode") is None


def test_the_fast_build_equals_a_graph_built_through_networkx(world):
    _, e = world
    Edge.objects.filter(pk=e["shop>cart"].pk).update(reachable=False, unreachable_reason="down")
    built = gem.gem_graph(include_unreachable=True)
    reference = nx.MultiDiGraph()
    reference.add_nodes_from(built.nodes(data=True))
    for edge in Edge.objects.all():
        reference.add_edge(edge.source_id, edge.target_id, key=edge.pk, kind=edge.kind, via=edge.via,
                           action=edge.action, reachable=edge.reachable, unreachable_until=edge.unreachable_until,
                           reason=edge.unreachable_reason)
    assert nx.utils.graphs_equal(built, reference)
    assert sorted(built.in_edges(e["shop>cart"].target_id, keys=True)) == sorted(
        reference.in_edges(e["shop>cart"].target_id, keys=True))
    assert not gem.gem_graph().has_edge(e["shop>cart"].source_id, e["shop>cart"].target_id)


def test_paths_prefer_home_and_launch_over_recents_and_never_take_the_clipboard():
    launcher_app, notes, shop = make_app(LAUNCHER, system=True), make_app("com.sim.notes"), make_app("com.sim.shop")
    launcher = make_page(launcher_app, "launcher", kind="launcher", is_start=True)
    recents = make_page(launcher_app, "recents", kind="recents")
    note, shop_home = make_page(notes, "note", is_start=True), make_page(shop, "shop_home", is_start=True)
    basket = make_page(shop, "basket", depth=1, inputs=["text: search keyword"])
    # Via recents: note → recents → shop (2 steps, but only with a history); via Home: 2 steps too.
    make_edge(note, recents, via="recents", action={"action": "system_button", "button": "recents"})
    make_edge(recents, shop_home, via="recents", action={"action": "click", "target": {"text": "Shop"}})
    make_edge(note, launcher, via="home")
    make_edge(launcher, shop_home, via="launch")
    pasted = make_edge(note, basket, via="clipboard",
                       action={"action": "long_press", "target": {"resource_id": "x:id/q"}, "note": "paste"})
    path = gem.shortest_path(note.pk, shop_home.pk)
    assert [Edge.objects.get(pk=pk).via for pk in path] == ["home", "launch"]
    # The clipboard edge is data flow, not a step: the only way to the basket is through the shop.
    assert gem.shortest_path(note.pk, basket.pk) is None and not gem.reachable(note.pk, basket.pk)
    assert pasted.pk in {key for _u, _v, key in gem.gem_graph().edges(keys=True)}
