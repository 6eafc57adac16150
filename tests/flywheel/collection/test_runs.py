"""The automatic, schema-guided and external lines end to end on the virtual farm."""
import pytest

from devices.models import Device, WorkItem
from devices.registry import discover_devices
from flywheel.collection.driver import drive_host
from flywheel.collection.launch import cancel_run, launch_run, refresh_progress
from flywheel.models import App, CollectionRun, CptEntry, Query, Step, Trajectory

# Opening a page leaves no state behind, so several trajectories may share a phone in any order.
BLUETOOTH_PATH = {"mode": "tap", "summary": "Settings → Bluetooth", "steps": [
    {"action": "open", "app": "com.android.settings"},
    {"action": "click", "target": {"text": "Bluetooth"}},
    {"action": "terminate", "status": "success"}]}
BLUETOOTH_CHECKS = {
    "terminal": [{"check": "foreground", "package": "com.android.settings"},
                 {"check": "screen", "contains": "bluetooth_switch"}],
    "milestones": [{"name": "bluetooth page", "resource_id": "com.android.settings:id/bluetooth_switch"}]}


def make_query(key, text="Open the Bluetooth settings", known_path=BLUETOOTH_PATH, verification=BLUETOOTH_CHECKS,
               tags=("bt",)):
    query = Query.objects.create(key=key, text=text, tier="L1", known_path=known_path,
                                 verification=verification, tags=list(tags),
                                 reset={"force_stop": ["com.android.settings"], "clear": [], "home": True})
    query.set_apps([App.objects.get_or_create(package="com.android.settings")[0]])
    return query


@pytest.fixture
def phones(farm_settings, db):
    from devices.phone import PhoneConnection

    for serial in farm_settings.serials:
        PhoneConnection(farm_settings.address, serial).shell("settings put global bluetooth_on 0")
    discover_devices()
    return Device.objects.filter(adb_server=farm_settings.address)


@pytest.mark.django_db(transaction=True)
def test_automatic_line_collects_judges_and_routes_every_trajectory(phones, farm_settings):
    for i in range(3):
        make_query(f"bt-{i}")
    run = launch_run("automatic", {"tags": ["bt"]}, config={"phones": 2, "repeats": 1}, dispatch=False)
    assert run.total == 3
    summary = drive_host(run.pk, farm_settings.address, 2)
    assert summary["phones"] == 2
    run.refresh_from_db()
    assert run.status == "done" and run.completed == 3
    trajectories = list(Trajectory.objects.filter(run=run))
    assert len(trajectories) == 3
    for trajectory in trajectories:
        steps = list(trajectory.steps.order_by("index"))
        assert [s.executed_action["action"] for s in steps][-1] == "terminate", trajectory.stop_reason
        assert all(s.screenshot and s.hierarchy and s.foreground_package for s in steps)
        assert all(s.cot.get("Observation") for s in steps)
        assert trajectory.verdict == "true" and trajectory.destination == "sft", (
            [v.rationale for v in trajectory.votes.all()])
        assert {v.system: v.vote for v in trajectory.votes.all()}["A"] == "true"
    assert CptEntry.objects.filter(step__trajectory__run=run).count() >= 6
    assert not Device.objects.filter(status="leased").exists()


@pytest.mark.django_db(transaction=True)
def test_schema_line_asks_before_a_confirmation_dialog(phones, farm_settings):
    reset_path = {"mode": "tap", "summary": "Settings → System → Reset options → Reset Wi-Fi, mobile & Bluetooth",
                  "steps": []}
    query = make_query("reset-net", text="Reset network settings", known_path=reset_path, tags=("schema",),
                       verification={"terminal": [], "milestones": [], "clarify": None})
    from flywheel.collection.schema_guided import needs_confirmation

    dialog = ('<?xml version="1.0" ?><hierarchy rotation="0"><node index="0" text="Reset settings" '
              'resource-id="android:id/button1" class="android.widget.Button" package="android" '
              'content-desc="" clickable="true" bounds="[600,1500][1000,1600]" /></hierarchy>')
    assert "confirmation dialog" in needs_confirmation({"action": "click", "point": [800, 1550]}, dialog)
    assert needs_confirmation({"action": "click", "point": [10, 10]}, dialog) == ""
    assert query.pk


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_a_run_and_counts_survive(phones, farm_settings):
    for i in range(4):
        make_query(f"c-{i}")
    run = launch_run("automatic", {"tags": ["bt"]}, config={"phones": 1}, dispatch=False)
    cancel_run(run)
    drive_host(run.pk, farm_settings.address, 1)
    refresh_progress(run.pk)
    run = CollectionRun.objects.get(pk=run.pk)
    assert run.status == "cancelled" and run.total == 4
    assert WorkItem.objects.filter(kind=f"collect:run:{run.pk}", status="cancelled").count() == 4
    assert not Trajectory.objects.filter(run=run).exists()


@pytest.mark.django_db(transaction=True)
def test_redelivered_step_writes_do_not_duplicate(phones):
    from devices.observation import Observation
    from flywheel.collection.recorder import record_observation

    query = make_query("idem")
    trajectory = Trajectory.objects.create(query=query, line="automatic")

    def seen(package):
        return Observation(png=b"png", hierarchy_xml="<hierarchy/>", width=1080, height=2400,
                           foreground={"package": package})

    record_observation(trajectory, 0, seen("a"))
    record_observation(trajectory, 0, seen("b"))  # a redelivered task observes step 0 again
    assert list(Step.objects.filter(trajectory=trajectory).values_list("index", "foreground_package")) == [(0, "b")]
    # A person's page never overwrites: a second tab that observed the same step gets None.
    assert record_observation(trajectory, 0, seen("c"), replace=False) is None


