"""Generation runs: drafts → intake gates → Query rows in batches; launching, cancelling, the pages."""

import pytest
from django.urls import reverse

from flywheel.models import GenerationRun, ModelVersion, Query, QueryApp, QueryFunction
from flywheel.queries.generation import runs as generation_runs
from flywheel.queries.generation.runs import cancel_generation, execute_run, generate_now, launch_generation
from tests.flywheel.openai_stub import StubOpenAI
from tests.flywheel.queries.test_generation import NOTES, SHOP, build_world, gates, world  # noqa: F401

pytestmark = pytest.mark.django_db


def test_a_run_writes_review_and_rejected_queries_with_gate_results(world, gates):  # noqa: F811
    run = generate_now({"apps": [SHOP, NOTES], "per_leaf": 6, "cross_app": 3, "seed": 1})
    queries = list(Query.objects.filter(generation_run=run).order_by("pk"))
    assert run.status == "done" and run.total == len(queries) == 5 * 6 + 3
    assert run.generated == run.total and run.passed + run.rejected == run.total
    assert run.passed == Query.objects.filter(generation_run=run, status="review").count() > 0
    assert run.rejected == Query.objects.filter(generation_run=run, status="rejected").count() > 0
    assert {q.key for q in queries} == {f"gen-{run.pk}-{i}" for i in range(run.total)}
    for query in queries:
        assert query.source == "synthesized" and query.gate_results and query.verification["draft"] is True
        if query.status == "rejected":
            gate = query.status_reason.split(":", 1)[0]
            assert gate in ("gate1", "gate2", "gate3") and query.gate_results[gate]["passed"] is False
        else:
            assert query.status == "review" and not query.status_reason
    # The leaf nobody can reach is never completable (gate 1: GEM reachability).
    orphan = Query.objects.filter(generation_run=run, function_links__function=world.leaves["orphan"])
    assert orphan.exists() and all(q.status_reason.startswith("gate1:") for q in orphan)
    # App and function links in order: the first app is where the task starts.
    cross = [q for q in queries if "cross-app" in q.tags]
    assert len(cross) == 3 and all(q.app_packages == [SHOP, NOTES] for q in cross)
    assert [link.function_id for link in cross[0].function_links.all()] == [world.leaves["product"].id,
                                                                           world.leaves["notes"].id]
    assert QueryApp.objects.filter(query__generation_run=run).count() == 5 * 6 + 3 * 2
    assert QueryFunction.objects.filter(query__generation_run=run).count() >= 5 * 6
    rejections = run.report["rejections"]
    assert sum(sum(reasons.values()) for reasons in rejections.values()) == run.rejected
    assert run.report["timings"]["per_second"] > 0


def test_a_run_picked_up_again_skips_what_it_wrote(world, gates):  # noqa: F811
    run = generate_now({"apps": [SHOP], "per_leaf": 2})
    first = set(Query.objects.filter(generation_run=run).values_list("key", "text"))
    GenerationRun.objects.filter(pk=run.pk).update(status="running")  # as if the worker died at the end
    Query.objects.filter(generation_run=run, key=f"gen-{run.pk}-1").delete()
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "done" and set(Query.objects.filter(generation_run=run).values_list("key", "text")) == first


def test_cancel_stops_a_queued_run(world, gates):  # noqa: F811
    run = GenerationRun.objects.create(config={"apps": [SHOP], "per_leaf": 2})
    assert cancel_generation(run) and run.status == "cancelled" and run.finished_at
    assert execute_run(run.pk)["skipped"] is True
    assert not Query.objects.filter(generation_run=run).exists()
    assert cancel_generation(run) is False


def test_a_run_with_garbage_from_the_endpoint_falls_back_and_records_it(world, gates):  # noqa: F811
    with StubOpenAI(model="writer") as stub:
        version = ModelVersion.objects.create(name="writer", kind="endpoint", endpoint_url=stub.url)
        stub.replies += [(200, stub.chat_reply('{"text": "take me to the offline packs, thanks"}'), 0),
                         (200, stub.chat_reply("I cannot help with that."), 0)]
        run = generate_now({"apps": [SHOP], "per_leaf": 1, "tiers": ["L2"]}, model_version=version)
    texts = list(Query.objects.filter(generation_run=run).order_by("pk").values_list("text", "labels"))
    assert "offline packs, thanks" in texts[0][0].lower() and texts[0][1]["origin"] == "llm"
    assert texts[1][1]["origin"] == "offline" and texts[1][0] == texts[1][1].get("offline_text", texts[1][0])
    kinds = [p["kind"] for p in run.problems]
    assert "llm" in kinds and any("not JSON" in p["detail"] for p in run.problems)
    assert run.status == "done" and run.generated == run.total == 4


def test_offline_models_are_refused_as_writers(world):  # noqa: F811
    offline = ModelVersion.objects.create(name="builtin", kind="offline")
    with pytest.raises(ValueError, match="not an endpoint"):
        generate_now({"apps": [SHOP]}, model_version=offline)


