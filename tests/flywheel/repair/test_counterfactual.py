"""Counterfactual derivation (§2.5.2): failure classes, recurrence, adversarial queries grounded in
the GEM (or, without one, in the failing trajectories' screens), the gates, the RL pool, query
generation, and the failure classes pages."""
import pytest

from flywheel.blobs import store_blob
from flywheel.models import App, Attribution, FailureClass, ModelVersion, Query, Repair, RlQueryEntry, Step, Trajectory
from flywheel.queries.generation import planner as generation
from flywheel.repair import counterfactual
from flywheel.repair.counterfactual import assign_class, counterfactual_repair, derive_for_class, derive_recurring
from tests.flywheel.openai_stub import StubOpenAI
from tests.flywheel.queries.test_generation import SHOP, build_world

pytestmark = pytest.mark.django_db
CONSTRAINT, MULTI = "constraint_violation", "multi_constraint_filtering"


def screen(*rows, package=SHOP):
    nodes = "".join(
        f'<node index="{i}" text="{text}" resource-id="" class="android.widget.{cls}" package="{package}" '
        f'content-desc="" clickable="true" bounds="[0,{i * 120}][1080,{i * 120 + 110}]" />'
        for i, (text, cls) in enumerate(rows))
    return f'<?xml version="1.0" ?><hierarchy rotation="0">{nodes}</hierarchy>'


SETTINGS_SCREEN = screen(("Settings", "TextView"), ("Offline packs", "TextView"), ("Notifications", "Switch"))
OFFLINE_SCREEN = screen(("Offline packs", "TextView"), ("English pack 45 MB", "TextView"),
                        ("Japanese pack 60 MB", "TextView"), ("Wi-Fi only", "CheckBox"), ("Auto-update", "CheckBox"))


def make_query(key, text, package=SHOP, label="ShopMart"):
    app, _ = App.objects.get_or_create(package=package, defaults={"label": label})
    query = Query.objects.create(key=key, text=text, tier="L2", capabilities=[MULTI])
    query.set_apps([app])
    return query


def failure(query, screens=(SETTINGS_SCREEN, OFFLINE_SCREEN), bad=1, cause=CONSTRAINT, capability=MULTI, package=SHOP,
            level=3):
    trajectory = Trajectory.objects.create(query=query, line="automatic", status="completed", verdict="false",
                                           destination="ecdm")
    for i, xml in enumerate(screens):
        Step.objects.create(trajectory=trajectory, index=i, hierarchy=store_blob(xml.encode(), "xml"),
                            foreground_package=package,
                            executed_action={"action": "terminate", "status": "success"} if i == bad
                            else {"action": "click", "point": [540, 180]})
    return Attribution.objects.create(
        trajectory=trajectory, level=level, cause=cause, capability=capability, first_bad_step=bad, owner="ecdm",
        evidence=[{"level": 3, "conclusion": "found", "cause": cause, "steps": [bad],
                   "detail": "declared success with Wi-Fi only selected and Auto-update not"}])


@pytest.fixture
def world():
    from flywheel.queries.gem import graph as gem

    gem.invalidate()
    yield build_world()
    gem.invalidate()


def recurring_class():
    q1 = make_query("q1", "Download the offline packs with Wi-Fi only and Auto-update on")
    q2 = make_query("q2", "Set Wi-Fi only and Auto-update for offline packs")
    attributions = [failure(q1), failure(q1), failure(q2)]
    for attribution in attributions:
        failure_class = assign_class(attribution)
    return failure_class, attributions


# --- classes and recurrence ---------------------------------------------------------------------------

def test_failures_are_classed_and_the_class_recurs_across_queries():
    q1 = make_query("q1", "Download the offline packs with Wi-Fi only and Auto-update on")
    q2 = make_query("q2", "Set Wi-Fi only and Auto-update for offline packs")
    first = assign_class(failure(q1))
    assert first.key == f"3:{CONSTRAINT}:{MULTI}" and first.status == "watching"
    assert len(first.centroid) == 384
    second = assign_class(failure(q1))
    assert (second.trajectory_count, second.query_count, second.status) == (2, 1, "watching")  # one query only
    third_attribution = failure(q2)
    third = assign_class(third_attribution)
    assert (third.trajectory_count, third.query_count, third.status) == (3, 2, "recurring")
    assert Attribution.objects.get(pk=third_attribution.pk).failure_class_id == third.pk
    again = assign_class(third_attribution)  # idempotent
    assert (again.trajectory_count, again.query_count) == (3, 2) and again.centroid == third.centroid


def test_only_model_failures_are_classed():
    query = make_query("q1", "Offline packs with both filters")
    assert assign_class(failure(query, level=1, cause="popup", capability="")) is None
    assert not FailureClass.objects.exists()


