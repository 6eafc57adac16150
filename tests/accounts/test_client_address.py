"""The sign-in lockout counts the connection's address; X-Forwarded-For only through TRUSTED_PROXIES."""
import pytest
from axes.models import AccessAttempt
from django.test import RequestFactory

from accounts.client_address import client_address
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def sign_in(client, username, password, address, forwarded=None):
    extra = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded else {}
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address, **extra)


def _request(remote, forwarded=None):
    extra = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded else {}
    return RequestFactory().get("/", REMOTE_ADDR=remote, **extra)


def test_without_trusted_proxies_a_spoofed_forwarded_for_changes_nothing(client, role_users, settings):
    settings.TRUSTED_PROXIES = []
    user = role_users["annotator"].username
    for n in range(settings.AXES_FAILURE_LIMIT):
        sign_in(client, user, "wrong", "10.0.0.7", forwarded=f"198.51.100.{n}")
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"10.0.0.7"}
    # a fresh made-up address does not get the attacker past the lockout
    assert sign_in(client, user, PASSWORD, "10.0.0.7", forwarded="203.0.113.99").status_code == 429
    # nor can anyone lock out a colleague at an address by naming it
    assert sign_in(client, user, PASSWORD, "198.51.100.0").status_code == 302


def test_behind_a_trusted_proxy_each_client_is_counted_apart(client, role_users, settings):
    settings.TRUSTED_PROXIES = ["10.0.0.1/32"]
    user = role_users["annotator"].username
    for _ in range(settings.AXES_FAILURE_LIMIT):
        # the client claims an address of its own; the proxy appends the one it saw
        sign_in(client, user, "wrong", "10.0.0.1", forwarded="1.2.3.4, 203.0.113.5")
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"203.0.113.5"}
    assert sign_in(client, user, PASSWORD, "10.0.0.1", forwarded="203.0.113.5").status_code == 429
    assert sign_in(client, user, PASSWORD, "10.0.0.1", forwarded="203.0.113.6").status_code == 302


def test_client_address_walks_back_through_trusted_hops_only(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    assert client_address(_request("192.0.2.1", "203.0.113.5")) == "192.0.2.1"  # not from a proxy
    assert client_address(_request("10.0.0.1", "203.0.113.5, 10.0.0.2")) == "203.0.113.5"
    assert client_address(_request("10.0.0.1", "10.0.0.3, 10.0.0.2")) == "10.0.0.3"
    assert client_address(_request("10.0.0.1", "not-an-address")) == "10.0.0.1"
    assert client_address(_request("10.0.0.1")) == "10.0.0.1"
    settings.TRUSTED_PROXIES = []
    assert client_address(_request("10.0.0.1", "203.0.113.5")) == "10.0.0.1"
