"""The Tasks page (issue #18): which workers run on which host and which queues each consumes."""
import re
import socket

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from flywheel.console import workers

EMPTY_STATE = "No worker answered within 1 s: start one with"


@pytest.mark.django_db
def test_with_no_worker_the_page_says_how_to_start_one(client_as):
    """Nothing consumes this test run's key prefix, so nobody answers the broadcast."""
    page = client_as("manager").get("/tasks/").content.decode()
    assert EMPTY_STATE in page and "make up" in page and "README, Deploy" in page
    assert 'id="workers"' not in page


@pytest.mark.django_db
def test_an_unreachable_broker_is_said_not_raised(client_as, monkeypatch, unused_broker_url):
    from celery import current_app

    monkeypatch.setitem(current_app.conf, "broker_read_url", unused_broker_url)
    response = client_as("manager").get("/tasks/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "The broker did not answer: OperationalError" in page and "Connection refused" in page
    assert EMPTY_STATE not in page


@pytest.fixture
def unused_broker_url():
    from tests.conftest import free_port

    return f"redis://127.0.0.1:{free_port()}/0"


@pytest.mark.django_db
def test_the_polled_rows_do_not_ask_the_workers(client_as, monkeypatch):
    """The rows refresh every 3 s; waiting a second for workers each time would hold every viewer."""
    monkeypatch.setattr("flywheel.console.views.worker_queues", lambda: pytest.fail("asked the workers"))
    client = client_as("manager")
    with CaptureQueriesContext(connection) as captured:
        response = client.get("/tasks/", headers={"HX-Request": "true"})
    assert response.status_code == 200 and "<h2>Workers" not in response.content.decode()
    assert len(captured.captured_queries) <= 4  # session, user, roles, the tasks


def test_workers_are_sorted_by_host_with_their_queues_sorted(monkeypatch):
    replies = {"w2@phones-b": [{"name": "collection.10-0-0-2-5037"}, {"name": "collection"}],
               "w1@central": [{"name": "repair"}, {"name": "default"}, {"name": "evaluation"}],
               "w0@phones-b": []}

    class Inspect:
        def active_queues(self):
            return replies

    from celery import current_app

    class Connection:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def ensure_connection(self, **options):
            assert options["max_retries"] == 1  # one quick try, never kombu's seconds of retries

    monkeypatch.setattr(current_app, "connection_for_read", Connection)
    monkeypatch.setattr(current_app.control, "inspect", lambda timeout, connection: Inspect())
    found, error = workers.worker_queues()
    assert error == ""
    assert [(w.name, w.host, w.queues) for w in found] == [
        ("w1@central", "central", ["default", "evaluation", "repair"]),
        ("w0@phones-b", "phones-b", []),
        ("w2@phones-b", "phones-b", ["collection", "collection.10-0-0-2-5037"])]


@pytest.mark.django_db(transaction=True)
def test_a_running_worker_is_listed_with_its_host_and_queues(celery_worker_process, client_as):
    page = client_as("manager").get("/tasks/").content.decode()
    assert 'id="workers"' in page and EMPTY_STATE not in page
    name, host = celery_worker_process.worker_name, socket.gethostname()
    assert f"<td>{name}</td><td>{host}</td>" in page
    row = page[page.index(f"<td>{name}</td>"):]
    row = row[:row.index("</tr>")]
    listed = re.findall(r"<code>([^<]+)</code>", row)
    assert listed == sorted(listed)
    assert {"benchmark", "collection", "default", "evaluation", "repair", "training"} <= set(listed)


@pytest.mark.django_db
def test_phone_hosts_are_listed_alive_or_silent_with_their_phones(client_as):
    from datetime import timedelta

    from django.utils import timezone

    from devices.models import Device, PhoneHost

    now = timezone.now()
    for name, seen_ago in (("rack-1", 1), ("rack-2", 3600)):
        PhoneHost.objects.create(name=name, machine=f"{name}.lan", instance=f"{name}.lan:42:ab", queue=f"collection.{name}",
                                 started_at=now, last_seen=now - timedelta(seconds=seen_ago))
    for i in range(3):
        Device.objects.create(serial=f"p{i}", adb_server="rack-1")
    page = client_as("manager").get("/tasks/").content.decode()
    table = page[page.index('id="phone-hosts"'):]
    rows = re.findall(r"<tr><td>(rack-\d)</td>\s*<td>.*?>(alive|silent)<.*?<td>(\d+)</td></tr>", table, re.S)
    assert rows == [("rack-1", "alive", "3"), ("rack-2", "silent", "0")]
    assert "rack-1.lan:42:ab on rack-1.lan" in table


@pytest.mark.django_db
def test_with_no_phone_host_the_page_says_how_one_registers(client_as):
    page = client_as("manager").get("/tasks/").content.decode()
    assert "No phone host has registered yet" in page and "make phone-host" in page
