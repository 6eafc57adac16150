"""Exploration on the real virtual farm: coverage against the app files (ground truth for tests
only), replayable edges, cancel, resume, problems, non-destructive, page permissions."""
import time

import pytest

from devices.models import Device
from devices.phone import PhoneConnection, PhoneUnavailable
from devices.registry import discover_devices
from flywheel.models import App, Edge, ExplorationRun, GemPage
from flywheel.queries.exploration import explorer as exploration
from flywheel.queries.exploration import runs as exploration_runs
from flywheel.queries.exploration.runs import explore_apps_now, explore_run, launch_exploration
from flywheel.screens.page_identity import same_page
from simfarm.appspec import app_files, load_app

pytestmark = pytest.mark.django_db(transaction=True)


def farm_pages(package):
    """{activity: page id} of an app file (ground truth, tests only)."""
    for path in app_files():
        spec = load_app(path)
        if spec.package == package:
            return {spec.activity_of(page_id): page_id for page_id in spec.pages}
    raise LookupError(package)


def coverage(package):
    truth = farm_pages(package)
    explored = set(GemPage.objects.filter(app__package=package).values_list("activity", flat=True))
    reached = {page_id for activity, page_id in truth.items() if activity in explored}
    return reached, set(truth.values()) - reached


def phones():
    discover_devices()
    return list(Device.objects.order_by("serial"))


def notes_rows(phone):
    return phone.shell("content query --uri content://com.sim.notes/notes")


def test_exploration_reaches_most_pages_of_two_apps_and_leaves_them_as_found(farm_settings):
    devices = phones()
    phone = PhoneConnection.for_device(devices[0])
    before = notes_rows(phone)
    started = time.monotonic()
    run = explore_apps_now(["com.sim.notes", "com.sim.chat"], {"max_seconds": 400}, devices=devices[:2])
    elapsed = time.monotonic() - started
    assert run.status == "done", run.problems
    for package in ("com.sim.notes", "com.sim.chat"):
        reached, missed = coverage(package)
        ratio = len(reached) / (len(reached) + len(missed))
        print(f"{package}: {len(reached)}/{len(reached) + len(missed)} pages, missed {sorted(missed)}")
        assert ratio >= 0.9, (package, sorted(missed), run.problems[:10])
        report = run.report[package]
        assert report["thresholds"]["phash_distance"] >= 0 and "merged_duplicates" in report
        assert GemPage.objects.filter(app__package=package, is_start=True).count() == 1
    print(f"pages/min: {run.pages_found / (elapsed / 60):.1f} ({run.pages_found} pages in {elapsed:.0f} s)")
    # cross-app edges: launch from the launcher, Home, the share sheet
    assert Edge.objects.filter(via="launch", target__app__package="com.sim.notes", target__is_start=True).exists()
    assert Edge.objects.filter(via="home", source__app__package="com.sim.notes").exists()
    assert GemPage.objects.filter(kind="share_sheet").exists()
    assert Edge.objects.filter(via="share").exists()
    # Nothing irreversible was tapped: no recorded step targets a destructive label, and the
    # notes are as they were (the final reset puts app data back; the walk never deleted any).
    for edge in Edge.objects.filter(via="tap"):
        label = str(edge.action.get("target", {})).lower()
        assert "delete" not in label or edge.target.kind == "dialog", edge.action
    assert notes_rows(phone) == before
    # An edge path replays on a fresh phone to the same page.
    deep = GemPage.objects.filter(app__package="com.sim.notes", kind="page", depth__gte=2).first()
    assert deep is not None
    path = _path_from_start(deep)
    replay_phone = PhoneConnection.for_device(devices[2])
    replay_phone.shell("am force-stop com.sim.notes")
    explorer = _bare_explorer(run, devices[2], replay_phone)
    assert explorer.launch()
    for edge in path:
        assert explorer.act(edge.action)
    here = explorer.where()
    assert same_page(here, deep, explorer.thresholds), (deep.name, [e.action for e in path])


def _path_from_start(page):
    import networkx

    graph = networkx.DiGraph()
    for edge in Edge.objects.filter(source__app=page.app, target__app=page.app, via="tap"):
        graph.add_edge(edge.source_id, edge.target_id, edge=edge)
    start = GemPage.objects.get(app=page.app, is_start=True)
    nodes = networkx.shortest_path(graph, start.pk, page.pk)
    return [graph.edges[a, b]["edge"] for a, b in zip(nodes, nodes[1:])]


def _bare_explorer(run, device, phone):
    config = {**exploration_runs.DEFAULT_CONFIG, "_deadline": time.monotonic() + 60}
    return exploration.AppExplorer(run.pk, "com.sim.notes", phone, device, None, config, {},
                                   should_stop=lambda: False)


