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
    assert b"apps in use: Settings;" in page.content and b"tags in use: shown" in page.content


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


def test_a_run_page_says_its_selection_in_words_and_shows_each_verdict_with_who_decided(client_as, role_users):
    from datetime import timedelta

    from django.utils import timezone

    from flywheel.models import Adjudication, App, Step, Trajectory, Vote

    App.objects.create(package="com.sim.translator", label="Translator")
    query = make_query("verdicts-1", text="Open Swap in Translator")
    run = CollectionRun.objects.create(line="automatic", total=2, status="done",
                                       query_filter={"apps": ["com.sim.translator"], "tiers": ["L1"]},
                                       config={"phones": 2, "repeats": 1, "anomaly_rates": {"popup": 0.1}})
    judged = Trajectory.objects.create(query=query, run=run, line="automatic", status="completed", verdict="false")
    for system, vote in (("A", "false"), ("B", "false"), ("C", "true")):
        Vote.objects.create(trajectory=judged, system=system, vote=vote)
    decided = Trajectory.objects.create(query=query, run=run, line="automatic", status="completed", verdict="true",
                                        started_at=timezone.now() + timedelta(seconds=1))
    Adjudication.objects.create(trajectory=decided, adjudicator=role_users["adjudicator"], decision="correct",
                                decided_at=timezone.now())
    Step.objects.create(trajectory=judged, index=0, foreground_package="com.sim.translator",
                        executed_action={"action": "type", "text": "milk"})
    page = client_as("manager").get(f"/runs/{run.pk}/").content.decode()
    assert "{" not in page.split('data-testid="run-filter"')[1].split("</dl>")[0]
    assert "<dt>Apps</dt><dd>Translator</dd>" in page and "<dt>Tiers</dt><dd>L1</dd>" in page
    assert "<dt>Anomaly injection (per step)</dt><dd>popup 0.1</dd>" in page
    verdicts = page.split('data-testid="run-verdicts"')[1].split("</table>")[0]
    assert f"#{judged.pk}" in verdicts and "judges: A False, B False, C True" in verdicts
    assert f"{role_users['adjudicator'].username}: Correct → SFT" in verdicts
    assert "com.sim.translator" not in page  # the step log names the app too
    assert "<td>Translator</td>" in page


def test_the_launch_form_counts_what_a_selection_launches_before_launching(client_as):
    make_query("count-1")
    make_query("count-2")
    make_query("count-3", tags=("other",))
    client = client_as("manager")
    assert b'hx-get="/runs/count/"' in client.get("/runs/?keys=count-1").content
    assert "count-1</textarea>" in client.get("/runs/?keys=count-1").content.decode()
    answer = client.get("/runs/count/", {"line": "automatic", "keys": "count-1, count-3\nnope", "repeats": "3"})
    text = answer.content.decode()
    assert "Launches <strong>6</strong> trajectories: 2 queries × 3 repeats." in text and "nope" in text
    assert "Launches <strong>2</strong>" in client.get("/runs/count/", {"line": "automatic", "tags": "bt"}).content.decode()
    assert "No approved query matches" in client.get("/runs/count/", {"line": "automatic", "tags": "none"}).content.decode()
    assert "malformed" in client.get("/runs/count/", {"line": "automatic", "phones": "many"}).content.decode()
    client.post("/runs/", {"line": "automatic", "keys": "count-2 count-3", "phones": "1"})
    run = CollectionRun.objects.get()
    assert run.total == 2 and run.query_filter["keys"] == ["count-2", "count-3"]
    assert client_as("annotator").get("/runs/count/").status_code == 403
