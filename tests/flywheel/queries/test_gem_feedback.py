"""Env_ERROR feedback into the GEM (§2.2.5): an edge broken, queries rerouted or held, re-checked
on a real (virtual) phone and restored."""
import io
from datetime import timedelta

import pytest
from django.utils import timezone
from PIL import Image, ImageDraw

from devices.models import Device
from devices.registry import discover_devices
from flywheel.blobs import store_blob
from flywheel.judging.destinations import route_trajectory
from flywheel.models import Edge, Query, Step, Trajectory
from flywheel.queries.gem import feedback as gem_feedback
from flywheel.queries.gem import graph as gem
from flywheel.queries.gem.recheck import recheck_due_edges
from flywheel.screens.page_identity import fingerprint
from tests.flywheel.queries.test_gem import build_world, make_app, make_edge, make_page, tap

pytestmark = pytest.mark.django_db


def make_query(key, edges, status="ready", steps=None):
    path = [edge.pk for edge in edges]
    known = {"mode": "tap", "steps": steps if steps is not None else
             [{"action": "open", "app": "com.sim.notes"}, *gem.known_path_steps(path),
              {"action": "terminate", "status": "success"}]}
    query = Query.objects.create(key=key, text=f"do {key}", tier="L1", status=status, gem_path=path,
                                 known_path=known, verification={"terminal": []})
    query.set_apps([make_app("com.sim.notes")])
    return query


def make_trajectory(query, actions, anomaly_at=None, line="semi_auto"):
    """Steps whose executed actions are `actions`; an anomaly before step `anomaly_at` (then one
    more observed step at that index with nothing executed)."""
    trajectory = Trajectory.objects.create(query=query, line=line, status="completed",
                                           stop_reason="action failed: network unreachable")
    for index, action in enumerate(actions):
        Step.objects.create(trajectory=trajectory, index=index, executed_action=action,
                            anomaly={"kind": "network_off"} if index == anomaly_at else None)
    return trajectory


@pytest.fixture
def world():
    return build_world()


def route_env_error(trajectory, django_capture_on_commit_callbacks, reason="network unreachable"):
    with django_capture_on_commit_callbacks(execute=True):
        route_trajectory(trajectory, "env_error", reason)


def test_env_error_routed_marks_the_edge_it_broke_on_and_reroutes(world, settings,
                                                                  django_capture_on_commit_callbacks):
    p, e = world
    settings.GEM_EDGE_COOLDOWN_S = 600
    typed = {"action": "type", "target": {"resource_id": "x:id/query"}, "text": "milk"}
    steps = [{"action": "open", "app": "com.sim.notes"}, tap("x:id/search"), typed, tap("x:id/note"),
             {"action": "terminate", "status": "success"}]
    query = make_query("q-reroute", [e["home>search"], e["search>note"]], steps=steps)
    # Opened the app, the network went down before the first path action.
    trajectory = make_trajectory(query, [{"action": "open", "app": "com.sim.notes"}, None], anomaly_at=1)
    before = timezone.now()
    route_env_error(trajectory, django_capture_on_commit_callbacks)
    broken = Edge.objects.get(pk=e["home>search"].pk)
    assert not broken.reachable and broken.failures == 1
    assert before + timedelta(seconds=600) <= broken.unreachable_until <= timezone.now() + timedelta(seconds=600)
    assert f"trajectory #{trajectory.pk}" in broken.unreachable_reason and "network unreachable" in broken.unreachable_reason
    assert Edge.objects.filter(reachable=False).count() == 1
    # Generation's path queries no longer use it...
    assert gem.shortest_path(p["home"].pk, p["search"].pk) == [e["home>folders"].pk, e["folders>search"].pk]
    # ...and the query waiting on it was rerouted between the same pages, its typing step kept.
    query.refresh_from_db()
    assert query.status == "ready"
    assert query.gem_path == [e["home>folders"].pk, e["folders>search"].pk, e["search>note"].pk]
    assert query.known_path["steps"] == [steps[0], tap("x:id/folders"), tap("x:id/folder_search"), typed,
                                         tap("x:id/note"), steps[-1]]
    assert query.known_path["summary"] == "Notes → Folders → Search → Note"
    reroute = query.gate_results["gem"]["reroutes"][0]
    assert reroute["edge"] == broken.pk and reroute["from"] == [e["home>search"].pk, e["search>note"].pk]


