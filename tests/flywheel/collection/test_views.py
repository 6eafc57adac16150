"""Managers launch, watch and cancel runs from the site and the API; external import page."""
import pytest
from django.core.management import call_command

from devices.registry import discover_devices
from flywheel.models import CollectionRun, Query
from tests.flywheel.collection.test_runs import make_query

pytestmark = pytest.mark.django_db


def test_launch_from_the_form_then_watch_and_cancel(client_as, farm_settings):
    discover_devices()
    make_query("page-1", tags=("page",))
    client = client_as("manager")
    page = client.get("/runs/")
    assert b"Launch a run" in page.content and b"No runs yet" in page.content
    response = client.post("/runs/", {"line": "automatic", "tags": "page", "phones": "2", "repeats": "2",
                                      "anomaly_notification": "0.2"}, follow=True)
    run = CollectionRun.objects.get()
    assert run.total == 2 and run.config["anomaly_rates"] == {"notification": 0.2}
    assert response.redirect_chain[-1][0] == f"/runs/{run.pk}/"
    assert b"of 2" in response.content
    live = client.get(f"/runs/{run.pk}/", HTTP_HX_REQUEST="true")
    assert b"Step log" in live.content and b"<html" not in live.content
    client.post(f"/runs/{run.pk}/cancel/")
    assert CollectionRun.objects.get(pk=run.pk).status == "cancelled"
    over = client.get(f"/runs/{run.pk}/", HTTP_HX_REQUEST="true")
    assert over.status_code == 286 and b"Cancel run" not in over.content  # htmx stops polling


def test_bad_launches_are_refused_with_a_reason(client_as):
    client = client_as("manager")
    page = client.post("/runs/", {"line": "automatic", "phones": "zero"}, follow=True)
    assert b"a number is malformed" in page.content
    make_query("hinted", tags=("shown",))
    page = client.post("/runs/", {"line": "automatic", "tags": "nothing-has-this"}, follow=True)
    assert b"No query matches" in page.content and not CollectionRun.objects.exists()
    # ...and says what a selection can name instead, each app once
    assert b"apps in use: com.android.settings;" in page.content and b"tags in use: shown" in page.content


def test_the_api_launches_and_cancels(client_as, farm_settings):
    make_query("api-1", tags=("api",))
    client = client_as("manager")
    created = client.post("/api/collection-runs/", {"line": "schema", "query_filter": {"tags": ["api"]},
                                                    "config": {"phones": 1}}, content_type="application/json")
    assert created.status_code == 201, created.content
    assert created.json()["total"] == 1 and created.json()["status"] == "queued"
    cancelled = client.post(f"/api/collection-runs/{created.json()['id']}/cancel/")
    assert cancelled.json()["status"] == "cancelled"
    assert client_as("annotator").post("/api/collection-runs/", {}).status_code == 403


def test_external_import_page(client_as, farm_settings):
    discover_devices()
    client = client_as("manager")
    page = client.post("/runs/external/", {"text": "Open Settings and check Bluetooth, mail bob@example.com\n"
                                                   "tell me a joke\n"}, follow=True)
    assert b"1 kept for replay, 1 removed" in page.content
    assert not Query.objects.filter(text__contains="bob@example.com").exists()


@pytest.mark.django_db(transaction=True)  # the phones are driven from threads with their own connections
def test_collect_command_runs_inline(farm_settings, capsys):
    make_query("cli-1", tags=("cli",))
    call_command("collect", "--line", "automatic", "--tags", "cli", "--phones", "1", "--inline")
    out = capsys.readouterr().out
    assert "1 trajectories to collect" in out and "'sft': 1" in out


def test_an_oversized_external_import_is_refused_with_a_clear_error(client_as, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.QUERY_IMPORT_MAX_BYTES = 1000
    client = client_as("manager")
    upload = SimpleUploadedFile("external.txt", b"Open Settings and check Bluetooth\n" * 100)
    page = client.post("/runs/external/", {"file": upload}, follow=True).content.decode()
    assert "Not imported" in page and "1,000-byte limit" in page
    assert not Query.objects.filter(source="external").exists()
