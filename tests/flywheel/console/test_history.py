"""Issue #35: every human decision lands in one history (django-auditlog), with its actor, viewable per
person and per object by managers and admins; bad filters answer 400."""
import html
import re

import pytest
from auditlog.models import LogEntry
from django.contrib.contenttypes.models import ContentType

from accounts import history
from annotation import adjudication
from benchmark.models import Benchmark, EvalResult
from flywheel.model_endpoints import MODEL_HOST, change_endpoint
from flywheel.models import Adjudication, ModelVersion, Trajectory, Verdict
from tests.annotation.test_adjudication import undetermined_trajectory
from tests.benchmark.test_views import draft_version, evaluation_with, frozen_version
from tests.flywheel.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db


def entries_of(model, pk):
    return LogEntry.objects.filter(content_type=ContentType.objects.get_for_model(model), object_pk=str(pk))


def page_text(response) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode()))


def history_rows(response) -> list[str]:
    """Each entry's row, as words ('\\s+' folded)."""
    body = response.content.decode()
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", row)).split())
            for row in re.findall(r'<tr data-entry="\d+">(.*?)</tr>', body, re.S)]


# -- each decision, with its actor ---------------------------------------------------------------

def test_an_adjudication_is_recorded_with_its_adjudicator_from_claim_to_decision(client_as, role_users):
    trajectory = undetermined_trajectory()
    judge = role_users["adjudicator"]
    reply = client_as("adjudicator").post(f"/adjudication/{trajectory.pk}/decide/",
                                          {"decision": "correct", "note": "the switch is on"})
    assert reply.status_code == 302
    row = Adjudication.objects.get(trajectory=trajectory)
    created, decided = entries_of(Adjudication, row.pk).order_by("timestamp", "pk")
    assert created.action == LogEntry.Action.CREATE and created.actor == judge  # the row's creation is the claim
    assert decided.actor == judge and decided.changes_dict["decision"] == ["", "correct"]
    assert decided.additional_data["about"] == f"flywheel.trajectory:{trajectory.pk}"
    assert created.remote_addr == "127.0.0.1"  # the connection's address, as sign-in lockouts count it

    rows = history_rows(client_as("manager").get(f"/history/?object=flywheel.trajectory:{trajectory.pk}"))
    assert any("adjudicator-user" in r and "Decision: — → Correct → SFT" in r and "Note: — → the switch is on" in r
               for r in rows), rows
    # The judges' verdict, written outside any request, is the system's.
    assert any(r.split()[2] == "system" and "created verdict" in r and "Outcome: Undetermined" in r for r in rows), rows


def test_a_worker_names_the_person_its_workflow_names(role_users):
    trajectory = undetermined_trajectory()
    judge = role_users["adjudicator"]
    with history.acting_as(judge):  # what a Celery task or a command does on a person's behalf
        adjudication.decide(trajectory.pk, judge, "wrong", note="looped")
    actors = entries_of(Adjudication, trajectory.adjudications.get().pk).values_list("actor", flat=True)
    assert set(actors) == {judge.pk}
    verdict = entries_of(Verdict, Verdict.objects.get(trajectory=trajectory).pk).get()
    assert verdict.actor is None and not (verdict.additional_data or {}).get("by")  # the system's


def test_an_expert_verdict_is_recorded_with_its_expert(client_as, role_users):
    run = evaluation_with(frozen_version(role_users["manager"]), ["success", "split", "failure"])
    split = run.results.get(state="split")
    reply = client_as("adjudicator").post(f"/benchmarks/expert/{split.pk}/", {"outcome": "success", "note": "on"})
    assert reply.status_code == 302
    entry = entries_of(EvalResult, split.pk).get()
    assert entry.actor == role_users["adjudicator"]
    assert entry.changes_dict["expert_outcome"] == ["", "success"]
    assert entry.changes_dict["state"] == ["split", "expert"]
    rows = history_rows(client_as("manager").get(f"/history/?person={role_users['adjudicator'].pk}"))
    assert any("Expert outcome: — → success" in r and "State: Judges split: waiting for an expert → Scored by an expert"
               in r for r in rows), rows