def test_settings_exploration_reaches_nine_tenths_of_its_pages(farm_settings):
    """A long scrolled list (System, About phone at its bottom), switches that show or enable rows
    (Bluetooth on: Pair new device; automatic time off: Date, Time), deep system pages."""
    devices = phones()
    phone = PhoneConnection.for_device(devices[0])
    # Exploration starts and ends on the app's fresh data (`pm clear`, devices/reset.py); another test
    # on this session's farm may have left Settings' data changed (test_runs taps "Reset settings",
    # network_reset_count=1), which the run rightly clears: compare from the fresh state.
    phone.shell("pm clear com.android.settings")
    before = phone.shell("content query --uri content://com.android.settings/state")
    run = explore_apps_now(["com.android.settings"], {"max_seconds": 420}, devices=devices[:1])
    assert run.status == "done", run.problems
    reached, missed = coverage("com.android.settings")
    total = len(reached) + len(missed)
    print(f"com.android.settings: {len(reached)}/{total} pages, missed {sorted(missed)}")
    assert len(reached) / total >= 0.9, (sorted(missed), run.problems[-10:])
    # A page behind a switch is reached by a path that sets the switch, and the phone is left as found.
    assert Edge.objects.filter(target__app__package="com.android.settings",
                               target__activity=".BluetoothPairingDetailActivity").exists()
    assert phone.shell("content query --uri content://com.android.settings/state") == before


def test_cancel_stops_between_actions(farm_settings):
    devices = phones()
    run = launch_exploration(["com.sim.chat"], {"max_seconds": 300}, dispatch=False)
    calls = {"n": 0}
    original = exploration_runs.is_cancelled

    def cancel_after_some(run_id):
        calls["n"] += 1
        if calls["n"] == 15:
            exploration_runs.cancel_exploration(ExplorationRun.objects.get(pk=run_id))
        return original(run_id)

    exploration_runs.is_cancelled = cancel_after_some
    try:
        explore_run(run.pk, devices=devices[:1])
    finally:
        exploration_runs.is_cancelled = original
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert run.progress["com.sim.chat"]["status"] == "cancelled"
    assert 0 < run.actions_taken < 40
    assert not Device.objects.get(pk=devices[0].pk).leases.filter(released_at__isnull=True).exists()


class ClockThatRunsOut:
    """`time` for the explorer and the run task: its monotonic clock jumps an hour ahead once `pages`
    pages of `package` are recorded, so a task's time runs out there however fast the machine is."""

    def __init__(self, package, pages):
        self.package, self.pages, self.ahead = package, pages, 0.0

    def monotonic(self):
        if not self.ahead and GemPage.objects.filter(app__package=self.package).count() >= self.pages:
            self.ahead = 3600.0
        return time.monotonic() + self.ahead

    def sleep(self, seconds):
        time.sleep(seconds)


def test_resume_continues_an_interrupted_run_without_duplicates(farm_settings, monkeypatch):
    devices = phones()
    run = launch_exploration(["com.sim.notes"], {"max_seconds": 300}, dispatch=False)
    clock = ClockThatRunsOut("com.sim.notes", pages=3)
    monkeypatch.setattr(exploration, "time", clock)
    monkeypatch.setattr(exploration_runs, "time", clock)
    explore_run(run.pk, devices=devices[:1], budget_s=600)  # interrupted: the task's time ran out
    run.refresh_from_db()
    assert run.status == "running" and run.frontier["com.sim.notes"]["queue"]
    assert run.progress["com.sim.notes"]["status"] == "paused"
    first_pages = set(GemPage.objects.filter(app__package="com.sim.notes").values_list("pk", flat=True))
    assert first_pages
    explore_run(run.pk, devices=devices[1:2])              # another task, another phone
    run.refresh_from_db()
    assert run.status == "done"
    after = set(GemPage.objects.filter(app__package="com.sim.notes").values_list("pk", flat=True))
    assert first_pages <= after
    reached, missed = coverage("com.sim.notes")
    assert len(reached) / (len(reached) + len(missed)) >= 0.9, sorted(missed)
    keys = list(GemPage.objects.filter(app__package="com.sim.notes").values_list("activity", "layout_signature"))
    assert len(keys) == len(set(keys)), "the resumed pass made duplicate pages"


