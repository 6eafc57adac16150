"""A real browser logs in as each role and sees that role's home page."""
import pytest

from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)

HOMES = {
    "annotator": ("/queue/", "My queue"),
    "adjudicator": ("/adjudication/", "Undetermined trajectories"),
    "manager": ("/dashboard/", "Dashboard"),
    "admin": ("/console-admin/", "Administration"),
}


def test_each_role_logs_in_and_sees_its_home(role_users, asgi_server, browser):
    for role, (path, heading) in HOMES.items():
        page = browser.new_page()
        page.goto(asgi_server + "/")
        assert "/login/" in page.url
        page.fill("input[name=username]", role_users[role].username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(asgi_server + path)
        assert page.locator("h1").first.inner_text() == heading
        assert role in page.get_by_test_id("whoami").inner_text()
        # htmx is served locally, never from a CDN
        assert page.evaluate("typeof window.htmx") == "object"
        page.close()


def test_wrong_password_is_refused(role_users, asgi_server, browser):
    page = browser.new_page()
    page.goto(asgi_server + "/login/")
    page.fill("input[name=username]", "manager-user")
    page.fill("input[name=password]", "wrong")
    page.click("button[type=submit]")
    assert "didn't match" in page.content()
    page.close()
