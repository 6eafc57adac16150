"""Every page and API route refuses anonymous users and users of a wrong role."""
import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from accounts.roles import ROLES

pytestmark = pytest.mark.django_db

# The only routes open to everyone: logging in/out, the monitoring probe, static assets (the icon).
# The one-time password links are opened signed out: the token in the link is the check.
PUBLIC = {"login/", "logout/", "healthz", "favicon.ico", "password/<uidb64>/<token>/", "password/done/"}


def all_routes(patterns=None, prefix=""):
    for entry in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            yield from all_routes(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry.callback


def concrete(route):
    """Turn a route pattern into a URL we can request."""
    url = re.sub(r"\(\?P<\w+>[^)]*\)", "1", route.replace("^", "").replace("$", ""))
    url = re.sub(r"<(\w+:)?\w+>", "1", url)
    return "/" + url.replace("\\", "")


def console_routes():
    for route, callback in all_routes():
        if route.startswith("admin/") or route in PUBLIC or "format" in route:
            continue
        yield concrete(route), callback


def allowed_roles(callback):
    view_class = getattr(callback, "cls", None)
    if view_class is not None:
        read = getattr(view_class, "read_roles", ROLES)
        return set(read)
    return set(getattr(callback, "required_roles", ROLES))


def test_route_table_is_not_empty():
    urls = [url for url, _ in console_routes()]
    assert "/dashboard/" in urls and "/api/queries/" in urls and "/api/schema/" in urls


def test_anonymous_users_are_refused_everywhere(client):
    for url, _ in console_routes():
        response = client.get(url)
        if url.startswith("/api/") or url == "/metrics":  # a program's endpoint: no login page to go to
            assert response.status_code in (401, 403), url
        else:
            assert response.status_code == 302 and "/login/" in response["Location"], url


def test_wrong_roles_are_refused(client_as):
    checked = 0
    for url, callback in console_routes():
        allowed = allowed_roles(callback)
        for role in ROLES:
            if role == "admin" or role in allowed:
                continue
            response = client_as(role).get(url)
            assert response.status_code == 403, (url, role, response.status_code)
            checked += 1
    assert checked > 30


def test_users_without_a_role_are_refused(client_as):
    client = client_as(None)
    assert client.get("/api/queries/").status_code == 403
    assert client.get("/dashboard/").status_code == 403
    assert client.get("/").status_code == 403


def test_api_writes_need_the_acting_role(client_as):
    body = {"package": "com.example", "label": "Example"}
    assert client_as("annotator").post("/api/apps/", body).status_code == 403
    assert client_as("manager").post("/api/apps/", body).status_code == 201
    assert client_as("annotator").get("/api/apps/").status_code == 200


def test_each_role_lands_on_its_home(client_as):
    homes = {"annotator": "/queue/", "adjudicator": "/adjudication/", "manager": "/dashboard/",
             "admin": "/console-admin/"}
    for role, home in homes.items():
        response = client_as(role).get("/")
        assert response.status_code == 302 and response["Location"] == home, role
        assert client_as(role).get(home).status_code == 200


def test_schema_and_docs_are_served(client_as):
    client = client_as("manager")
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/queries/import/" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()