def test_a_failing_dump_is_recorded_and_the_run_continues(farm_settings, monkeypatch):
    devices = phones()
    real = exploration.observe
    failures = {"left": 1, "calls": 0}

    def flaky(phone):
        failures["calls"] += 1
        if failures["calls"] == 4 and failures["left"]:
            failures["left"] -= 1
            raise PhoneUnavailable("uiautomator dump failed (injected)")
        return real(phone)

    monkeypatch.setattr(exploration, "observe", flaky)
    run = explore_apps_now(["com.sim.notes"], {"max_seconds": 300}, devices=devices[:1])
    assert run.status == "done"
    assert any(p["kind"] == "dump_failed" and "injected" in p["detail"] for p in run.problems)
    reached, missed = coverage("com.sim.notes")
    assert len(reached) / (len(reached) + len(missed)) >= 0.9, sorted(missed)


def test_pages_need_manager_or_admin(client_as, db):
    run = ExplorationRun.objects.create(apps=["com.sim.notes"], status="done",
                                        report={"com.sim.notes": {"pages": 3, "merged_duplicates": 2,
                                                                  "thresholds": {"phash_distance": 12,
                                                                                 "layout_distance": 0.25}}})
    App.objects.create(package="com.sim.notes", label="Notes")
    for role in ("annotator", None):
        assert client_as(role).get("/exploration/").status_code in (302, 403)
        assert client_as(role).get(f"/exploration/{run.pk}/").status_code in (302, 403)
    manager = client_as("manager")
    page = manager.get("/exploration/")
    assert page.status_code == 200 and b"com.sim.notes" in page.content
    detail = manager.get(f"/exploration/{run.pk}/")
    assert detail.status_code == 200 and b"merged" in detail.content.lower()
    assert client_as("annotator").post("/exploration/", {"apps": ["com.sim.notes"]}).status_code in (302, 403)
    assert ExplorationRun.objects.count() == 1


def test_beat_redispatches_running_runs_whose_heartbeat_is_stale(db, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from flywheel.tasks import explore_apps, resume_explorations

    assert explore_apps.name == "flywheel.tasks.explore_apps"
    sent = []
    monkeypatch.setattr(exploration_runs, "dispatch_exploration", lambda run: sent.append(run.pk))
    stale = ExplorationRun.objects.create(apps=["com.sim.notes"], status="running",
                                          heartbeat_at=timezone.now() - timedelta(minutes=10))
    ExplorationRun.objects.create(apps=["com.sim.notes"], status="running", heartbeat_at=timezone.now())
    ExplorationRun.objects.create(apps=["com.sim.notes"], status="cancelled",
                                  heartbeat_at=timezone.now() - timedelta(minutes=10))
    assert resume_explorations() == {"resumed": [stale.pk]}
    assert sent == [stale.pk]


def test_an_app_being_explored_says_exploring_and_problems_read_as_words(client_as, db, settings):
    settings.TIME_ZONE = "UTC"
    App.objects.create(package="com.sim.translator", label="Translator")
    run = ExplorationRun.objects.create(
        apps=["com.sim.translator", "com.sim.notes"], status="running",
        progress={"com.sim.translator": {"status": "queued", "pages": 12, "actions": 184},
                  "com.sim.notes": {"status": "queued", "pages": 0}},
        problems=[{"at": "2026-12-04T13:05:09+00:00", "app": "com.sim.translator", "kind": "error",
                   "detail": "KeyError: 'bounds'"},
                  {"at": "2026-12-04T13:06:00+00:00", "app": "com.sim.translator", "kind": "crash",
                   "detail": 'after tap "Swap" the screen said: Translator keeps stopping'}])
    page = client_as("manager").get(f"/exploration/{run.pk}/").content.decode()
    statuses = [cell.split("<")[0] for cell in page.split('data-testid="app-status">')[1:]]
    assert statuses == ["exploring", "queued"]  # 184 actions on the first app; none yet on the second
    assert "<td>Translator</td>" in page and "<td>Notes</td>" in page and "com.sim." not in page
    problems = page.split('data-testid="exploration-problems"')[1].split("</table>")[0]
    assert "4 Dec 2026, 13:05" in problems and "2026-12-04T" not in problems
    assert "Unexpected error" in problems and "KeyError" not in problems and "worker&#x27;s log" in problems
    assert "App crashed" in problems and "Translator keeps stopping" in problems
    ExplorationRun.objects.filter(pk=run.pk).update(status="done")
    page = client_as("manager").get(f"/exploration/{run.pk}/").content.decode()
    assert "exploring" not in page.split('data-testid="exploration-apps"')[1].split("</table>")[0]


def test_a_progress_report_marks_the_app_exploring(db):
    run = ExplorationRun.objects.create(apps=["com.sim.notes"], status="running",
                                        progress={"com.sim.notes": {"status": "queued", "pages": 0}})
    exploration_runs._save_app(run.pk, "com.sim.notes", {"queue": [1, 2], "stats": {"actions": 5}})
    run.refresh_from_db()
    assert run.progress["com.sim.notes"]["status"] == "exploring" and run.progress["com.sim.notes"]["actions"] == 5