def test_launch_dispatches_after_commit(world, role_users, monkeypatch, django_capture_on_commit_callbacks):  # noqa: F811
    sent = []
    monkeypatch.setattr(generation_runs, "dispatch_generation", sent.append)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = launch_generation({"apps": [SHOP], "per_leaf": 2}, role_users["manager"])
    assert run.status == "queued" and run.created_by == role_users["manager"] and sent == []
    for callback in callbacks:
        callback()
    assert sent == [run.pk]
    with pytest.raises(ValueError, match="tiers"):
        launch_generation({"tiers": ["L9"]}, role_users["manager"])


def test_the_task_is_registered_under_flywheel_tasks():
    from flywheel import tasks

    assert tasks.generate_queries.name == "flywheel.tasks.generate_queries"


def test_pages_need_a_manager(client_as, world):  # noqa: F811
    from django.test import Client

    run = GenerationRun.objects.create(config={})
    for url in (reverse("generation-list"), reverse("generation-detail", args=[run.pk])):
        assert Client().get(url).status_code == 302  # anonymous: to login
        for role in ("annotator", "adjudicator", None):
            assert client_as(role).get(url).status_code == 403
        assert client_as("manager").get(url).status_code == 200
        assert client_as("admin").get(url).status_code == 200
    assert client_as("annotator").post(reverse("generation-cancel", args=[run.pk])).status_code == 403
    assert client_as("annotator").post(reverse("generation-list"), {"per_leaf": "1"}).status_code == 403
    assert GenerationRun.objects.count() == 1  # an annotator launches nothing


def test_launch_form_and_progress_page(client_as, world, gates, monkeypatch,  # noqa: F811
                                      django_capture_on_commit_callbacks):
    monkeypatch.setattr(generation_runs, "dispatch_generation", lambda run_id: execute_run(run_id))
    manager = client_as("manager")
    page = manager.get(reverse("generation-list"))
    assert b"No generation runs yet" in page.content and SHOP.encode() in page.content
    with django_capture_on_commit_callbacks(execute=True):
        response = manager.post(reverse("generation-list"), {
            "apps": [SHOP], "tiers": ["L2", "L3"], "personas": ["novice", "programmer"], "any_capability_field": "1",
            "capabilities": ["looping"], "per_leaf": "3", "cross_app": "0", "seed": "2"}, follow=True)
    run = GenerationRun.objects.get()
    assert response.redirect_chain[-1][0] == reverse("generation-detail", args=[run.pk])
    run.refresh_from_db()
    assert run.status == "done" and run.config["capabilities"] == ["looping"]
    queries = Query.objects.filter(generation_run=run)
    assert {q.persona for q in queries} == {"novice", "programmer"} and {q.tier for q in queries} == {"L2", "L3"}
    assert all(q.capabilities in ([], ["looping"]) for q in queries)
    live = manager.get(reverse("generation-detail", args=[run.pk]), HTTP_HX_REQUEST="true")
    assert live.status_code == 286  # done: htmx stops polling
    body = live.content.decode()
    assert f"/query-review/?run={run.pk}" in body and f"{run.passed} passed" in body
    if run.rejected:
        assert all(gate in body for gate in run.report["rejections"]) and "No query was rejected" not in body
    else:
        assert "No query was rejected" in body
    bad = manager.post(reverse("generation-list"), {"personas": ["pirate"]}, follow=True)
    assert "Nothing was launched" in bad.content.decode() and GenerationRun.objects.count() == 1
    manager.post(reverse("generation-list"), {"model_version": "999"})
    assert GenerationRun.objects.count() == 1


@pytest.mark.django_db(transaction=False)
def test_a_run_of_480_drafts_is_planned_gated_and_written(gates):  # noqa: F811
    """~500 drafts through plan + gates + writes; the rate is measured by perf/queries.py."""
    from flywheel.models import App, Edge, FunctionNode, GemPage
    from flywheel.queries.gem import graph as gem

    gem.invalidate()
    for a in range(4):
        app = App.objects.create(package=f"com.perf.app{a}", label=f"App {a}")
        home = GemPage.objects.create(app=app, name="home", title=f"Home {a}", is_start=True, texts=[f"Home {a}"])
        root = FunctionNode.objects.create(app=app, path="root", label="root")
        for p in range(40):
            page = GemPage.objects.create(app=app, name=f"p{p}", title=f"Page {p}", depth=1,
                                          texts=[f"Page {p}", f"Item {p} 12 MB", f"Other {p} 30 MB", "Filter"])
            Edge.objects.create(source=home, target=page, action={"action": "click", "target": {"text": f"Page {p}"}},
                                action_key=f"k{p}")
            FunctionNode.objects.create(app=app, path=f"root/p{p}", label=f"Page {p}", parent=root, is_leaf=True,
                                        page=page)
    run = generate_now({"per_leaf": 3, "seed": 0})
    assert run.generated == 480 == Query.objects.filter(generation_run=run).count()
    assert run.report["timings"]["per_second"] > 0
