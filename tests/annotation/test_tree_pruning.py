"""The function-tree pruning page: who may see and do what, and each action through its endpoint."""
import pytest
from django.urls import reverse

from flywheel.blobs import store_blob
from flywheel.models import App, FunctionNode
from flywheel.queries.function_tree import builder as ft
from tests.flywheel.queries.test_function_tree import make_gem

pytestmark = pytest.mark.django_db
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40


@pytest.fixture
def built():
    app, pages = make_gem()
    pages["settings"].screenshot_sha = store_blob(PNG, "png")
    pages["settings"].save()
    ft.build_tree_from_gem(app)
    return app


def node(app, path):
    return FunctionNode.objects.get(app=app, path=path)


def act(client, app, path, action, htmx=True, **data):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    return client.post(reverse("function-tree-action", args=[app.pk, node(app, path).pk, action]), data, **headers)


@pytest.mark.parametrize("role, status", [("annotator", 200), ("manager", 200), ("admin", 200),
                                          ("adjudicator", 403), (None, 403)])
def test_who_sees_the_trees(client_as, built, role, status):
    client = client_as(role)
    assert client.get(reverse("function-trees")).status_code == status
    response = client.get(reverse("function-tree", args=[built.pk]))
    assert response.status_code == status
    if status == 200:
        html = response.content.decode()
        assert 'data-path="settings/offline_packs"' in html and "reuse of settings/offline_packs" in html
        assert ("Build from exploration" in html) == (role in ("manager", "admin"))


def test_the_list_shows_size_leaves_and_coverage_and_an_empty_state(client_as, built):
    html = client_as("manager").get(reverse("function-trees")).content.decode()
    assert "com.test.maps" in html and "0/5" in html
    App.objects.all().delete()
    empty = client_as("annotator").get(reverse("function-trees")).content.decode()
    assert 'data-testid="trees-empty"' in empty and "A manager builds trees" in empty


def test_build_is_for_managers_and_runs_here(client_as):
    app, _ = make_gem()
    url = reverse("function-tree-build", args=[app.pk])
    assert client_as("annotator").post(url).status_code == 403
    assert not FunctionNode.objects.filter(app=app).exists()
    response = client_as("manager").post(url, follow=True)
    assert response.redirect_chain[-1][0] == reverse("function-tree", args=[app.pk])
    assert "11 node(s) proposed" in response.content.decode()
    assert FunctionNode.objects.filter(app=app, status="proposed").count() == 11
    assert client_as("manager").get(url).status_code == 405


def test_annotators_prune_but_only_managers_approve(client_as, built):
    annotator = client_as("annotator")
    assert act(annotator, built, "settings", "approve").status_code == 403
    assert act(annotator, built, "settings", "approve-subtree").status_code == 403
    assert node(built, "settings").status == "proposed"
    response = act(annotator, built, "saved/clear_all", "delete")
    assert response.status_code == 200 and 'data-testid="tree-done"' in response.content.decode()
    assert node(built, "saved/clear_all").status == "pruned"
    manager = client_as("manager")
    assert act(manager, built, "settings", "approve-subtree").status_code == 200
    assert node(built, "settings/display/dark_mode").status == "approved"


def test_rename_merge_restore_and_reparent_through_the_endpoints(client_as, built):
    client = client_as("annotator")
    act(client, built, "settings/display", "rename", label="Screen")
    assert node(built, "settings/display").label == "Screen"
    act(client, built, "settings/offline_packs/delete_all", "merge", into=node(built, "settings/offline_packs/download").pk)
    assert node(built, "settings/offline_packs/delete_all").merged_into == node(built, "settings/offline_packs/download")
    act(client, built, "saved", "delete")
    act(client, built, "saved", "restore")
    assert node(built, "saved/clear_all").status == "approved"
    response = act(client, built, "settings/display", "reparent", parent=node(built, "downloads").pk)
    assert 'data-path="downloads/display/dark_mode"' in response.content.decode()
    act(client, built, "downloads/display", "reparent", parent="")
    assert node(built, "display").parent is None


def test_refusals_are_shown_in_the_tree_and_nothing_changes(client_as, built):
    client = client_as("manager")
    response = act(client, built, "settings", "reparent", parent=node(built, "settings/display/font_size").pk)
    html = response.content.decode()
    assert response.status_code == 200 and 'data-testid="tree-error"' in html and "cycle" in html
    assert node(built, "settings").parent is None
    assert "pick the node to merge into" in act(client, built, "settings", "merge").content.decode()
    assert "cannot be empty" in act(client, built, "settings", "rename", label=" ").content.decode()
    # without htmx the page redirects back with the message
    response = act(client, built, "settings", "merge", htmx=False, into=node(built, "settings").pk)
    assert response.status_code == 302
    assert act(client, built, "settings", "explode").status_code == 404