def test_a_freeze_is_recorded_with_the_manager_who_froze(client_as, role_users):
    benchmark = draft_version(n=2)
    client = client_as("manager")
    first, second = benchmark.items.order_by("position")
    client.post(f"/benchmarks/{benchmark.pk}/review/{first.pk}/", {"text": first.query.text, "decision": "approve"})
    client.post(f"/benchmarks/{benchmark.pk}/review/{second.pk}/", {"text": second.query.text, "decision": "retire"})
    client.post(f"/benchmarks/{benchmark.pk}/freeze/")
    assert Benchmark.objects.get(pk=benchmark.pk).frozen
    freeze = entries_of(Benchmark, benchmark.pk).filter(action=LogEntry.Action.UPDATE).get()
    assert freeze.actor == role_users["manager"]
    assert freeze.changes_dict["frozen"] == ["False", "True"]
    assert freeze.changes_dict["frozen_by"] == ["None", str(role_users["manager"].pk)]

    page = client.get(f"/history/?object=benchmark.benchmark:{benchmark.pk}")
    rows = history_rows(page)
    assert any("manager-user" in r and "Frozen: no → yes" in r and "Frozen by: — → manager-user" in r
               and "Status: Draft → Frozen" not in r for r in rows), rows
    # The version's history holds its items' reviews, by the same person.
    assert sum("manager-user" in r and "Review: Not reviewed →" in r for r in rows) == 2, rows
    assert f'href="/benchmarks/{benchmark.pk}/"' in page.content.decode()


def test_an_endpoint_change_is_recorded_with_the_admin_or_the_model_host(client_as, role_users):
    judge = ModelVersion.objects.create(name="judge-72b", kind="endpoint", endpoint_url="http://127.0.0.1:9/v1",
                                        served_model_name="judge")
    with StubOpenAI(model="judge-2") as stub:
        reply = client_as("admin").post(f"/training/models/{judge.pk}/endpoint/",
                                        {"endpoint_url": stub.url, "served_model_name": "judge-2"})
    assert reply.status_code == 302
    change = entries_of(ModelVersion, judge.pk).filter(action=LogEntry.Action.UPDATE).get()
    assert change.actor == role_users["admin"]
    assert change.changes_dict["endpoint_url"] == ["http://127.0.0.1:9/v1", stub.url]
    change_endpoint(judge, by=MODEL_HOST, endpoint_url="http://127.0.0.1:7/v1", served_model_name="judge-3")
    by_host = entries_of(ModelVersion, judge.pk).filter(action=LogEntry.Action.UPDATE).latest("pk")
    assert by_host.actor is None and by_host.additional_data == {"by": MODEL_HOST}

    rows = history_rows(client_as("admin").get("/history/?kind=flywheel.modelversion"))
    assert f" {MODEL_HOST} changed model version" in rows[0] and "Served model name: judge-2 → judge-3" in rows[0], rows
    assert "admin-user" in rows[1] and f"Endpoint url: http://127.0.0.1:9/v1 → {stub.url}" in rows[1], rows


def test_a_query_review_is_recorded_with_its_reviewer(client_as, role_users):
    from flywheel.models import Query
    from tests.annotation.test_query_review import make_query, post_act

    approved, rejected = make_query("q1"), make_query("q2")
    client = client_as("manager")
    post_act(client, "approve", [approved], htmx=True)
    post_act(client, "reject", [rejected], reason="duplicates q7", htmx=True)
    rows = history_rows(client.get(f"/history/?kind=flywheel.query&person={role_users['manager'].pk}"))
    assert len(rows) == 2 and all("manager-user changed query" in r for r in rows), rows
    assert "Status: Needs review → Rejected" in rows[0] and "Status reason: — → duplicates q7" in rows[0], rows
    assert "Status: Needs review → Ready" in rows[1] and "Reviewed by: — → manager-user" in rows[1], rows
    assert not entries_of(Query, approved.pk).filter(action=LogEntry.Action.CREATE).exists()  # made, not decided


