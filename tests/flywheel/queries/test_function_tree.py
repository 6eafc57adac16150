"""Function trees built from a hand-made GEM: shape, names, leaves, reuse, merging with declared
nodes and people's decisions, and the editing services."""
import base64
import hashlib
import json

import pytest

from flywheel.blobs import store_blob
from flywheel.models import App, Edge, FunctionNode, GemPage, ModelVersion, Query
from flywheel.queries.function_tree import builder as ft
from flywheel.queries.jsonl import import_queries
from tests.flywheel.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db
PACKAGE = "com.test.maps"


def element(text=None, rid=None, cls="android.widget.Button", clickable=True, editable=False, desc=None):
    selector = {}
    if rid:
        selector["resource_id"] = f"{PACKAGE}:id/{rid}"
    if text:
        selector["text"] = text
    if desc:
        selector["content_desc"] = desc
    return {"selector": selector, "text": text or "", "class": cls, "bounds": [0, 0, 100, 50],
            "clickable": clickable, "editable": editable}


def tap(source, target, **selector):
    if "rid" in selector:
        selector = {"resource_id": f"{PACKAGE}:id/{selector.pop('rid')}", **selector}
    action = {"action": "click", "target": selector}
    key = hashlib.sha1(("tap" + json.dumps(action, sort_keys=True)).encode()).hexdigest()[:40]
    return Edge.objects.create(source=source, target=target, kind="intra", via="tap", action=action, action_key=key)


def make_gem(package=PACKAGE):
    """A maps app: Home → Settings → {Offline packs, Display → Font size}; Home → Downloads → Offline
    packs (a second path); Home ⇄ Saved (a tab bar); plus back and upward edges that are not paths."""
    app = App.objects.create(package=package, label="Maps")

    def page(name, title, depth, elements, **extra):
        return GemPage.objects.create(app=app, name=name, title=title, depth=depth, elements=elements,
                                      texts=[title, *[e["text"] for e in elements if e["text"]]], **extra)

    tabs = [element("Home", "tab_home", "android.widget.TextView"), element("Saved", "tab_saved", "android.widget.TextView")]
    home = page("home", "Maps", 0, [element("Settings", "settings"), element("Downloads", "downloads"),
                                    element(None, "search_box", "android.widget.EditText", editable=True), *tabs],
                is_start=True)
    settings = page("settings", "Settings", 1, [element(None, desc="Navigate up", cls="android.widget.ImageButton"),
                                                element("Offline packs  ›", "offline", "android.widget.TextView"),
                                                element("DISPLAY", "display", "android.widget.TextView")])
    downloads = page("downloads", "Downloads", 1, [element("Offline packs", "dl_offline", "android.widget.TextView"),
                                                   *[element(city, "row", "android.widget.TextView")
                                                     for city in ("Paris", "Rome", "Oslo")]])
    saved = page("saved", "Saved", 1, [*tabs, element("Clear all", "clear_all")])
    offline = page("offline", "Offline packs", 2, [element("Download", "download"), element("Delete all", "delete_all"),
                                                    element("€ 4.99", "price", "android.widget.TextView"),
                                                    element("Settings", "to_settings", "android.widget.TextView")])
    display = page("display", "Display", 2, [element("Dark mode", "dark", "android.widget.Switch"),
                                             element("Font size", "font", "android.widget.TextView")])
    font = page("font", "Font size", 3, [element(None, desc="Navigate up", cls="android.widget.ImageButton")])
    tap(home, settings, text="Settings")
    tap(home, downloads, rid="downloads")
    tap(home, saved, rid="tab_saved")
    tap(saved, home, rid="tab_home")                 # the tab bar: back to the start, not a new path
    tap(settings, offline, rid="offline")
    tap(downloads, offline, rid="dl_offline")        # the second path to Offline packs
    tap(settings, display, rid="display")
    tap(display, font, rid="font")
    tap(offline, settings, rid="to_settings")        # upward: not another path to Settings
    Edge.objects.create(source=offline, target=downloads, via="back", action={"action": "system_button", "button": "back"},
                        action_key="back")
    return app, {p.name: p for p in GemPage.objects.filter(app=app)}


def node(app, path):
    return FunctionNode.objects.get(app=app, path=path)


def tree_of(app):
    return {n.path: (n.label, n.is_leaf, n.reuse_of.path if n.reuse_of else None)
            for n in FunctionNode.objects.filter(app=app).select_related("reuse_of")}


