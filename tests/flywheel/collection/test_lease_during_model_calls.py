"""A collection run never acts on a phone after its lease is gone (virtual farm over ADB).

A model call may outlast the lease (3 × 60 s against 60 s): the lease is kept alive while the
policy thinks, and confirmed by a conditional UPDATE right before each input. A lease taken away
during the model call interrupts the trajectory ("lease lost"); it is judged and routed, its
proposal kept, and no action reaches the phone.
"""
import time
from datetime import timedelta

import pytest

from devices import leases
from devices.models import Device, Lease
from devices.phone import PhoneConnection
from devices.registry import discover_devices
from flywheel.collection.engine import CollectionConfig, finish_trajectory, run_trajectory
from flywheel.models import CollectionRun, Trajectory
from flywheel.policies.base import Proposal
from flywheel.rules.stops import Stop, StopKind
from tests.flywheel.collection.test_runs import make_query

pytestmark = pytest.mark.django_db(transaction=True)
SHORT_TTL = timedelta(seconds=2)  # heartbeats every 0.67 s: a loaded machine still keeps it
COT = {"Observation": "Settings", "Reflection": "", "Plan": "open a page", "Decision": "tap", "Memory": ""}


class SlowPolicy:
    """Thinks `seconds` (longer than the lease lives), then opens Settings, then terminates.
    `meanwhile` runs during the first model call (e.g. someone takes the phone)."""

    name = "slow"

    def __init__(self, seconds, meanwhile=lambda: None):
        self.seconds, self.meanwhile, self.calls = seconds, meanwhile, 0

    def propose(self, state):
        self.calls += 1
        if self.calls > 1:
            return Proposal(cot=COT, action={"action": "terminate", "status": "success"})
        self.meanwhile()
        time.sleep(self.seconds)
        return Proposal(cot=COT, action={"action": "open", "app": "com.android.settings"})


@pytest.fixture
def collecting(farm_settings):
    discover_devices()
    query = make_query("slow-model", verification={"terminal": [], "milestones": []})  # reset: Settings closed, home
    device = Device.objects.filter(adb_server=farm_settings.address).order_by("serial").first()
    phone = PhoneConnection.for_device(device)
    lease = leases.acquire(device, holder="collection:run:test", ttl=SHORT_TTL)
    trajectory = Trajectory.objects.create(query=query, device=device, line="automatic", status="running")
    yield trajectory, phone, device, lease
    Lease.objects.filter(device=device, released_at__isnull=True).update(released_at=lease.acquired_at)
    Device.objects.filter(pk=device.pk).update(status="idle")


def run(trajectory, phone, device, lease, policy):
    config = CollectionConfig(max_steps=5)
    return run_trajectory(trajectory, phone, policy, config, lease=lease, device=device, lease_ttl=SHORT_TTL)


def test_a_slow_model_call_keeps_the_lease_and_the_action_runs(collecting):
    trajectory, phone, device, lease = collecting
    stop = run(trajectory, phone, device, lease, SlowPolicy(seconds=4.5))
    assert stop == Stop(StopKind.SUCCESS, "terminate: success")
    lease.refresh_from_db()
    assert lease.is_live, "the lease was kept alive during the 4.5 s model call (TTL 2 s)"
    assert trajectory.steps.get(index=0).executed_action["action"] == "open"
    assert phone.foreground()["package"] == "com.android.settings"


def test_a_lease_taken_during_the_model_call_interrupts_and_nothing_reaches_the_phone(collecting):
    trajectory, phone, device, lease = collecting

    def someone_takes_the_phone():
        leases.acquire(Device.objects.get(pk=device.pk), holder="console:admin-user", force=True,
                       ttl=timedelta(minutes=5))

    stop = run(trajectory, phone, device, lease, SlowPolicy(seconds=0.3, meanwhile=someone_takes_the_phone))
    assert stop == Stop(StopKind.LEASE_LOST, "lease lost")
    assert "launcher" in phone.foreground()["package"], "nothing reached the phone after the reset"
    step = trajectory.steps.get(index=0)
    assert step.proposed_action["action"] == "open" and step.executed_action is None  # kept, not run
    finish_trajectory(trajectory, stop, phone=phone)
    trajectory.refresh_from_db()
    assert trajectory.status == "interrupted" and trajectory.stop_reason == "lease lost"
    assert trajectory.stop_kind == StopKind.LEASE_LOST  # the kind is stored beside the words
    assert trajectory.verdict != "pending" and trajectory.destination, (trajectory.verdict, trajectory.destination)
    assert Lease.objects.get(device=device, released_at__isnull=True).holder == "console:admin-user"


def test_a_lease_that_lapses_before_the_action_is_confirmed_lost_there(collecting):
    """Even without the keeper (e.g. a hiccup), the conditional UPDATE right before the input
    refuses a lapsed lease."""
    trajectory, phone, device, lease = collecting

    def lapse():
        Lease.objects.filter(pk=lease.pk).update(expires_at=lease.acquired_at)

    stop = run(trajectory, phone, device, lease, SlowPolicy(seconds=0, meanwhile=lapse))
    assert stop.kind == StopKind.LEASE_LOST
    assert "launcher" in phone.foreground()["package"]
    assert trajectory.steps.get(index=0).executed_action is None


def test_a_lease_lost_before_the_trajectory_starts_does_not_even_reset_the_phone(collecting):
    trajectory, phone, device, lease = collecting
    phone.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1")
    leases.release(lease)
    assert run(trajectory, phone, device, lease, SlowPolicy(seconds=0)).kind == StopKind.LEASE_LOST
    assert phone.foreground()["package"] == "com.android.settings"  # not force-stopped, not sent Home
    assert not trajectory.steps.exists()


def test_a_judge_that_outlasts_the_lease_still_settles_the_item_without_recovery(farm_settings, settings, monkeypatch):
    """The phone stays the item's while its finished trajectory is judged: a slow judge (here 3 s
    against a 1 s lease) neither loses the lease nor leaves the item assigned for recovery to find."""
    import threading

    from devices.models import WorkItem
    from flywheel.collection import driver, launch

    settings.COLLECTION_LEASE_SECONDS = 1
    discover_devices()
    make_query("slow-judge", tags=("slow-judge",))
    run_ = launch.launch_run("automatic", {"tags": ["slow-judge"]}, config={"phones": 1, "max_steps": 3},
                           dispatch=False)
    device = Device.objects.filter(adb_server=farm_settings.address).order_by("serial").first()
    slow_route = driver.route_ended

    def judged_slowly(trajectory, phone):
        time.sleep(3)
        return slow_route(trajectory, phone)

    monkeypatch.setattr(driver, "route_ended", judged_slowly)
    lease = leases.acquire(device, holder=f"collection:run:{run_.pk}", ttl=driver.lease_ttl())
    driver.drive_phone(run_.pk, device, lease, threading.Event())
    item = WorkItem.objects.get(kind=run_.work_kind)
    trajectory = Trajectory.objects.get(run=run_)
    assert item.status == "done" and item.payload["trajectories"] == [trajectory.pk], item.note
    assert trajectory.status == "completed" and trajectory.destination, (trajectory.status, trajectory.stop_reason)
    assert CollectionRun.objects.get(pk=run_.pk).status == "done"
    lease.refresh_from_db()
    assert lease.released_at is not None  # released by the driver at the end, not lapsed and taken over