def test_every_post_checks_the_app_of_every_node(client_as, built):
    other, _ = make_gem("com.test.other")
    ft.build_tree_from_gem(other)
    client = client_as("manager")
    foreign = node(other, "settings")
    # a node of another app under this app's URL is not found
    url = reverse("function-tree-action", args=[built.pk, foreign.pk, "delete"])
    assert client.post(url, HTTP_HX_REQUEST="true").status_code == 404
    assert foreign.status == "proposed" and node(other, "settings").status == "proposed"
    # a target from another app is refused
    response = act(client, built, "saved", "merge", into=foreign.pk)
    assert "no such node" in response.content.decode()
    response = act(client, built, "saved", "reparent", parent=foreign.pk)
    assert "no such node" in response.content.decode() and node(built, "saved").parent is None


def test_posts_need_csrf(role_users, built):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(role_users["manager"])
    assert act(client, built, "settings", "approve").status_code == 403
    assert node(built, "settings").status == "proposed"


def test_page_screenshots_are_served_to_pruners_only(client_as, built):
    url = reverse("function-tree-shot", args=[built.pk, node(built, "settings").pk])
    response = client_as("annotator").get(url)
    assert response.status_code == 200 and response.content == PNG and response["Content-Type"] == "image/png"
    assert client_as("adjudicator").get(url).status_code == 403
    no_shot = reverse("function-tree-shot", args=[built.pk, node(built, "saved").pk])
    assert client_as("manager").get(no_shot).status_code == 404
    html = client_as("manager").get(reverse("function-tree", args=[built.pk])).content.decode()
    assert f'data-shot="{url}"' in html


def test_the_dashboard_shows_coverage_per_app(client_as, built):
    html = client_as("manager").get(reverse("dashboard-counts")).content.decode()
    assert 'data-testid="coverage-card"' in html and "0/5 leaves" in html
    assert reverse("function-tree", args=[built.pk]) in html


def _open_tree(browser, asgi_server, role_users, app, role="manager"):
    from tests.conftest import PASSWORD

    page = browser.new_page()
    page.goto(asgi_server + f"/login/?next=/function-trees/{app.pk}/")
    page.fill("input[name=username]", role_users[role].username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(asgi_server + f"/function-trees/{app.pk}/")
    return page


def row(page, path):
    return page.locator(f'li[data-path="{path}"] > .node-row')


@pytest.mark.django_db(transaction=True)
def test_drag_to_reparent_and_keyboard_pruning_in_a_browser(role_users, asgi_server, browser):
    app, _ = make_gem()
    ft.build_tree_from_gem(app)
    page = _open_tree(browser, asgi_server, role_users, app)

    # drag Display onto Saved: it moves there with its subtree
    page.drag_and_drop('li[data-path="settings/display"] > .node-row', 'li[data-path="saved"] > .node-row')
    row(page, "saved/display/dark_mode").wait_for(timeout=10_000)
    assert node(app, "saved/display").parent == node(app, "saved")

    # keyboard: select the first node, walk down with j, approve with a, rename with r
    row(page, "settings").click()
    page.keyboard.press("j")
    assert page.get_by_test_id("tree-selected").inner_text().startswith("Offline packs")
    page.keyboard.press("a")
    page.locator('li[data-path="settings/offline_packs"][data-status="approved"]').wait_for(timeout=10_000)
    page.keyboard.press("r")
    page.keyboard.press("Control+a")
    page.keyboard.type("Offline maps")
    page.keyboard.press("Enter")
    page.locator('li[data-path="settings/offline_packs"][data-label="Offline maps"]').wait_for(timeout=10_000)
    # the selection survives the swap: d deletes the same node and its subtree
    page.keyboard.press("d")
    page.locator('li[data-path="settings/offline_packs/download"][data-status="pruned"]').wait_for(timeout=10_000)
    # cut Saved (x), select Settings, paste under it (p)
    row(page, "saved").click()
    page.keyboard.press("x")
    row(page, "settings").click()
    page.keyboard.press("p")
    row(page, "settings/saved/display/font_size").wait_for(timeout=10_000)
    # a cycle is refused with a clear message
    row(page, "settings").click()
    page.keyboard.press("x")
    row(page, "settings/saved").click()
    page.keyboard.press("p")
    assert "cycle" in page.get_by_test_id("tree-error").inner_text(timeout=10_000)
    assert node(app, "settings").parent is None
    page.close()