def test_the_tree_mirrors_navigation_with_human_names_leaves_and_a_reuse_node():
    app, pages = make_gem()
    summary = ft.build_tree_from_gem(app)

    assert tree_of(app) == {
        "settings": ("Settings", False, None),
        "settings/offline_packs": ("Offline packs", False, None),
        "settings/offline_packs/download": ("Download", True, None),
        "settings/offline_packs/delete_all": ("Delete all", True, None),
        "settings/display": ("Display", False, None),
        "settings/display/font_size": ("Font size", True, None),
        "settings/display/dark_mode": ("Dark mode", True, None),
        "downloads": ("Downloads", False, None),
        "downloads/offline_packs": ("Offline packs", False, "settings/offline_packs"),
        "saved": ("Saved", False, None),
        "saved/clear_all": ("Clear all", True, None),
    }
    assert node(app, "settings/offline_packs").page == pages["offline"]
    assert node(app, "downloads/offline_packs").page == pages["offline"]
    assert node(app, "settings/display/dark_mode").page == pages["display"]  # an action: done on its page
    assert not FunctionNode.objects.filter(app=app, children__isnull=False, reuse_of__isnull=False).exists()
    assert set(FunctionNode.objects.filter(app=app).values_list("origin", "status").distinct()) == {("explored", "proposed")}
    assert summary == {"created": 11, "linked": 0, "reuse": 1, "leaves": 5, "origin": "explored", "problems": []}
    assert sorted(ft.leaves(app).values_list("path", flat=True)) == [
        "saved/clear_all", "settings/display/dark_mode", "settings/display/font_size",
        "settings/offline_packs/delete_all", "settings/offline_packs/download"]


def test_a_rebuild_creates_nothing_new_and_an_app_without_pages_says_what_to_do():
    app, _ = make_gem()
    ft.build_tree_from_gem(app)
    before = tree_of(app)
    again = ft.build_tree_from_gem(app)
    assert tree_of(app) == before and again["created"] == 0 and again["reuse"] == 0
    empty = ft.build_tree_from_gem(App.objects.create(package="com.test.empty"))
    assert empty["created"] == 0 and "run an exploration" in empty["problems"][0]


def test_declared_functions_are_linked_not_duplicated():
    app, pages = make_gem()
    import_queries(json.dumps({"key": "dl", "text": "Download the offline pack", "apps": [PACKAGE], "tier": "L2",
                               "functions": [f"{PACKAGE}:settings/offline_packs/download", f"{PACKAGE}:dark_mode"],
                               "verification": {"terminal": []}}))
    summary = ft.build_tree_from_gem(app)

    download = node(app, "settings/offline_packs/download")
    assert download.origin == "declared" and download.status == "approved" and download.page == pages["offline"]
    assert node(app, "settings").page == pages["settings"]
    dark = FunctionNode.objects.filter(app=app, label__iexact="dark mode")
    assert [n.path for n in dark] == ["dark_mode"]  # the declared leaf, linked where it was declared
    assert dark[0].page == pages["display"]
    assert summary["linked"] == 4  # settings, offline_packs, download, dark_mode
    assert FunctionNode.objects.filter(app=app).count() == 11
    assert list(Query.objects.get(key="dl").functions.order_by("path").values_list("path", flat=True)) == [
        "dark_mode", "settings/offline_packs/download"]


def test_a_persons_decisions_survive_a_rebuild(role_users):
    person = role_users["manager"]
    app, pages = make_gem()
    ft.build_tree_from_gem(app)
    ft.rename(node(app, "settings"), "Preferences", person)
    ft.approve(node(app, "settings"), person)
    ft.delete(node(app, "saved/clear_all"), person)
    ft.reparent(node(app, "settings/display"), node(app, "downloads"), person)
    ft.merge(node(app, "settings/offline_packs/delete_all"), node(app, "settings/offline_packs/download"), person)
    # exploration found one more page below Display
    language = GemPage.objects.create(app=app, name="language", title="Language", depth=3)
    pages["display"].elements = [*pages["display"].elements, element("Language", "language", "android.widget.TextView")]
    pages["display"].save()
    tap(pages["display"], language, rid="language")

    summary = ft.build_tree_from_gem(app)

    settings = node(app, "settings")
    assert (settings.label, settings.status) == ("Preferences", "approved")
    assert node(app, "saved/clear_all").status == "pruned"
    assert node(app, "downloads/display").page == pages["display"]
    assert node(app, "downloads/display/language").status == "proposed"  # the new page, where Display now is
    assert not FunctionNode.objects.filter(app=app, path__startswith="settings/display").exists()
    merged = node(app, "settings/offline_packs/delete_all")
    assert merged.status == "pruned" and merged.merged_into == node(app, "settings/offline_packs/download")
    assert summary["created"] == 1
    from django.contrib.admin.models import LogEntry
    assert LogEntry.objects.filter(user=person, object_id=str(settings.pk)).count() == 2  # rename, approve