def test_a_refused_change_writes_no_entry(client_as):
    judge = ModelVersion.objects.create(name="judge-72b", kind="endpoint", endpoint_url="http://127.0.0.1:9/v1")
    before = LogEntry.objects.count()
    reply = client_as("manager").post(f"/training/models/{judge.pk}/endpoint/",
                                      {"endpoint_url": "http://127.0.0.1:8/v1", "served_model_name": "mine"})
    assert reply.status_code == 403 and LogEntry.objects.count() == before


def test_machine_bookkeeping_on_a_tracked_row_is_not_a_decision():
    trajectory = undetermined_trajectory()
    before = LogEntry.objects.count()
    Trajectory.objects.get(pk=trajectory.pk).save()  # nothing a person decides changed
    trajectory.stop_reason = "the model terminated"
    trajectory.save(update_fields=["stop_reason"])
    assert LogEntry.objects.count() == before
    assert not entries_of(Trajectory, trajectory.pk).exists()  # its creation is no decision either


# -- the page ------------------------------------------------------------------------------------

def test_only_managers_and_admins_see_the_history(client_as, client):
    assert client.get("/history/").status_code == 302  # to the login
    for role in ("annotator", "adjudicator", None):
        assert client_as(role).get("/history/").status_code == 403, role
    for role in ("manager", "admin"):
        assert client_as(role).get("/history/").status_code == 200, role


def test_the_empty_history_says_what_appears_there(client_as):
    text = page_text(client_as("manager").get("/history/"))
    assert "Nothing recorded yet" in text and "an adjudication" in text and "a freeze" in text


def test_filters_per_person_and_per_object(client_as, role_users):
    ours, theirs = undetermined_trajectory(), undetermined_trajectory()
    client_as("adjudicator").post(f"/adjudication/{ours.pk}/decide/", {"decision": "correct"})
    with history.acting_as(role_users["admin"]):
        adjudication.decide(theirs.pk, role_users["admin"], "wrong")
    manager = client_as("manager")

    mine = history_rows(manager.get(f"/history/?person={role_users['adjudicator'].pk}"))
    assert mine and all("adjudicator-user" in r for r in mine) and not any("admin-user" in r for r in mine)
    machine = history_rows(manager.get("/history/?person=system"))
    assert machine and all(r.split()[2] == "system" for r in machine)
    one = manager.get(f"/history/?object=flywheel.trajectory:{theirs.pk}")
    assert all(f"#{ours.pk}" not in r for r in history_rows(one)) and "admin-user" in page_text(one)
    assert f'href="/trajectories/{theirs.pk}/"' in one.content.decode()  # the object's own page
    both = history_rows(manager.get(f"/history/?object=flywheel.trajectory:{ours.pk}"
                                    f"&person={role_users['admin'].pk}"))
    assert both == []
    assert "Nothing recorded for this filter yet" in page_text(
        manager.get(f"/history/?object=flywheel.trajectory:{ours.pk}&person={role_users['admin'].pk}"))


def test_the_history_is_paginated_newest_first(client_as, role_users, monkeypatch):
    from flywheel.console import history as page

    monkeypatch.setattr(page, "PAGE_SIZE", 2)
    judge = ModelVersion.objects.create(name="judge", kind="endpoint", endpoint_url="http://127.0.0.1:9/v1")
    for port in (1, 2, 3):
        change_endpoint(judge, by=role_users["admin"], endpoint_url=f"http://127.0.0.1:{port}/v1",
                        served_model_name="j")
    client = client_as("manager")
    first = client.get("/history/?kind=flywheel.modelversion")
    assert "→ http://127.0.0.1:3/v1" in history_rows(first)[0] and "Page 1 of 2" in page_text(first)
    assert "kind=flywheel.modelversion&amp;page=2" in first.content.decode()
    second = history_rows(client.get("/history/?kind=flywheel.modelversion&page=2"))
    assert len(second) == 2 and "created" in second[-1]