def test_the_step_index_maps_into_the_path_when_the_known_path_was_followed(world,
                                                                           django_capture_on_commit_callbacks):
    _, e = world
    query = make_query("q-index", [e["home>search"], e["search>note"]])
    trajectory = make_trajectory(query, [{"action": "open", "app": "com.sim.notes"},
                                         {"action": "click", "point": [5, 5]},
                                         {"action": "swipe", "direction": "up"}, None], anomaly_at=3)
    route_env_error(trajectory, django_capture_on_commit_callbacks)
    assert list(Edge.objects.filter(reachable=False).values_list("pk", flat=True)) == [e["search>note"].pk]


def _screen(colour):
    image = Image.new("RGB", (108, 240), "white")
    ImageDraw.Draw(image).rectangle([10, 10, 98, 60 if colour == "red" else 200], fill=colour)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


HOME_XML = ('<hierarchy><node class="android.widget.FrameLayout" resource-id="" package="com.sim.notes">'
            '<node class="android.widget.ListView" resource-id="com.sim.notes:id/list" scrollable="true"/>'
            '<node class="android.widget.ImageButton" resource-id="com.sim.notes:id/fab_add" clickable="true"/>'
            '</node></hierarchy>')
SEARCH_XML = ('<hierarchy><node class="android.widget.FrameLayout" resource-id="" package="com.sim.notes">'
              '<node class="android.widget.EditText" resource-id="com.sim.notes:id/query" clickable="true"/>'
              '</node></hierarchy>')


def test_the_last_screen_names_the_page_the_trajectory_stopped_on(world, django_capture_on_commit_callbacks):
    p, e = world
    for page, png, xml in ((p["home"], _screen("red"), HOME_XML), (p["search"], _screen("blue"), SEARCH_XML)):
        shape = fingerprint(png, xml)
        page.phash, page.layout_signature, page.layout_shape = shape.phash, shape.layout_signature, shape.layout_shape
        page.save()
    query = make_query("q-screen", [e["home>search"], e["search>note"]])
    trajectory = make_trajectory(query, [{"action": "open", "app": "com.sim.notes"},
                                         {"action": "click", "point": [5, 5]}])
    # The last screen is the search page: the edge leaving it broke (not the path's last by luck:
    # index mapping would say the same here, so make the screen disagree with the index).
    Step.objects.filter(trajectory=trajectory, index=1).update(
        screenshot=store_blob(_screen("red"), "png"), hierarchy=store_blob(HOME_XML.encode(), "xml"))
    route_env_error(trajectory, django_capture_on_commit_callbacks)
    edge = Edge.objects.get(reachable=False)
    assert edge.pk == e["home>search"].pk and "screen of step 1 is page" in edge.unreachable_reason


def test_a_query_without_an_alternative_is_held_then_restored(world, django_capture_on_commit_callbacks):
    p, e = world
    held_ready = make_query("q-held", [e["shop>cart"]])
    held_review = make_query("q-held-review", [e["shop>cart"]], status="review")
    untouched = make_query("q-other", [e["home>editor"]])
    done = make_query("q-done", [e["shop>cart"]], status="done")
    trajectory = make_trajectory(held_ready, [None])
    route_env_error(trajectory, django_capture_on_commit_callbacks)
    edge = Edge.objects.get(pk=e["shop>cart"].pk)
    assert not edge.reachable
    for query in (held_ready, held_review):
        query.refresh_from_db()
        assert query.status == "review" and query.gem_path == [edge.pk]
        assert query.status_reason.startswith(f"GEM edge #{edge.pk} unreachable: Env_ERROR")
        assert query.status_reason.endswith("no alternative path")
    assert held_ready.gate_results["gem"]["previous_status"] == "ready"
    assert held_review.gate_results["gem"]["previous_status"] == "review"
    untouched.refresh_from_db()
    done.refresh_from_db()
    assert untouched.status == "ready" and done.status == "done" and not done.status_reason
    assert not gem.reachable(p["shop"].pk, p["cart"].pk)  # generation cannot use it any more
    # Nothing due yet, and with no idle phone a due edge is left as it is (never restored blindly).
    assert recheck_due_edges() == {"restored": [], "failed": [], "left_due": []}
    Edge.objects.filter(pk=edge.pk).update(unreachable_until=timezone.now() - timedelta(seconds=1))
    Device.objects.all().delete()
    assert recheck_due_edges()["left_due"] == [edge.pk]
    assert not Edge.objects.get(pk=edge.pk).reachable
    # Restored (as a successful re-check does): each query goes back where it was.
    result = gem_feedback.restore_edge(Edge.objects.get(pk=edge.pk))
    assert sorted(result["restored"]) == sorted([held_ready.pk, held_review.pk])
    held_ready.refresh_from_db()
    held_review.refresh_from_db()
    assert (held_ready.status, held_ready.status_reason) == ("ready", "")
    assert (held_review.status, held_review.status_reason) == ("review", "")
    assert held_ready.gate_results["gem"]["held"] is None
    assert gem.shortest_path(p["shop"].pk, p["cart"].pk) == [edge.pk]