def test_merge_moves_queries_children_and_reuse(role_users):
    person = role_users["manager"]
    app, _ = make_gem()
    ft.build_tree_from_gem(app)
    query = Query.objects.create(key="q", text="Change the display", tier="L2")
    query.set_functions([node(app, "settings/display")])
    other = Query.objects.create(key="q2", text="Both", tier="L2")
    other.set_functions([node(app, "settings/display"), node(app, "settings")])

    ft.merge(node(app, "settings/display"), node(app, "settings"), person)

    display = node(app, "settings/display")
    assert display.status == "pruned" and display.merged_into == node(app, "settings")
    assert list(query.functions.values_list("path", flat=True)) == ["settings"]
    assert list(other.functions.values_list("path", flat=True)) == ["settings"]
    assert node(app, "settings/font_size").parent == node(app, "settings")
    assert node(app, "settings/dark_mode").is_leaf
    ft.merge(node(app, "settings/offline_packs"), node(app, "saved"), person)
    assert node(app, "downloads/offline_packs").reuse_of == node(app, "saved")
    with pytest.raises(ft.TreeEditError, match="merged"):
        ft.merge(display, node(app, "saved"), person)
    with pytest.raises(ft.TreeEditError, match="below"):
        ft.merge(node(app, "saved"), node(app, "saved/download"), person)


def test_delete_prunes_the_subtree_and_its_reuse_nodes_but_keeps_query_links(role_users):
    person = role_users["annotator"]
    app, _ = make_gem()
    ft.build_tree_from_gem(app)
    query = Query.objects.create(key="q", text="Download a pack", tier="L2")
    query.set_functions([node(app, "settings/offline_packs/download")])

    pruned = ft.delete(node(app, "settings"), person)

    assert pruned == 8  # settings and its 6 descendants, and the reuse node under Downloads
    assert set(FunctionNode.objects.filter(app=app, status="pruned").values_list("path", flat=True)) >= {
        "settings", "settings/display/dark_mode", "downloads/offline_packs"}
    # Downloads' only child is gone: Downloads is itself a function now
    assert list(ft.leaves(app).values_list("path", flat=True)) == ["downloads", "saved/clear_all"]
    assert list(query.functions.values_list("path", flat=True)) == ["settings/offline_packs/download"]
    ft.restore(node(app, "settings"), person)
    assert ft.leaves(app).count() == 5


def test_reparent_rewrites_the_subtree_paths_and_refuses_cycles(role_users):
    person = role_users["manager"]
    app, _ = make_gem()
    ft.build_tree_from_gem(app)
    ft.reparent(node(app, "settings/display"), node(app, "saved"), person)
    assert {n.path for n in FunctionNode.objects.filter(app=app, path__startswith="saved/display")} == {
        "saved/display", "saved/display/font_size", "saved/display/dark_mode"}
    assert not node(app, "saved").is_leaf
    assert node(app, "saved/display/font_size").parent == node(app, "saved/display")

    with pytest.raises(ft.TreeEditError, match="cycle"):
        ft.reparent(node(app, "saved"), node(app, "saved/display/font_size"), person)
    with pytest.raises(ft.TreeEditError, match="reuse"):
        ft.reparent(node(app, "saved"), node(app, "downloads/offline_packs"), person)
    ft.reparent(node(app, "saved/display"), None, person)  # to the top level
    assert node(app, "display/dark_mode").parent == node(app, "display")
    # a name already taken at the destination gets a suffix instead of clashing
    ft.reparent(node(app, "settings/offline_packs"), node(app, "downloads"), person)
    assert node(app, "downloads/offline_packs_2").label == "Offline packs"
    assert node(app, "downloads/offline_packs_2/download").is_leaf


def test_approve_subtree_and_rename_keep_paths(role_users):
    person = role_users["manager"]
    app, _ = make_gem()
    ft.build_tree_from_gem(app)
    assert ft.approve_subtree(node(app, "settings"), person) == 7
    assert FunctionNode.objects.filter(app=app, status="approved").count() == 7
    ft.rename(node(app, "settings/display/dark_mode"), "  Dark   theme ", person)
    renamed = node(app, "settings/display/dark_mode")
    assert renamed.label == "Dark theme"
    with pytest.raises(ft.TreeEditError, match="empty"):
        ft.rename(renamed, "   ", person)


