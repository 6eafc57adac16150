"""Coverage of function-tree leaves by successful trajectories, as they are routed."""
import pytest

from annotation import adjudication
from flywheel.console.dashboard import dashboard_counts
from flywheel.judging.destinations import route_trajectory
from flywheel.models import FunctionNode, Query, Trajectory
from flywheel.queries.coverage import coverage, coverage_by_app
from flywheel.queries.function_tree import builder as ft
from tests.flywheel.queries.test_function_tree import PACKAGE, make_gem

pytestmark = pytest.mark.django_db


def query_for(app, *paths, key="q"):
    query = Query.objects.create(key=key, text="Do it", tier="L2")
    query.set_apps([app])
    query.set_functions([FunctionNode.objects.get(app=app, path=path) for path in paths])
    return Trajectory.objects.create(query=query, line="automatic", status="completed")


def test_a_true_trajectory_exercises_its_leaves_when_routed(django_capture_on_commit_callbacks):
    app, _ = make_gem()
    ft.build_tree_from_gem(app)
    trajectory = query_for(app, "settings/offline_packs/download", "settings/display")  # a leaf and a section
    failed = query_for(app, "saved/clear_all", key="fails")
    assert coverage(app) == {"leaves": 5, "exercised": 0, "ratio": 0.0}

    with django_capture_on_commit_callbacks(execute=True):
        route_trajectory(failed, "false")
        route_trajectory(trajectory, "true")

    assert coverage(app) == {"leaves": 5, "exercised": 1, "ratio": 0.2}
    download = FunctionNode.objects.get(app=app, path="settings/offline_packs/download")
    assert download.exercised_at is not None
    assert FunctionNode.objects.get(app=app, path="saved/clear_all").exercised_at is None
    first = download.exercised_at
    with django_capture_on_commit_callbacks(execute=True):
        route_trajectory(query_for(app, "settings/offline_packs/download", key="again"), "true")
    download.refresh_from_db()
    assert download.exercised_at == first  # the first time is kept

    [row] = coverage_by_app()
    assert (row["app"].package, row["leaves"], row["exercised"], row["ratio"]) == (PACKAGE, 5, 1, 0.2)
    counts = dashboard_counts()["coverage"]
    assert counts["overall"] == {"leaves": 5, "exercised": 1, "ratio": 0.2}
    assert [r["app"].package for r in counts["by_app"]] == [PACKAGE]


def test_a_query_on_a_reuse_node_counts_for_its_canonical_leaf(django_capture_on_commit_callbacks, role_users):
    app, _ = make_gem()
    ft.build_tree_from_gem(app)
    ft.delete(FunctionNode.objects.get(app=app, path="settings/offline_packs/delete_all"), role_users["manager"])
    ft.delete(FunctionNode.objects.get(app=app, path="settings/offline_packs/download"), role_users["manager"])
    # Offline packs is now a leaf itself; Downloads reaches it by another path
    reuse = FunctionNode.objects.get(app=app, path="downloads/offline_packs")
    assert reuse.is_leaf and reuse.reuse_of.is_leaf
    assert coverage(app)["leaves"] == 4  # the reuse node does not count twice
    with django_capture_on_commit_callbacks(execute=True):
        route_trajectory(query_for(app, "downloads/offline_packs"), "true")
    assert coverage(app) == {"leaves": 4, "exercised": 1, "ratio": 0.25}
    assert reuse.reuse_of.__class__.objects.get(pk=reuse.reuse_of_id).exercised_at is not None


def test_an_adjudicators_correct_decision_exercises_the_leaf(django_capture_on_commit_callbacks, role_users):
    app, _ = make_gem()
    ft.build_tree_from_gem(app)
    trajectory = query_for(app, "saved/clear_all")
    with django_capture_on_commit_callbacks(execute=True):
        route_trajectory(trajectory, "undetermined")
    assert coverage(app)["exercised"] == 0
    with django_capture_on_commit_callbacks(execute=True):
        adjudication.decide(trajectory.pk, role_users["adjudicator"], "correct")
    assert coverage(app)["exercised"] == 1
    assert FunctionNode.objects.get(app=app, path="saved/clear_all").exercised_at is not None


def test_pruned_and_merged_leaves_leave_the_denominator(role_users):
    app, _ = make_gem()
    ft.build_tree_from_gem(app)
    person = role_users["manager"]
    ft.merge(FunctionNode.objects.get(app=app, path="settings/offline_packs/delete_all"),
             FunctionNode.objects.get(app=app, path="settings/offline_packs/download"), person)
    ft.delete(FunctionNode.objects.get(app=app, path="saved/clear_all"), person)
    # download, font size, dark mode, and Saved (whose only function was deleted, so it is one itself)
    assert sorted(ft.leaves(app).values_list("path", flat=True)) == [
        "saved", "settings/display/dark_mode", "settings/display/font_size", "settings/offline_packs/download"]
    assert coverage() == {"leaves": 4, "exercised": 0, "ratio": 0.0}
