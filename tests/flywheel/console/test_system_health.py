import pytest

pytestmark = pytest.mark.django_db


def test_healthz_reports_every_component(client_as, settings):
    settings.ADB_SERVERS = []
    response = client_as("manager").get("/healthz")
    body = response.json()
    assert response.status_code == 200
    assert body["components"]["database"]["ok"] and body["components"]["redis"]["ok"]
    assert body["components"]["channel_layer"]["ok"]
    assert set(body["components"]) == {"database", "redis", "celery", "channel_layer", "adb_servers"}


def test_healthz_is_503_when_redis_is_down(client_as, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client_as("admin").get("/healthz")
    assert response.status_code == 503
    assert response.json()["components"]["redis"]["ok"] is False
    assert response.json()["status"] == "down"


def test_healthz_names_an_unreachable_adb_server(client_as, settings):
    settings.ADB_SERVERS = ["127.0.0.1:1"]
    body = client_as("manager").get("/healthz").json()
    assert body["components"]["adb_servers"]["127.0.0.1:1"]["ok"] is False
    assert body["status"] != "ok"


def test_the_public_healthz_says_status_words_only(client, client_as, settings):
    """Anyone (a probe, `make up`) learns whether things work; how and where they run is for staff."""
    settings.ADB_SERVERS = ["127.0.0.1:1"]
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "down", "components": {
        "database": "ok", "redis": "down", "celery": "down", "channel_layer": "down", "adb_servers": "down"}}
    assert b"127.0.0.1" not in response.content and b"Error" not in response.content
    for role in ("annotator", "adjudicator"):
        assert client_as(role).get("/healthz").json()["components"]["redis"] == "down"
    assert "127.0.0.1:1" in client_as("manager").get("/healthz").json()["components"]["adb_servers"]
