"""The People page: only admins manage accounts; every action is recorded; an invitation's one-time
link sets the password, and then the person signs in with it."""
import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from accounts.models import PeopleEvent
from accounts.roles import user_roles
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def link_of(response) -> str:
    return re.search(r'value="(http[^"]+)"', response.content.decode()).group(1)


def test_only_admins_reach_the_people_page_and_its_actions(client, role_users):
    target = role_users["annotator"]
    for role in ("annotator", "adjudicator", "manager", None):
        client.force_login(role_users[role])
        assert client.get("/console-admin/people/").status_code == 403
        assert client.post("/console-admin/people/invite/", {"username": "x", "roles": ["annotator"]}).status_code == 403
        assert client.post(f"/console-admin/people/{target.pk}/roles/", {"roles": ["admin"]}).status_code == 403
        assert client.post(f"/console-admin/people/{target.pk}/active/", {"active": "0"}).status_code == 403
        assert client.post(f"/console-admin/people/{target.pk}/password/").status_code == 403
    target.refresh_from_db()
    assert target.is_active and user_roles(User.objects.get(pk=target.pk)) == {"annotator"}
    assert not User.objects.filter(username="x").exists() and not PeopleEvent.objects.exists()
    client.logout()
    assert client.get("/console-admin/people/").status_code == 302


def test_the_admin_home_links_the_people_page(client_as):
    page = client_as("admin").get("/console-admin/").content.decode()
    assert 'href="/console-admin/people/"' in page


def test_an_invitation_link_sets_the_password_once_and_the_person_signs_in(client, role_users):
    admin = role_users["admin"]
    client.force_login(admin)
    answer = client.post("/console-admin/people/invite/", {"username": "newcomer", "email": "n@example.org",
                                                           "roles": ["annotator", "adjudicator"]})
    assert answer.status_code == 200 and "newcomer is invited" in answer.content.decode()
    link = link_of(answer)
    person = User.objects.get(username="newcomer")
    assert person.email == "n@example.org" and not person.has_usable_password()
    assert user_roles(person) == {"annotator", "adjudicator"}
    event = PeopleEvent.objects.get()
    assert (event.actor, event.action, event.target, event.roles) == (
        admin, "invited", person, ["adjudicator", "annotator"])
    # A second invitation of the same name is refused and changes nothing.
    client.post("/console-admin/people/invite/", {"username": "NEWCOMER", "roles": ["annotator"]})
    assert User.objects.filter(username__iexact="newcomer").count() == 1 and PeopleEvent.objects.count() == 1

    client.logout()
    form = client.get(link, follow=True)  # Django moves the token into the session, then shows the form
    assert form.status_code == 200 and 'name="new_password1"' in form.content.decode()
    done = client.post(form.redirect_chain[-1][0], {"new_password1": "a long new secret", "new_password2": "a long new secret"})
    assert done.status_code == 302 and done["Location"] == "/password/done/"
    assert client.get(link, follow=True).content.decode().count('data-testid="link-used"') == 1  # once only
    signed_in = client.post("/login/", {"username": "newcomer", "password": "a long new secret"})
    assert signed_in.status_code == 302 and client.get(reverse("my-queue")).status_code == 200


def test_roles_active_and_password_links_are_set_and_recorded(client, role_users):
    admin, person = role_users["admin"], role_users["annotator"]
    client.force_login(admin)
    client.post(f"/console-admin/people/{person.pk}/roles/", {"roles": ["manager"]})
    assert user_roles(User.objects.get(pk=person.pk)) == {"manager"}
    client.post(f"/console-admin/people/{person.pk}/roles/", {})  # no role at all: refused
    assert user_roles(User.objects.get(pk=person.pk)) == {"manager"}

    client.post(f"/console-admin/people/{person.pk}/active/", {"active": "0"})
    person.refresh_from_db()
    assert not person.is_active
    assert client.post(f"/console-admin/people/{person.pk}/password/").status_code == 302  # reactivate first
    client.post(f"/console-admin/people/{person.pk}/active/", {"active": "1"})
    person.refresh_from_db()
    assert person.is_active
    answer = client.post(f"/console-admin/people/{person.pk}/password/")
    assert answer.status_code == 200 and "/password/" in link_of(answer)

    # An admin cannot deactivate themselves, nor drop their own admin role.
    client.post(f"/console-admin/people/{admin.pk}/active/", {"active": "0"})
    client.post(f"/console-admin/people/{admin.pk}/roles/", {"roles": ["manager"]})
    admin.refresh_from_db()
    assert admin.is_active and "admin" in user_roles(User.objects.get(pk=admin.pk))

    actions = list(PeopleEvent.objects.order_by("pk").values_list("action", "actor__username", "target_username"))
    assert actions == [("roles_set", "admin-user", "annotator-user"), ("deactivated", "admin-user", "annotator-user"),
                       ("reactivated", "admin-user", "annotator-user"), ("password_link", "admin-user", "annotator-user")]
    page = client.get("/console-admin/people/").content.decode()
    assert 'data-testid="people-events"' in page and "New password link" in page


def test_a_password_link_works_and_the_old_password_until_then(client, role_users):
    admin, person = role_users["admin"], role_users["adjudicator"]
    client.force_login(admin)
    link = link_of(client.post(f"/console-admin/people/{person.pk}/password/"))
    client.logout()
    form = client.get(link, follow=True)
    client.post(form.redirect_chain[-1][0], {"new_password1": "another long secret", "new_password2": "another long secret"})
    assert client.post("/login/", {"username": person.username, "password": PASSWORD}).status_code == 200  # refused
    assert client.post("/login/", {"username": person.username, "password": "another long secret"}).status_code == 302