def stub_model(stub):
    return ModelVersion.objects.create(name="tree-vlm", kind="endpoint", endpoint_url=stub.url,
                                       served_model_name=stub.model)


def test_a_vlm_extracts_the_tree_through_the_endpoint():
    app, pages = make_gem()
    png = b"\x89PNG\r\n\x1a\n settings screen"
    pages["settings"].screenshot_sha = store_blob(png, "png")
    pages["settings"].save()
    answer = {"functions": [
        {"label": "Map settings", "page": pages["settings"].pk, "kind": "page", "children": [
            {"label": "Offline maps", "page": pages["offline"].pk, "kind": "page",
             "children": [{"label": "Download region", "page": pages["offline"].pk, "kind": "action"}]}]},
        {"label": "Downloads", "page": pages["downloads"].pk, "children": [
            {"label": "Offline maps", "page": pages["offline"].pk, "reuse": True}]}]}
    with StubOpenAI() as stub:
        stub.replies.append((200, stub.chat_reply("Here it is:\n```json\n" + json.dumps(answer) + "\n```"), 0))
        summary = ft.build_tree_from_gem(app, model_version=stub_model(stub))
    sent = stub.requests[0]
    images = [part["image_url"]["url"] for part in sent["messages"][1]["content"] if part["type"] == "image_url"]
    assert [base64.b64decode(url.split(",", 1)[1]) for url in images] == [png]  # the one page with a screenshot
    assert f"Page {pages['offline'].pk}" in json.dumps(sent)
    assert summary["origin"] == "vlm" and summary["problems"] == []
    assert tree_of(app) == {
        "map_settings": ("Map settings", False, None),
        "map_settings/offline_maps": ("Offline maps", False, None),
        "map_settings/offline_maps/download_region": ("Download region", True, None),
        "downloads": ("Downloads", False, None),
        "downloads/offline_maps": ("Offline maps", False, "map_settings/offline_maps"),
    }
    assert set(FunctionNode.objects.filter(app=app).values_list("origin", flat=True)) == {"vlm"}


@pytest.mark.parametrize("reply", [
    (200, "not json at all", 0),
    ("chat", '{"functions": [{"page": 1}]}', 0),
    ("chat", '{"functions": [{"label": "Ghost", "page": 999999}]}', 0),
    (500, {"error": "down"}, 0),
])
def test_a_garbage_answer_falls_back_to_the_offline_tree_with_the_problem_recorded(reply):
    app, _ = make_gem()
    with StubOpenAI() as stub:
        status, body, delay = reply
        stub.replies.append((200, stub.chat_reply(body), 0) if status == "chat" else reply)
        summary = ft.build_tree_from_gem(app, model_version=stub_model(stub))
    assert summary["origin"] == "explored" and summary["created"] == 11
    assert len(summary["problems"]) == 1 and "built offline instead" in summary["problems"][0]
    assert FunctionNode.objects.filter(app=app, origin="vlm").count() == 0


def test_names_come_from_unique_titles_else_the_tapped_element_and_state_words_are_not_functions():
    app = App.objects.create(package="com.test.notes")

    def page(name, title, depth, elements, **extra):
        return GemPage.objects.create(app=app, name=name, title=title, depth=depth, elements=elements, **extra)

    row = {**element("Shopping list", "note_title", "android.widget.TextView")}
    home = page("home", "Notes", 0, [row, element("Settings", "settings")], is_start=True)
    note = page("note", "Note", 1, [element("Pin to top", "pin")])        # the list row's text is data
    # every other page's toolbar shows the app's name: the tapped element names them
    settings = page("settings", "Notes", 1, [element("ON", "previews_switch", "android.widget.Switch"),
                                             {**element("Show note previews", "previews_row", "android.widget.LinearLayout")}])
    tap(home, note, text="Shopping list")
    tap(home, settings, text="Settings")
    ft.build_tree_from_gem(app)
    assert tree_of(app) == {
        "note": ("Note", False, None), "note/pin_to_top": ("Pin to top", True, None),
        "settings": ("Settings", False, None),
        "settings/show_note_previews": ("Show note previews", True, None),  # not "ON"
    }


@pytest.mark.parametrize("raw, label", [("  OFFLINE PACKS  › ", "Offline packs"), ("€ 4.99", ""), ("wlan", "Wlan"),
                                        ("x" * 80, ""), ("离线地图", "离线地图")])
def test_human_labels(raw, label):
    from flywheel.queries.function_tree.labels import human_label, slug

    assert human_label(raw) == label
    if label:
        assert slug(label) and "/" not in slug(label)
