"""The GEM page, its JSON endpoints and the device priors page."""
from datetime import timedelta

import pytest
from django.utils import timezone

from flywheel.blobs import store_blob
from flywheel.models import DevicePrior, Edge, GemPage
from flywheel.queries.gem import views as gem_views
from tests.flywheel.queries.test_gem import build_world, make_app

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return build_world()


def test_only_managers_and_admins_see_the_gem(client, client_as, world):
    assert client.get("/gem/").status_code == 302  # to the login page
    for role in ("annotator", "adjudicator", None):
        browser = client_as(role)
        for url in ("/gem/", "/gem/graph.json", "/gem/path.json?source=1&target=2", "/gem/priors/"):
            assert browser.get(url).status_code == 403, (role, url)
    for role in ("manager", "admin"):
        page = client_as(role).get("/gem/")
        assert page.status_code == 200
        assert b"cytoscape.min.js" in page.content and b"js/gem_graph.js" in page.content
        assert b'data-graph-url="/gem/graph.json?app=cross"' in page.content


def test_empty_state_says_what_to_do(client_as):
    page = client_as("manager").get("/gem/")
    assert b"Run an exploration" in page.content and b"to build the GEM" in page.content
    assert b"gem_graph.js" not in page.content


def test_graph_json_per_app_and_across_apps(client_as, world):
    p, e = world
    shot = store_blob(b"\x89PNG fake screenshot", "png")
    GemPage.objects.filter(pk=p["home"].pk).update(screenshot_sha=shot, activity=".NotesListActivity")
    Edge.objects.filter(pk=e["home>search"].pk).update(
        reachable=False, unreachable_until=timezone.now() + timedelta(minutes=30), unreachable_reason="Env_ERROR: x")
    browser = client_as("manager")
    data = browser.get("/gem/graph.json?app=com.sim.notes").json()
    notes_pages = {p[n].pk for n in ("home", "search", "folders", "note", "editor")}
    drawn = {node["id"]: node for node in data["nodes"]}
    # The app's pages, plus the launcher its Home/launch edges reach; not the shop's pages.
    assert set(drawn) == notes_pages | {p["launcher"].pk}
    home = drawn[p["home"].pk]
    assert home["label"] == "Notes" and home["kind"] == "page" and home["is_start"]
    assert home["screenshot"] == f"/media/{shot}" and home["activity"] == ".NotesListActivity"
    assert drawn[p["editor"].pk]["inputs"] == ["text: note title", "text: note body"]
    edges = {edge["id"]: edge for edge in data["edges"]}
    assert edges[e["home>search"].pk]["usable"] is False and edges[e["home>search"].pk]["reason"] == "Env_ERROR: x"
    assert edges[e["home>editor"].pk]["usable"] is True and edges[e["home>launcher"].pk]["via"] == "home"
    assert e["launcher>shop"].pk not in edges and not data["truncated"]
    # The screenshot is served to the manager through the media view's access check.
    assert browser.get(home["screenshot"]).status_code == 200
    cross = browser.get("/gem/graph.json?app=cross").json()
    assert {node["id"] for node in cross["nodes"]} == {p[n].pk for n in ("launcher", "home", "shop", "product")}
    assert {edge["via"] for edge in cross["edges"] if edge["kind"] == "cross"} == {"home", "launch"}
    assert {edge["id"] for edge in cross["edges"]} >= {e["launcher>shop"].pk, e["product>launcher"].pk}


def test_graph_json_caps_huge_graphs_with_a_note(client_as, world, monkeypatch):
    monkeypatch.setattr(gem_views, "MAX_DRAWN_PAGES", 3)
    data = client_as("manager").get("/gem/graph.json?app=com.sim.notes").json()
    assert len(data["nodes"]) == 3 and data["truncated"] and data["total_pages"] == 6
    assert "Showing 3 of 6 pages" in data["note"]
    drawn = {node["id"] for node in data["nodes"]}
    assert all(edge["source"] in drawn and edge["target"] in drawn for edge in data["edges"])


def test_path_finder_answers_with_the_shortest_usable_path(client_as, world):
    p, e = world
    browser = client_as("manager")
    data = browser.get(f"/gem/path.json?source={p['product'].pk}&target={p['editor'].pk}").json()
    assert data["path"] == [e["product>launcher"].pk, e["launcher>home"].pk, e["home>editor"].pk]
    assert data["nodes"] == [p["product"].pk, p["launcher"].pk, p["home"].pk, p["editor"].pk]
    assert [step["via"] for step in data["steps"]] == ["home", "launch", "tap"]
    assert data["steps"][2]["action"] == {"action": "click", "target": {"resource_id": "com.sim.notes:id/fab_add"}}
    # ...and in words for the page: no JSON, no package id
    assert [step["text"] for step in data["steps"]] == ["press Home", "open Notes", 'tap "fab add"']
    none = browser.get(f"/gem/path.json?source={p['home'].pk}&target={p['island'].pk}").json()
    assert none["path"] is None and "no usable path" in none["reason"]
    assert browser.get("/gem/path.json?source=x&target=1").status_code == 400
    assert browser.get("/gem/path.json?source=999999&target=1").status_code == 404


