"""Sign-in throttling, and the HTTPS switch that turns on secure cookies, redirects and HSTS."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PASSWORD

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.django_db


def sign_in(client, username, password, address="10.0.0.7"):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def test_repeated_failed_sign_ins_lock_that_account_from_that_address(client, role_users, settings):
    user = role_users["annotator"].username
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert sign_in(client, user, "wrong").status_code == 200
    assert sign_in(client, user, PASSWORD).status_code == 302, "below the limit, the right password works"
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        sign_in(client, user, "wrong")
    locked = sign_in(client, user, PASSWORD)
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Too many failed sign-ins" in page and user in page and "0:15:00" in page
    assert not client.get("/").wsgi_request.user.is_authenticated
    # the same person elsewhere, and colleagues at this address, are not locked out
    assert sign_in(client, user, PASSWORD, address="10.0.0.8").status_code == 302
    client.logout()
    assert sign_in(client, role_users["manager"].username, PASSWORD).status_code == 302


def _under(env: dict) -> dict:
    """Settings and a few responses of the site as configured by `env` (settings are read at start)."""
    names = ["SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS",
             "SECURE_PROXY_SSL_HEADER"]
    code = f"""
import json, django
from django.conf import settings
django.setup()
from django.test import Client
client = Client()
plain, secure, probe = client.get("/login/"), client.get("/login/", HTTP_X_FORWARDED_PROTO="https"), client.get("/healthz")
print(json.dumps({{**{{n: getattr(settings, n) for n in {names!r}}},
                  "plain": [plain.status_code, plain.get("Location", "")],
                  "hsts": secure.get("Strict-Transport-Security", ""), "probe": probe.status_code}}))
"""
    environment = {k: v for k, v in os.environ.items() if k not in ("HTTPS", "DATABASE_URL")}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                            env={**environment, "DJANGO_SETTINGS_MODULE": "config.settings",
                                 "ADB_SERVERS": "", "DATABASE_URL": "sqlite://:memory:", **env})
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_https_switches_on_secure_cookies_redirects_and_hsts(own_processes):
    plain = _under({})
    assert not plain["SESSION_COOKIE_SECURE"] and not plain["SECURE_SSL_REDIRECT"] and not plain["SECURE_HSTS_SECONDS"]
    assert plain["plain"][0] == 200 and not plain["hsts"]
    secure = _under({"HTTPS": "1"})
    assert secure["SESSION_COOKIE_SECURE"] and secure["CSRF_COOKIE_SECURE"] and secure["SECURE_SSL_REDIRECT"]
    assert secure["SECURE_HSTS_SECONDS"] >= 365 * 24 * 3600
    assert secure["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert secure["plain"] == [301, "https://testserver/login/"]
    assert secure["hsts"].startswith("max-age=31536000")
    assert secure["probe"] in (200, 503), "load-balancer probes reach /healthz over plain HTTP"
