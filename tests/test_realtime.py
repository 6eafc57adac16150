"""The real Redis channel layer and a real Celery worker process."""

import pytest
from channels.db import database_sync_to_async  # closes the DB connections it opens
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.contrib.auth.models import Group, User
from django_celery_results.models import TaskResult

from config.asgi import application
from flywheel.events import publish


def session_cookie_for(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"{django_settings.SESSION_COOKIE_NAME}={client.cookies[django_settings.SESSION_COOKIE_NAME].value}"


def make_user(role):
    user = User.objects.create_user(username=f"ws-{role}", password="x")
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


async def connect(cookie=None):
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if cookie:
        headers.append((b"cookie", cookie.encode()))
    communicator = WebsocketCommunicator(application, "/ws/dashboard/", headers=headers)
    connected, code = await communicator.connect()
    return communicator, connected, code


@pytest.mark.django_db(transaction=True)
async def test_dashboard_websocket_checks_roles_and_relays_events():
    _, connected, code = await connect()
    assert not connected and code == 4401

    annotator = await database_sync_to_async(make_user)("annotator")
    _, connected, code = await connect(await database_sync_to_async(session_cookie_for)(annotator))
    assert not connected and code == 4403

    manager = await database_sync_to_async(make_user)("manager")
    communicator, connected, _ = await connect(await database_sync_to_async(session_cookie_for)(manager))
    assert connected
    assert (await communicator.receive_json_from(timeout=5))["type"] == "hello"
    # Sent from synchronous code, through Redis, to the open socket.
    await database_sync_to_async(publish)("pools", pool="sft")
    message = await communicator.receive_json_from(timeout=5)
    assert message == {"type": "event", "event": {"kind": "pools", "pool": "sft"}}
    await communicator.disconnect()


def test_a_real_worker_runs_a_task_and_stores_its_result(celery_worker_process):
    from flywheel.tasks import ping

    result = ping.delay("test-suite")
    value = result.get(timeout=60)
    assert value["pong"] == "test-suite"
    stored = TaskResult.objects.get(task_id=result.id)
    assert stored.status == "SUCCESS" and "test-suite" in stored.result


def test_healthz_sees_the_worker(celery_worker_process, client, settings):
    settings.ADB_SERVERS = []
    body = client.get("/healthz").json()  # the public words, as `make up` and probes read them
    assert body["components"]["celery"] == "ok", body
    assert body["status"] == "ok"
