"""HTSC end to end on trajectories recorded from a virtual phone: votes, verdict, destination."""
import pytest

from devices.models import Device, WorkItem
from devices.phone import PhoneConnection
from devices.uitree import all_nodes, parse_hierarchy
from flywheel.blobs import store_blob
from flywheel.judging.pipeline import evaluate_trajectory
from flywheel.models import App, Query, SftEntry, Step, Trajectory

pytestmark = pytest.mark.django_db

BLUETOOTH = {
    "terminal": [{"check": "settings", "namespace": "global", "key": "bluetooth_on", "equals": "1"}],
    "milestones": [{"name": "settings open", "text": "Bluetooth"},
                   {"name": "bluetooth page", "resource_id": "com.android.settings:id/bluetooth_switch"}],
    "veto": [],
}


@pytest.fixture
def phone(farm_settings):
    phone = PhoneConnection(farm_settings.address, farm_settings.serials[0])
    phone.shell("am force-stop com.android.settings; settings put global bluetooth_on 0; "
                "svc wifi enable; svc data enable; input keyevent KEYCODE_HOME")
    yield phone
    phone.shell("svc wifi enable; svc data enable; settings put global bluetooth_on 0")


def make_trajectory(phone, verification=BLUETOOTH):
    app, _ = App.objects.get_or_create(package="com.android.settings")
    query = Query.objects.create(key=f"bt-{Query.objects.count()}", text="Turn Bluetooth on",
                                 tier="L2", verification=verification)
    query.set_apps([app])
    device, _ = Device.objects.get_or_create(serial=phone.serial, adb_server=phone.address)
    return Trajectory.objects.create(query=query, device=device, line="automatic", status="completed")


def center_of(xml, **selector):
    for node in all_nodes(parse_hierarchy(xml)):
        if all(getattr(node, key) == value for key, value in selector.items()):
            return list(node.center)
    raise AssertionError(f"{selector} not on screen")


def record(trajectory, phone, index, action_for_screen):
    """Store the screen, then act on it, as a collection line does."""
    xml = phone.dump_hierarchy()
    action = action_for_screen(xml)
    Step.objects.create(trajectory=trajectory, index=index, hierarchy=store_blob(xml.encode(), "xml"),
                        screenshot=store_blob(phone.screencap_png(), "png"), executed_action=action)
    if action["action"] == "click":
        phone.shell(f"input tap {action['point'][0]} {action['point'][1]}")


def click_on(**selector):
    return lambda xml: {"action": "click", "point": center_of(xml, **selector)}


def done(status="success"):
    return lambda xml: {"action": "terminate", "status": status}


def test_a_successful_trajectory_goes_to_the_sft_pool(phone):
    trajectory = make_trajectory(phone)
    for i, act in enumerate([click_on(text="Settings"), click_on(text="Bluetooth"),
                             click_on(resource_id="com.android.settings:id/bluetooth_switch"), done()]):
        record(trajectory, phone, i, act)
    verdict = evaluate_trajectory(trajectory, phone=phone)
    votes = {v.system: v.vote for v in trajectory.votes.all()}
    assert votes == {"A": "true", "B": "true", "C": "true"}, [v.rationale for v in trajectory.votes.all()]
    assert verdict.outcome == "true"
    trajectory.refresh_from_db()
    assert trajectory.destination == "sft" and SftEntry.objects.filter(trajectory=trajectory).exists()


def test_a_wrong_final_state_is_false_and_goes_to_ecdm(phone):
    trajectory = make_trajectory(phone)
    for i, act in enumerate([click_on(text="Settings"), click_on(text="Bluetooth"), done()]):
        record(trajectory, phone, i, act)
    verdict = evaluate_trajectory(trajectory, phone=phone)
    assert verdict.outcome == "false"
    assert Trajectory.objects.get(pk=trajectory.pk).destination == "ecdm"


def test_a_network_failure_is_env_error_and_the_query_is_collected_again(phone, django_capture_on_commit_callbacks):
    trajectory = make_trajectory(phone)
    record(trajectory, phone, 0, click_on(text="Settings"))
    phone.shell("svc wifi disable; svc data disable")
    record(trajectory, phone, 1, done("failure"))
    with django_capture_on_commit_callbacks(execute=False) as after_commit:
        verdict = evaluate_trajectory(trajectory, phone=phone)
    assert verdict.outcome == "env_error"
    assert Trajectory.objects.get(pk=trajectory.pk).destination == "env_healing"
    # Healing touches the phone and dispatches work: only after the verdict is committed.
    assert not WorkItem.objects.exists()
    for callback in after_commit:
        callback()
    # A trajectory of no run is re-collected by a small run of its own line (see test_recollection.py).
    item = WorkItem.objects.get(kind__startswith="collect:run:", status="queued")
    assert item.payload["recollection_of"] == trajectory.pk
    assert item.requirements["apps"] == ["com.android.settings"]


def test_disagreement_without_a_readable_terminal_state_is_undetermined(phone):
    trajectory = make_trajectory(phone)
    def blank(xml):
        return {"action": "click", "point": [540, 2250]}  # nothing there: the screen stays
    steps = [click_on(text="Settings"), click_on(text="Bluetooth"),
             click_on(resource_id="com.android.settings:id/bluetooth_switch"), blank, blank, blank, done()]
    for i, act in enumerate(steps):
        record(trajectory, phone, i, act)
    verdict = evaluate_trajectory(trajectory)  # no phone: System A abstains
    votes = {v.system: v.vote for v in trajectory.votes.all()}
    assert votes["A"] == "abstain" and votes["B"] != votes["C"]
    assert verdict.outcome == "undetermined"
    assert Trajectory.objects.get(pk=trajectory.pk).destination == "adjudication"


def test_a_payment_confirmation_is_vetoed(phone):
    trajectory = make_trajectory(phone, verification={"terminal": [], "milestones": []})
    pay_screen = ('<?xml version="1.0" ?><hierarchy rotation="0"><node index="0" text="Pay now" '
                  'resource-id="com.sim.shop:id/confirm_payment" class="android.widget.Button" '
                  'package="com.sim.shop" content-desc="" clickable="true" bounds="[100,2000][980,2140]" />'
                  '<node index="1" text="Total $25.00" resource-id="" class="android.widget.TextView" '
                  'package="com.sim.shop" content-desc="" bounds="[100,1800][980,1900]" /></hierarchy>')
    Step.objects.create(trajectory=trajectory, index=0, hierarchy=store_blob(pay_screen.encode(), "xml"),
                        executed_action={"action": "click", "point": [540, 2070]})
    Step.objects.create(trajectory=trajectory, index=1, hierarchy=store_blob(pay_screen.encode(), "xml"),
                        executed_action={"action": "terminate", "status": "success"})
    verdict = evaluate_trajectory(trajectory, phone=phone)
    assert verdict.outcome == "false" and verdict.safety_vetoed
    assert all(v.safety_violation for v in trajectory.votes.all())
    assert Trajectory.objects.get(pk=trajectory.pk).destination == "ecdm"
