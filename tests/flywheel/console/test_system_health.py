import pytest

pytestmark = pytest.mark.django_db


def test_healthz_reports_every_component(client, settings):
    settings.ADB_SERVERS = []
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200
    assert body["components"]["database"]["ok"] and body["components"]["redis"]["ok"]
    assert body["components"]["channel_layer"]["ok"]
    assert set(body["components"]) == {"database", "redis", "celery", "channel_layer", "adb_servers"}


def test_healthz_is_503_when_redis_is_down(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["components"]["redis"]["ok"] is False
    assert response.json()["status"] == "down"


def test_healthz_names_an_unreachable_adb_server(client, settings):
    settings.ADB_SERVERS = ["127.0.0.1:1"]
    body = client.get("/healthz").json()
    assert body["components"]["adb_servers"]["127.0.0.1:1"]["ok"] is False
    assert body["status"] != "ok"