def test_a_failure_without_capability_joins_the_nearest_class_of_its_cause_by_embedding(settings):
    settings.ECDM_CLASS_SIMILARITY = 0.6
    query = make_query("q1", "Download the offline packs with Wi-Fi only and Auto-update on")
    known = assign_class(failure(query))
    joined = assign_class(failure(query, capability=""))
    assert joined.pk == known.pk and joined.trajectory_count == 2
    stranger = assign_class(failure(make_query("q9", "Call mum"), cause="perception_drift", capability=""))
    assert stranger.key == "3:perception_drift:"


# --- derivation grounded in the GEM --------------------------------------------------------------------

def test_a_recurring_class_yields_gem_grounded_adversarial_queries_in_the_rl_pool(world):
    failure_class, attributions = recurring_class()
    waiting = Repair.objects.create(trajectory=attributions[0].trajectory, attribution=attributions[0],
                                    path="counterfactual")
    queries = derive_for_class(failure_class, count=4)
    ready = [q for q in queries if q.status == "ready"]
    assert ready, [q.status_reason for q in queries]
    for query in queries:
        assert query.source == "derived" and query.failure_class_id == failure_class.pk
        assert query.status in ("ready", "rejected")
        assert query.gate_results.get("gate1"), query.gate_results
        if query.status == "rejected":
            assert query.status_reason.startswith("gate")
    target = [q for q in ready if MULTI in q.capabilities]
    assert target, [q.text for q in ready]
    # "all conditions are mandatory", over the real filter elements of the GEM's Offline packs page
    assert any("Wi-Fi only" in q.text and "Auto-update" in q.text and "mandatory" in q.text for q in target)
    for query in ready:
        assert query.labels["grounded_in"] == "gem" and query.gem_path, query.labels
        assert query.app_packages == [SHOP]
        entry = RlQueryEntry.objects.get(query=query)
        assert (entry.state, entry.channel) == ("measuring", "derived")  # measured before the gate admits it
        repair = Repair.objects.get(derived_query=query)
        assert (repair.path, repair.status, repair.failure_class_id) == ("counterfactual", "done", failure_class.pk)
    waiting.refresh_from_db()
    assert waiting.status == "done" and waiting.derived_query in ready  # the pending repair was filled
    failure_class.refresh_from_db()
    assert failure_class.status == "derived" and failure_class.derived_at is not None
    features = failure_class.features
    assert features["missing_intuition"].startswith("every stated condition is mandatory")
    assert features["triggering_scenarios"][0]["screen"] == "Offline packs"
    assert features["triggering_scenarios"][0]["page"] == world.pages["offline"].pk  # matched to the GEM page
    assert {f["query"] for f in features["target_flows"]} == {a.trajectory.query_id for a in attributions}
    assert features["last_derivation"]["passed"] == len(ready)


def test_query_generation_asks_more_often_for_an_open_class_capability(world):
    config = generation.normalized_config({})
    before = generation.capability_cycle(config)
    FailureClass.objects.create(key=f"3:{CONSTRAINT}:{MULTI}", cause=CONSTRAINT, capability=MULTI, status="recurring")
    after = generation.capability_cycle(config)
    assert after == before + [[MULTI]]
    assert sum(c == [MULTI] for c in after) == 2


def test_the_teacher_llm_sharpens_drafts_and_a_garbage_answer_keeps_the_offline_text(world, settings):
    failure_class, _ = recurring_class()
    with StubOpenAI(model="teacher") as stub:
        ModelVersion.objects.create(name="teacher", kind="endpoint", endpoint_url=stub.url, served_model_name="teacher")
        settings.TEACHER_MODEL_VERSION = "teacher"
        stub.replies += [(200, stub.chat_reply('{"text": "Open Offline packs in ShopMart and tick Wi-Fi only and '
                                               'Auto-update, both of them, before you call it done."}'), 0),
                         (200, stub.chat_reply("no json here"), 0)]
        queries = derive_for_class(failure_class, count=2)
    assert len(queries) == 2
    origins = sorted(q.labels["origin"] for q in queries)
    assert origins == ["llm", "offline"]
    llm = next(q for q in queries if q.labels["origin"] == "llm")
    assert "tick Wi-Fi only" in llm.text
    assert "Weakness:" in stub.requests[0]["messages"][1]["content"]
    failure_class.refresh_from_db()
    assert any("offline text kept" in p for p in failure_class.features["last_derivation"]["problems"])


# --- derivation without a GEM ----------------------------------------------------------------------------

NOTES = "com.example.jotter"
NOTE_SCREEN = screen(("All notes", "TextView"), ("Groceries list", "TextView"), ("Trip to Lyon", "TextView"),
                     ("Pinned only", "CheckBox"), ("Show archived", "Switch"), package=NOTES)