def test_a_query_stays_held_while_another_edge_of_its_path_is_down(world):
    _, e = world
    query = make_query("q-two", [e["launcher>shop"], e["shop>cart"]])
    first = gem_feedback.mark_unreachable(e["launcher>shop"].pk, "first")
    second = gem_feedback.mark_unreachable(e["shop>cart"].pk, "second")
    query.refresh_from_db()
    assert query.gate_results["gem"]["held"]["edge"] == second.pk
    assert query.gate_results["gem"]["previous_status"] == "ready"  # from before the first hold
    gem_feedback.restore_edge(second)
    query.refresh_from_db()
    assert query.status == "review" and query.status_reason.startswith(f"GEM edge #{first.pk} unreachable: first")
    gem_feedback.restore_edge(first)
    query.refresh_from_db()
    assert (query.status, query.status_reason) == ("ready", "")


def test_other_outcomes_and_queries_without_a_path_change_nothing(world, django_capture_on_commit_callbacks):
    _, e = world
    query = make_query("q-true", [e["home>search"]])
    route_env_error(make_trajectory(query, [None]), django_capture_on_commit_callbacks)  # marks one
    Edge.objects.update(reachable=True, unreachable_until=None, failures=0)
    with django_capture_on_commit_callbacks(execute=True):
        route_trajectory(make_trajectory(query, [None]), "false", "wrong result")
    no_path = Query.objects.create(key="q-nopath", text="x", tier="L1", verification={})
    route_env_error(make_trajectory(no_path, [None]), django_capture_on_commit_callbacks)
    assert not Edge.objects.filter(reachable=False).exists()


# -- re-check on the virtual farm ----------------------------------------------------------------------

@pytest.fixture
def notes_gem(farm_settings):
    """A tiny GEM written by hand for the farm's Notes app (ids from simfarm/apps/notes.yaml)."""
    discover_devices()
    notes = make_app("com.sim.notes")
    home = make_page(notes, "home", is_start=True, title="Notes", activity=".NotesListActivity")
    editor = make_page(notes, "editor", depth=1, title="New note", activity=".EditorActivity")
    fab = make_edge(home, editor, action=tap("com.sim.notes:id/fab_add"))
    wrong = make_edge(home, editor, action=tap("com.sim.notes:id/no_such_button"))
    return home, editor, fab, wrong


@pytest.mark.django_db(transaction=True)
def test_recheck_on_a_phone_restores_a_working_edge_and_backs_off_a_broken_one(notes_gem):
    home, editor, fab, wrong = notes_gem
    held = make_query("q-fab", [fab])
    past = timezone.now() - timedelta(seconds=1)
    for edge in (wrong, fab):  # with the wrong one down first, the query on the fab has no way round
        gem_feedback.mark_unreachable(edge.pk, "Env_ERROR in trajectory #1: app not responding")
    held.refresh_from_db()
    assert held.status == "review" and held.gate_results["gem"]["held"]["edge"] == fab.pk
    Edge.objects.filter(pk__in=[fab.pk, wrong.pk]).update(unreachable_until=past)  # their cool-down is over
    summary = recheck_due_edges()
    assert summary["restored"] == [fab.pk] and summary["failed"] == [wrong.pk]
    fab.refresh_from_db()
    assert fab.reachable and fab.unreachable_until is None and fab.last_checked_at is not None
    held.refresh_from_db()
    assert held.status == "ready" and held.status_reason == ""
    wrong.refresh_from_db()
    assert not wrong.reachable and wrong.unreachable_until > timezone.now() + timedelta(seconds=1800)
    assert wrong.failures == 2 and "no_such_button" in wrong.unreachable_reason
    assert wrong.unreachable_reason.startswith("re-check failed: step 2")
    # The phone was handed back.
    assert not Device.objects.filter(status="leased").exists()