@pytest.mark.django_db(transaction=True)
def test_rl_rollouts_metabolise_the_pool(phones, farm_settings):
    from django.core.management import call_command

    from flywheel.models import RlQueryEntry

    solvable = make_query("rl-ok", tags=("rl",))
    Query.objects.filter(pk=solvable.pk).update(tier="L3")  # Phase 0 banks L2/L3
    # The RL line shows the policy the goal alone (§2.3.4 is the only line with a path).
    impossible = make_query("rl-no", text="Open the Quantum Teleporter's warp settings", tags=("rl",),
                            verification={"terminal": [{"check": "foreground", "package": "com.sim.teleporter"}],
                                          "milestones": []})
    Query.objects.filter(pk=impossible.pk).update(tier="L2")
    call_command("rl_pool", "bank")
    assert RlQueryEntry.objects.filter(state="banked").count() == 2
    run = launch_run("rl", {"pool": "rl"}, config={"phones": 2, "repeats": 2}, dispatch=False)
    assert run.total == 4
    drive_host(run.pk, farm_settings.address, 2)
    assert RlQueryEntry.objects.get(query=solvable).state == "retired"   # all True: mastered
    assert RlQueryEntry.objects.get(query=impossible).state == "left"    # all False: beyond the boundary
    failures = Trajectory.objects.filter(run=run, query=impossible)
    assert {t.destination for t in failures} == {"ecdm"}


RESET_NETWORK = {"mode": "tap", "summary": "Settings → System → Reset options → Reset Wi-Fi, mobile & Bluetooth",
                 "steps": [{"action": "open", "app": "com.android.settings"},
                           {"action": "swipe", "direction": "up"}, {"action": "swipe", "direction": "up"},
                           {"action": "click", "target": {"text": "System"}},
                           {"action": "click", "target": {"text": "Reset options"}},
                           {"action": "click", "target": {"text": "Reset Wi-Fi, mobile & Bluetooth"}},
                           {"action": "click", "target": {"text": "Reset settings"}},
                           {"action": "terminate", "status": "success"}]}


def schema_query(key, clarify):
    return make_query(key, text="Reset the network settings", known_path=RESET_NETWORK, tags=(key,),
                      verification={"terminal": [], "milestones": [
                          {"name": "dialog", "text": "Reset Wi-Fi, mobile & Bluetooth?"}], "clarify": clarify})


@pytest.mark.django_db(transaction=True)
def test_schema_line_clarifies_before_the_confirmation_and_the_spec_answers(phones, farm_settings):
    schema_query("schema-yes", {"answer": "yes"})
    run = launch_run("schema", {"tags": ["schema-yes"]}, config={"phones": 1}, dispatch=False)
    drive_host(run.pk, farm_settings.address, 1)
    trajectory = Trajectory.objects.get(run=run)
    actions = [s.executed_action["action"] for s in trajectory.steps.order_by("index") if s.executed_action]
    assert "clarify" in actions, (actions, trajectory.status, trajectory.stop_reason)
    after = actions[actions.index("clarify") + 1]
    assert after == "click" and actions[-1] == "terminate"
    clarify_step = trajectory.steps.get(executed_action__action="clarify")
    assert clarify_step.edit == {"clarify_answer": "yes", "by": "spec"}
    assert "confirmation dialog" in clarify_step.executed_action["question"]


@pytest.mark.django_db(transaction=True)
def test_schema_line_holds_a_question_for_a_person(phones, farm_settings, client_as):
    import threading

    from django.db import connection

    schema_query("schema-ask", None)
    run = launch_run("schema", {"tags": ["schema-ask"]}, config={"phones": 1, "clarify_wait_s": 60}, dispatch=False)
    def drive():
        try:
            drive_host(run.pk, farm_settings.address, 1)
        finally:
            connection.close()  # this thread's own database connection

    driver = threading.Thread(target=drive)
    driver.start()
    client = client_as("manager")
    deadline = __import__("time").monotonic() + 60
    while __import__("time").monotonic() < deadline:
        page = client.get(f"/runs/{run.pk}/").content.decode()
        if "Waiting for your answer" in page:
            break
        __import__("time").sleep(0.5)
    assert "confirmation dialog" in page
    step = Step.objects.get(trajectory__run=run, executed_action__action="clarify")
    client.post(f"/runs/{run.pk}/clarify/{step.pk}/", {"answer": "no"})
    driver.join(60)
    trajectory = Trajectory.objects.get(run=run)
    assert trajectory.stop_reason == "clarify answered 'no': stopped" and trajectory.destination


@pytest.mark.django_db(transaction=True)
def test_anomalies_are_injected_at_the_configured_rate_and_recorded(phones, farm_settings):
    make_query("anomaly", tags=("anomaly",))
    run = launch_run("automatic", {"tags": ["anomaly"]},
                     config={"phones": 1, "anomaly_rates": {"notification": 1.0}, "seed": 3}, dispatch=False)
    drive_host(run.pk, farm_settings.address, 1)
    steps = list(Step.objects.filter(trajectory__run=run).order_by("index"))
    assert steps and all(s.anomaly and s.anomaly["kind"] == "notification" for s in steps)
    assert all("cmd notification post" in s.anomaly["command"] for s in steps)
