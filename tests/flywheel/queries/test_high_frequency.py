"""High-frequency task data (Xiaomi-GUI-0 §3.1): the most-used functions get one query per GEM path
through a different entry point, gated like generated queries, written once, collected by the
schema-guided line; the launch on the generation page; and, on the virtual farm, the explored GEM's
paths replayed on a phone.

The GEM world is tests/flywheel/queries/test_gem.build_world (notes: home -> search -> note,
home -> folders -> search, home -> editor (fab), note -> editor, editor -back-> home), with a
function tree and real-user queries added here.
"""
import time

import pytest
from django.urls import reverse

from flywheel.collection.launch import select_queries
from flywheel.models import App, Edge, FunctionNode, GemPage, GenerationRun, Query, Trajectory
from flywheel.queries import high_frequency as hf
from flywheel.queries.gem import graph as gem
from tests.flywheel.queries.test_gem import build_world, ids

pytestmark = pytest.mark.django_db
NOTES = "com.sim.notes"


def ask(leaf, n, source="external", prefix="q"):
    """`n` queries of `source` linked to `leaf` (what a JSONL import of real-user requests leaves)."""
    for i in range(n):
        query = Query.objects.create(key=f"{prefix}-{leaf.pk}-{source}-{i}", text=f"user request {i}", tier="L2",
                                     source=source, verification={})
        query.set_functions([leaf])


@pytest.fixture
def world():
    gem.invalidate()
    pages, edges = build_world()
    notes = App.objects.get(package=NOTES)
    App.objects.filter(pk=notes.pk).update(label="Notes")
    node = FunctionNode.objects.create
    root = node(app=notes, path="notes", label="Notes", page=pages["home"])
    leaves = {"new_note": node(app=notes, path="notes/new_note", label="New note", parent=root, is_leaf=True,
                               page=pages["editor"]),
              "note": node(app=notes, path="notes/note", label="Note", parent=root, is_leaf=True, page=pages["note"]),
              "search": node(app=notes, path="notes/search", label="Search", parent=root, is_leaf=True,
                             page=pages["search"]),
              "folders": node(app=notes, path="notes/folders", label="Folders", parent=root, is_leaf=True,
                              page=pages["folders"])}
    # The same function as "New note" reached under another node (§2.2.1 reuse): counts there.
    leaves["new_note_again"] = node(app=notes, path="notes/note/new_note", label="New note", parent=leaves["note"],
                                    is_leaf=True, page=pages["editor"], reuse_of=leaves["new_note"])
    yield pages, edges, leaves
    gem.invalidate()


# Hand-counted paths from the start page (home) over the notes app's edges, one per entry point:
#   editor: home>editor (1 step), home>search>note>editor (3), home>folders>search>note>editor (4)
#   note:   home>search>note (2), home>folders>search>note (3); home>editor leads only back home
def editor_paths(e):
    return [ids(e["home>editor"]), ids(e["home>search"], e["search>note"], e["note>editor"]),
            ids(e["home>folders"], e["folders>search"], e["search>note"], e["note>editor"])]


def note_paths(e):
    return [ids(e["home>search"], e["search>note"]), ids(e["home>folders"], e["folders>search"], e["search>note"])]


def test_most_used_functions_are_the_ones_real_users_ask_for(world):
    _p, _e, leaves = world
    ask(leaves["new_note"], 2)
    ask(leaves["new_note_again"], 1, source="badcase")  # a reuse node's query counts for its canonical leaf
    ask(leaves["note"], 2)
    ask(leaves["search"], 5, source="synthesized")       # generated: not a usage signal
    note_query = Query.objects.get(key=f"q-{leaves['note'].pk}-external-0")
    Trajectory.objects.create(query=note_query, line="schema", status="completed")
    top = [(leaf.path, usage, tried) for leaf, usage, tried in hf.top_functions(5)]
    assert top == [("notes/new_note", 3, 0), ("notes/note", 2, 1)]
    assert [leaf.path for leaf, _u, _t in hf.top_functions(1)] == ["notes/new_note"]
    assert hf.top_functions(5, apps=["com.sim.shop"]) == []


def test_paths_per_function_follow_the_hand_count(world):
    _p, e, leaves = world
    assert [list(p.edges) for p in hf.function_paths(leaves["new_note"], 5)] == editor_paths(e)
    assert [list(p.edges) for p in hf.function_paths(leaves["note"], 5)] == note_paths(e)
    assert len({p.entry for p in hf.function_paths(leaves["new_note"], 5)}) == 3