def test_admins_enter_device_priors_managers_read_them(client_as):
    make_app("com.android.settings", system=True)
    settings_app = make_app("com.android.settings")
    manager = client_as("manager")
    assert b"An admin enters them" in manager.get("/gem/priors/").content
    assert manager.post("/gem/priors/", {"function": "x"}).status_code == 403
    admin = client_as("admin")
    response = admin.post("/gem/priors/", {"device_model": "Pixel 7", "os_version": "14", "app": settings_app.pk,
                                           "function": "display/dark mode", "exists": "on",
                                           "settings_path": "Settings\nDisplay\n\nDark theme", "note": "checked by hand"})
    assert response.status_code == 302
    prior = DevicePrior.objects.get()
    assert prior.settings_path == ["Settings", "Display", "Dark theme"] and prior.exists and prior.created_by.username == "admin-user"
    bad = admin.post("/gem/priors/", {"function": "y", "settings_path": "[{\"action\": }]"})
    assert bad.status_code == 200 and b"not valid JSON" in bad.content
    steps = '[{"action": "click", "target": {"text": "Display"}}]'
    response = admin.post(f"/gem/priors/{prior.pk}/", {"device_model": "Pixel 7", "os_version": "14", "app": "",
                                                        "function": "display/dark mode", "settings_path": steps})
    assert response.status_code == 302
    prior.refresh_from_db()
    assert prior.settings_path == [{"action": "click", "target": {"text": "Display"}}] and not prior.exists
    assert prior.app is None
    manager = client_as("manager")  # one test client: logging in again switches the user
    assert b"display/dark mode" in manager.get("/gem/priors/").content
    assert manager.post(f"/gem/priors/{prior.pk}/delete/").status_code == 403
    assert manager.get(f"/gem/priors/{prior.pk}/").status_code == 403
    admin = client_as("admin")
    assert admin.post(f"/gem/priors/{prior.pk}/delete/").status_code == 302
    assert not DevicePrior.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_graph_is_drawn_and_the_path_finder_highlights_a_path(role_users, asgi_server, browser):
    from tests.conftest import PASSWORD

    p, e = build_world()
    page = browser.new_page()
    page.goto(asgi_server + "/login/")
    page.fill("input[name=username]", role_users["manager"].username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(asgi_server + "/dashboard/")
    page.goto(asgi_server + "/gem/?app=com.sim.notes")
    page.wait_for_function("document.querySelectorAll('#gem-from option').length === 6")
    assert page.locator("#gem-graph canvas").count() > 0  # cytoscape drew it
    assert page.get_by_test_id("gem-note").inner_text() == "6 pages, 9 edges."
    page.select_option("#gem-from", str(p["home"].pk))
    page.select_option("#gem-to", str(p["note"].pk))
    page.keyboard.press("Escape")
    page.click("#gem-find")
    page.wait_for_function("document.querySelectorAll('#gem-path li').length === 2")
    steps = page.locator("#gem-path li").all_inner_texts()
    assert steps[0].startswith("Notes → Search: tap") and steps[1].startswith("Search → Note: tap"), steps
    assert not any("{" in step or "com.sim" in step for step in steps)
    # The path stays inside its card.
    box = page.locator("#gem-path").bounding_box()
    card = page.locator(".gem-side").bounding_box()
    assert box["x"] + box["width"] <= card["x"] + card["width"] + 1

    # The map keeps its layout between loads: the same positions, and a dragged node stays put.
    positions = "() => Object.fromEntries(window.gemCy.nodes().map((n) => [n.id(), n.position()]))"
    first = page.evaluate(positions)
    page.evaluate(f"() => {{ const n = window.gemCy.getElementById('{p['note'].pk}'); n.position({{x: 777, y: 555}});"
                  " n.emit('dragfree'); }")
    page.reload()
    page.wait_for_function("window.gemCy && window.gemCy.nodes().length === 6")
    again = page.evaluate(positions)
    assert again[str(p["note"].pk)] == {"x": 777, "y": 555}
    assert {k: v for k, v in again.items() if k != str(p["note"].pk)} == \
        {k: v for k, v in first.items() if k != str(p["note"].pk)}
    page.evaluate("() => window.localStorage.clear()")
    page.reload()
    page.wait_for_function("window.gemCy && window.gemCy.nodes().length === 6")
    assert page.evaluate(positions) == first, "the first layout is the same on any browser"
    page.close()