def test_without_a_gem_queries_come_from_the_trajectories_screens_and_rejections_keep_their_reason():
    q1 = make_query("n1", "Show pinned notes only", package=NOTES, label="Jotter")
    q2 = make_query("n2", "Filter pinned and archived notes", package=NOTES, label="Jotter")
    first = failure(q1, screens=(NOTE_SCREEN, NOTE_SCREEN), package=NOTES)
    for attribution in (first, failure(q1, screens=(NOTE_SCREEN, NOTE_SCREEN), package=NOTES),
                        failure(q2, screens=(NOTE_SCREEN, NOTE_SCREEN), package=NOTES)):
        failure_class = assign_class(attribution)
    waiting = Repair.objects.create(trajectory=first.trajectory, attribution=first, path="counterfactual")
    queries = derive_for_class(failure_class, count=3)
    assert queries
    for query in queries:
        assert query.labels["grounded_in"] == "trajectory screens"
        assert "Jotter" in query.text  # the app's own label, and labels of the screen it failed on
        assert any(label in query.text for label in ("Pinned only", "Show archived", "Groceries list", "Trip to Lyon"))
        # no GEM: completability cannot be shown, and the gate says so
        assert query.status == "rejected" and query.status_reason.startswith("gate1: not completable"), \
            query.status_reason
        assert not RlQueryEntry.objects.filter(query=query).exists()
    waiting.refresh_from_db()
    assert waiting.status == "failed" and "rejected by the intake gates" in waiting.reason
    failure_class.refresh_from_db()
    assert failure_class.status == "recurring"
    # the beat does not write the same rejected queries again until a new failure joins the class
    assert derive_recurring()["skipped"] == 1
    assign_class(failure(q2, screens=(NOTE_SCREEN, NOTE_SCREEN), package=NOTES))
    assert derive_recurring()["classes"] == 1


def test_a_counterfactual_repair_waits_for_its_class_to_recur(world):
    query = make_query("q1", "Download the offline packs with Wi-Fi only and Auto-update on")
    attribution = failure(query)
    repair = Repair.objects.create(trajectory=attribution.trajectory, attribution=attribution, path="counterfactual")
    repair = counterfactual_repair(repair)
    assert repair.status == "pending" and "waiting for" in repair.reason and repair.failure_class_id
    q2 = make_query("q2", "Set Wi-Fi only and Auto-update for offline packs")
    assign_class(failure(query))
    assign_class(failure(q2))
    repair = counterfactual_repair(repair)
    assert repair.status == "done" and repair.derived_query.source == "derived"
    level1 = failure(query, level=1, cause="popup", capability="")
    other = counterfactual_repair(Repair.objects.create(trajectory=level1.trajectory, attribution=level1,
                                                        path="counterfactual"))
    assert other.status == "failed" and "Level-3" in other.reason


def test_a_class_with_no_member_left_records_why():
    failure_class = FailureClass.objects.create(key="3:perception_drift:", cause="perception_drift",
                                                status="recurring")
    assert derive_for_class(failure_class) == []
    failure_class.refresh_from_db()
    assert failure_class.features["last_derivation"]["note"] == "no failed trajectory in this class"


# --- pages ---------------------------------------------------------------------------------------------

def test_the_classes_page_is_for_managers_and_says_what_to_do_when_empty(client_as, client):
    response = client.get("/ecdm/classes/")
    assert response.status_code == 302 and "/login/" in response["Location"]
    for role in ("annotator", "adjudicator", None):
        assert client_as(role).get("/ecdm/classes/").status_code == 403
    page = client_as("manager").get("/ecdm/classes/")
    assert page.status_code == 200
    assert "No failure class yet" in page.content.decode()
    assert client_as("annotator").post("/ecdm/classes/derive/").status_code == 403


def test_derive_now_from_the_pages(world, client_as, monkeypatch, django_capture_on_commit_callbacks):
    failure_class, _ = recurring_class()
    manager = client_as("manager")
    listing = manager.get("/ecdm/classes/").content.decode()
    assert failure_class.key in listing and "1 recurring class due" in listing
    detail = manager.get(f"/ecdm/classes/{failure_class.pk}/").content.decode()
    assert "Not induced yet" in detail and "No adversarial query yet" in detail
    response = manager.post(f"/ecdm/classes/{failure_class.pk}/derive/", follow=True)
    body = response.content.decode()
    assert "derived into the RL pool" in body and "Offline packs" in body
    assert "every stated condition is mandatory" in body
    started = []
    from flywheel import tasks

    monkeypatch.setattr(tasks.repair_derive_recurring, "delay", lambda: started.append(1))
    with django_capture_on_commit_callbacks(execute=True):
        response = manager.post("/ecdm/classes/derive/")
    assert response.status_code == 302 and started == [1]
    assert counterfactual.open_classes().filter(pk=failure_class.pk).exists()