def test_top_functions_get_one_gated_query_per_path_and_a_second_launch_writes_none(world):
    pages, e, leaves = world
    ask(leaves["new_note"], 3)
    ask(leaves["note"], 1)
    ask(leaves["folders"], 1)  # one step from home: one path only, no high-frequency data
    result = hf.create_high_frequency_queries(top_k=3, per_function=3, seed=1)
    run = result.run
    assert run.status == "done" and run.total == result.created == 5 and run.generated == 5
    assert any("Folders: 1 path(s)" in problem for problem in result.problems)
    queries = {q.key: q for q in Query.objects.filter(labels__has_key="high_frequency")}
    new_note, note = leaves["new_note"].pk, leaves["note"].pk
    expected = {f"hf-{new_note}-{'-'.join(map(str, path))}": (new_note, path, n + 1)
                for n, path in enumerate(editor_paths(e))}
    expected.update({f"hf-{note}-{'-'.join(map(str, path))}": (note, path, n + 1) for n, path in enumerate(note_paths(e))})
    assert set(queries) == set(expected)
    for key, (function, path, variant) in expected.items():
        query = queries[key]
        facts = query.labels["high_frequency"]
        assert facts["function"] == function and facts["group"] == f"hf-{function}" and facts["variant"] == variant
        assert query.tags == ["generated", "high-frequency", f"hf-{function}"]
        assert query.gem_path == path and query.generation_run_id == run.pk and query.source == "synthesized"
        # the known path opens the app and replays exactly this path's edges
        assert query.known_path["steps"] == [{"action": "open", "app": NOTES}, *gem.known_path_steps(path)]
        assert query.tier == "L2" and query.subclass == "function_statement"
        assert set(query.gate_results) >= {"gate1"} and query.gate_results["gate1"]["completability"] is True
        assert query.app_packages == [NOTES] and query.function_links.first().function_id == function
        assert query.status in ("review", "rejected")
    # one function, several entry points: the entries differ, the target page is the same
    editors = [q for q in queries.values() if q.labels["high_frequency"]["function"] == new_note]
    assert len({tuple(q.labels["high_frequency"]["entry"]) for q in editors}) == 3
    assert {Edge.objects.get(pk=q.gem_path[-1]).target_id for q in editors} == {pages["editor"].pk}
    assert all("New note" in q.text for q in editors)  # the same goal, named in each
    assert run.passed == Query.objects.filter(generation_run=run, status="review").count() >= 4
    assert {hf.group_of(q.labels) for q in editors} == {f"hf-{new_note}"}
    assert hf.group_of(Query.objects.get(key=f"q-{new_note}-external-0").labels) is None and hf.group_of(None) is None

    again = hf.create_high_frequency_queries(top_k=3, per_function=3, seed=1)
    assert again.run is None and again.created == 0
    assert Query.objects.filter(labels__has_key="high_frequency").count() == 5
    assert GenerationRun.objects.count() == 1


def test_a_larger_n_adds_only_the_paths_not_written(world):
    _p, e, leaves = world
    ask(leaves["new_note"], 1)
    first = hf.create_high_frequency_queries(top_k=1, per_function=2)
    assert sorted(q.gem_path for q in Query.objects.filter(generation_run=first.run)) == sorted(editor_paths(e)[:2])
    second = hf.create_high_frequency_queries(top_k=1, per_function=3)
    assert [q.gem_path for q in Query.objects.filter(generation_run=second.run)] == [editor_paths(e)[2]]
    assert second.functions[0].existing == 2 and Query.objects.filter(labels__has_key="high_frequency").count() == 3


def test_an_unreachable_edge_takes_its_paths_out(world):
    _p, e, leaves = world
    ask(leaves["note"], 1)
    Edge.objects.filter(pk=e["folders>search"].pk).update(reachable=False)
    result = hf.create_high_frequency_queries(top_k=1, per_function=3)
    assert result.run is None and "1 path(s)" in result.problems[0]


def test_approved_queries_are_collected_by_tag_and_the_figure_counts_paths(world):
    _p, _e, leaves = world
    ask(leaves["new_note"], 1)
    ask(leaves["note"], 1)
    hf.create_high_frequency_queries(top_k=2, per_function=3)
    written = Query.objects.filter(labels__has_key="high_frequency").order_by("key")
    assert not select_queries({"tags": ["high-frequency"]}).exists()  # in review: not collected yet
    written.update(status="ready")
    assert set(select_queries({"tags": ["high-frequency"]})) == set(written)
    group = f"hf-{leaves['note'].pk}"
    assert {q.labels["high_frequency"]["group"] for q in select_queries({"tags": [group]})} == {group}

    by_function = {}
    for query in written:
        by_function.setdefault(query.labels["high_frequency"]["function"], []).append(query)
    editors, notes = by_function[leaves["new_note"].pk], by_function[leaves["note"].pk]
    assert hf.functions_with_collected_paths() == 0
    for query in editors[:2]:
        Trajectory.objects.create(query=query, line="schema", status="completed", verdict="true")
    Trajectory.objects.create(query=editors[0], line="schema", status="completed", verdict="true")  # same path again
    Trajectory.objects.create(query=notes[0], line="schema", status="completed", verdict="true")
    Trajectory.objects.create(query=notes[1], line="schema", status="completed", verdict="false")
    assert hf.functions_with_collected_paths() == 1
    assert hf.functions_with_collected_paths(successful_only=False) == 2
    assert hf.functions_with_collected_paths(min_paths=3) == 0