@pytest.mark.parametrize("query", [
    "person=abc", "person=%C2%B2", "person=999999", "person=-1", "object=nonsense", "object=flywheel.trajectory:x",
    "object=flywheel.trajectory:%C2%B2", "object=auth.user:1", "object=nowhere.thing:1", "kind=flywheel.step",
    "kind=", "page=0", "page=%C2%B2", "page=1e3", "page=99999999999999999999999999"])
def test_bad_filters_answer_400_and_say_why(client_as, query):
    reply = client_as("manager").get(f"/history/?{query}")
    if query == "kind=":
        assert reply.status_code == 200  # an empty filter is no filter
        return
    assert reply.status_code == 400, query
    assert "This filter cannot be applied" in page_text(reply)


def test_a_pool_released_to_training_shows_its_settings_in_words(client_as, role_users):
    from training.models import DataSnapshot

    with history.acting_as(role_users["manager"]):  # the snapshot page's request, or its worker
        snapshot = DataSnapshot.objects.create(kind="sft", name="round 3", created_by=role_users["manager"],
                                               config={"sources": ["htsc_true", "adjudicated"], "screenshots": 3})
    page = client_as("manager").get("/history/?kind=training.datasnapshot")
    rows = history_rows(page)
    assert len(rows) == 1 and "manager-user" in rows[0] and "created data snapshot" in rows[0]
    assert "Config: screenshots: 3; sources: htsc_true, adjudicated" in rows[0], rows
    assert "{" not in page_text(page).split("History", 2)[-1] and "[" not in rows[0]
    assert f'href="/training/snapshots/{snapshot.pk}/"' in page.content.decode()


def test_an_objects_page_links_to_its_history_for_managers_only(client_as, role_users):
    trajectory = undetermined_trajectory()
    link = f'href="/history/?object=flywheel.trajectory:{trajectory.pk}"'
    assert link in client_as("manager").get(f"/trajectories/{trajectory.pk}/").content.decode()
    as_adjudicator = client_as("adjudicator").get(f"/trajectories/{trajectory.pk}/")
    assert as_adjudicator.status_code == 200 and link not in as_adjudicator.content.decode()
    benchmark = draft_version(n=1)
    page = client_as("manager").get(f"/benchmarks/{benchmark.pk}/").content.decode()
    assert f'href="/history/?object=benchmark.benchmark:{benchmark.pk}"' in page


def test_a_repair_is_recorded_with_the_person_who_repaired_it(client, monkeypatch, settings):
    from annotation import repair_queue
    from flywheel import tasks
    from flywheel.models import Repair
    from tests.annotation.test_repair_queue import TEACHER_COT, annotator, failed_with_repair

    settings.ECDM_REPLAY = False
    monkeypatch.setattr(tasks.repair_replay, "delay", lambda *args: None)
    fixed, refused = failed_with_repair(steps=4, wrong=2), failed_with_repair()
    alice = annotator("alice")
    repair_queue.submit(fixed.pk, alice, {"action": "click", "point": [540, 375]}, TEACHER_COT, step=2)
    correction = entries_of(Repair, fixed.pk).get(action=LogEntry.Action.UPDATE, changes__has_key="correction")
    assert correction.actor == alice and correction.changes_dict["repaired_by"] == ["None", str(alice.pk)]
    client.force_login(alice)
    client.post(f"/repairs/{refused.pk}/claim/")
    client.post(f"/repairs/{refused.pk}/cannot/", {"reason": "the app shows a risk-control check"})
    failed = entries_of(Repair, refused.pk).get(action=LogEntry.Action.UPDATE)
    assert failed.actor == alice and failed.changes_dict["status"] == ["needs_human", "failed"]