@pytest.mark.parametrize("fields, word", [({"top_k": "0"}, "top k"), ({"per_function": "1"}, "per function"),
                                          ({"top_k": "many"}, "whole number"), ({"seed": "-1"}, "seed")])
def test_bad_parameters_are_refused(world, fields, word):
    with pytest.raises(ValueError, match=word):
        hf.create_high_frequency_queries(**{"top_k": 5, "per_function": 3, **fields})


def test_the_launch_on_the_generation_page(client_as, world):
    _p, _e, leaves = world
    ask(leaves["new_note"], 2)
    url = reverse("generation-high-frequency")
    for role in ("annotator", "adjudicator", None):
        assert client_as(role).get(url).status_code == 403
        assert client_as(role).post(url, {"top_k": "1", "per_function": "2"}).status_code == 403
    manager = client_as("manager")
    page = manager.get(reverse("generation-list")).content.decode()
    assert 'data-testid="high-frequency-form"' in page and url in page
    panel = manager.get(url).content.decode()
    assert "New note" in panel and "{'" not in panel and "0 functions with two or more" in panel
    assert manager.get(url, HTTP_HX_REQUEST="true").status_code == 200
    response = manager.post(url, {"top_k": "1", "per_function": "2", "apps": [NOTES]})
    run = GenerationRun.objects.get()
    assert response.status_code == 302 and response.url == reverse("generation-detail", args=[run.pk])
    assert Query.objects.filter(generation_run=run).count() == 2
    detail = manager.get(response.url).content.decode()
    assert "high frequency" in detail.lower() and "{'" not in detail
    again = manager.post(url, {"top_k": "1", "per_function": "2"}, follow=True).content.decode()
    assert "No new high-frequency query" in again and GenerationRun.objects.count() == 1
    bad = manager.post(url, {"top_k": "x", "per_function": "2"}, follow=True).content.decode()
    assert "Nothing was launched" in bad


# -- on the virtual farm: the explored GEM of the Notes app -------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_the_farms_gem_gives_two_entry_points_that_replay_to_the_function(farm_settings):
    from devices.models import Device
    from devices.observation import observe
    from devices.phone import PhoneConnection
    from devices.registry import discover_devices
    from devices.reset import reset_phone
    from flywheel.queries.exploration.runs import explore_apps_now
    from flywheel.queries.function_tree.builder import build_tree_from_gem
    from flywheel.queries.gem.recheck import replay

    gem.invalidate()
    discover_devices()
    devices = list(Device.objects.order_by("serial"))
    run = explore_apps_now([NOTES], {"max_seconds": 240}, devices=devices[:1])
    assert run.status == "done", run.problems
    app = App.objects.get(package=NOTES)
    build_tree_from_gem(app)
    # "Move to folder" is done on the Move page, reached from a note's page and from the list's long-press menu.
    move = GemPage.objects.get(app=app, activity=".MoveActivity")
    leaf = FunctionNode.objects.filter(app=app, page=move, reuse_of__isnull=True).first()
    assert leaf is not None
    ask(leaf, 3)
    result = hf.create_high_frequency_queries(top_k=1, per_function=3)
    queries = list(Query.objects.filter(generation_run=result.run).order_by("key"))
    assert len(queries) >= 2, result.problems  # seen: 3 (the note's page, the long-press menu, search)
    assert len({tuple(q.labels["high_frequency"]["entry"]) for q in queries}) == len(queries)
    assert len({q.gem_path[0] for q in queries}) == len(queries)  # they part at the first step
    phone = PhoneConnection.for_device(devices[1])
    for query in queries:
        reset_phone(phone, apps=[NOTES], baseline=devices[1].baseline or None)
        steps = query.known_path["steps"][:1 + len(query.gem_path)]  # open, then the GEM path's steps
        assert steps[1:] == gem.known_path_steps(query.gem_path)
        replay(phone, steps, device=devices[1])
        time.sleep(0.3)
        shown = observe(phone).foreground.get("activity", "")
        assert shown.endswith(".MoveActivity"), (query.key, query.known_path["summary"], shown)
