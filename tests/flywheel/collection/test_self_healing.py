"""A worker killed mid-run (`kill -9`, as an out-of-memory kill would) is replaced: the new worker
takes over its host at once, the interrupted trajectory is kept and routed, its work item is
collected again exactly once, and the run finishes, in seconds rather than a lease's lifetime."""
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from devices.hosts import host_queue
from devices.models import Device, Lease, PhoneHost, WorkItem
from devices.registry import discover_devices
from flywheel.collection.launch import dispatch_run, launch_run
from flywheel.models import CollectionRun, Trajectory
from flywheel.rules.stops import Stop, StopKind
from tests.conftest import BIN, ROOT, process_env, stop
from tests.flywheel.collection.test_runs import make_query
from tests.flywheel.collection.test_worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def start_worker(tmp_path, label, address):
    """A real worker serving the farm's phone host; leases that would outlive the test (10 min) and
    no beat, so only the take-over can explain a quick recovery."""
    name = f"{label}{os.getpid()}@{socket.gethostname()}"
    queues = ",".join(["default", "collection", "evaluation", "repair", host_queue(address)])
    process = subprocess.Popen(
        [str(BIN / "celery"), "-A", "config", "worker", "--pool", "solo", "-l", "info", "-Q", queues, "-n", name,
         "--without-mingle", "--without-gossip"], cwd=ROOT, stdout=open(tmp_path / f"{label}.log", "wb"),
        stderr=subprocess.STDOUT, env=process_env(COLLECTION_LEASE_SECONDS="600", COLLECTION_REDISPATCH_AFTER_S="3600",
                                                  PHONE_HOST_HEARTBEAT_S="1"))
    wait_for(lambda: process.poll() is not None or PhoneHost.objects.filter(
        name=address, pid=process.pid).exists(), timeout=60, what=f"{label} to claim the phone host")
    assert process.poll() is None, (tmp_path / f"{label}.log").read_text()[-3000:]
    return process


def test_a_run_whose_worker_was_killed_resumes_within_a_minute_and_collects_each_item_once(farm_settings, tmp_path):
    discover_devices()
    Device.objects.exclude(serial__in=farm_settings.serials[:2]).update(status=Device.Status.OFFLINE)
    for i in range(6):
        make_query(f"heal-{i}", tags=("heal",))
    run = launch_run("automatic", {"tags": ["heal"]}, config={"phones": 2}, dispatch=False)
    first = start_worker(tmp_path, "doomed", farm_settings.address)
    try:
        dispatch_run(run)
        victim = wait_for(lambda: Trajectory.objects.filter(run=run, status="running", steps__isnull=False).first(),
                          timeout=120, what="a trajectory under way")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        killed_at = time.monotonic()
        assert Lease.objects.filter(released_at__isnull=True, holder=f"collection:run:{run.pk}").exists()
        second = start_worker(tmp_path, "replacement", farm_settings.address)
        try:
            wait_for(lambda: Trajectory.objects.filter(run=run, started_at__gt=victim.started_at)
                     .exclude(pk=victim.pk).exclude(status="running").exists() or Trajectory.objects.filter(
                         run=run, status="running").exclude(pk=victim.pk).exists(),
                     timeout=60, what="the run to resume")
            resumed_s = time.monotonic() - killed_at
            wait_for(lambda: CollectionRun.objects.get(pk=run.pk).status == "done", timeout=300,
                     what="the run to finish")
        finally:
            stop(second)
    finally:
        stop(first)
    assert resumed_s < 60, f"resumed after {resumed_s:.0f} s"
    victim.refresh_from_db()
    assert victim.status == "interrupted" and victim.stop_reason == "interrupted: the worker stopped"
    interrupted = list(Trajectory.objects.filter(run=run, stop_reason="interrupted: the worker stopped"))
    assert victim in interrupted and len(interrupted) <= 2  # what the two phones had in hand
    assert all(t.destination for t in interrupted), "interrupted trajectories are kept and routed"
    items = list(WorkItem.objects.filter(kind=f"collect:run:{run.pk}"))
    assert len(items) == 6 and {item.status for item in items} == {"done"}
    for trajectory in interrupted:  # its item collected again, once
        redone = [item for item in items if trajectory.pk in item.payload["trajectories"]]
        assert len(redone) == 1 and len(redone[0].payload["trajectories"]) == 2
    total = 6 + len(interrupted)
    assert sum(len(item.payload["trajectories"]) for item in items) == total == Trajectory.objects.filter(run=run).count()
    run.refresh_from_db()
    assert run.completed == run.total == 6


def test_the_supervisor_restarts_a_dead_process_with_backoff_and_stops_on_a_refusal(tmp_path, monkeypatch, own_processes):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import up
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    monkeypatch.setattr(up, "VAR", tmp_path)
    supervisor = up.Supervisor()
    counter = tmp_path / "starts"
    crashing = supervisor.start("crasher", [sys.executable, "-c", f"open({str(counter)!r}, 'a').write('x'); exit(1)"],
                                dict(os.environ))
    crashing.wait()
    starts_at = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(starts_at) < 3:
        assert supervisor.tend() is None
        if counter.exists() and len(counter.read_text()) > len(starts_at):
            starts_at.append(time.monotonic())
        time.sleep(0.05)
    assert len(starts_at) == 3, "restarted after it died, again and again"
    assert starts_at[2] - starts_at[1] > starts_at[1] - starts_at[0] + 0.5  # 1 s, then 2 s: backing off
    supervisor.start("refused", [sys.executable, "-c", f"exit({up.REFUSED})"], dict(os.environ)).wait()
    deadline = time.monotonic() + 5
    while (outcome := supervisor.tend()) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert outcome == ("refused", up.REFUSED)
    supervisor.stop_all()


SUCCESS = Stop(StopKind.SUCCESS, "terminate: success")


def holder_died_with(farm_settings, stop):
    """A run's driver took an item on a phone, started a trajectory that ended with `stop` (a Stop;
    None: still running), and died before marking the item (its lease gone)."""
    from datetime import timedelta

    from devices import leases, scheduling

    discover_devices()
    make_query("orphan", tags=("orphan",))
    run = launch_run("automatic", {"tags": ["orphan"]}, config={"phones": 1}, dispatch=False)
    CollectionRun.objects.filter(pk=run.pk).update(status="running")  # as its driver set it
    device = Device.objects.get(serial=farm_settings.serials[0])
    lease = leases.acquire(device, holder=f"collection:run:{run.pk}", ttl=timedelta(seconds=30))
    item = scheduling.pull_next(device, kinds=[run.work_kind])
    trajectory = Trajectory.objects.create(query_id=item.payload["query_id"], run=run, device=device, line="automatic",
                                           model_version=run.model_version, stop_kind=stop.kind if stop else "",
                                           stop_reason=stop.detail if stop else "",
                                           status="completed" if stop else "running")
    WorkItem.objects.filter(pk=item.pk).update(payload={**item.payload, "trajectories": [trajectory.pk]})
    leases.release(lease)
    return run, item, trajectory, device


def test_an_item_whose_trajectory_ended_before_its_holder_died_is_done_not_collected_again(farm_settings):
    from django.utils import timezone

    from flywheel.collection.recovery import recover_interrupted

    run, item, trajectory, _device = holder_died_with(farm_settings, SUCCESS)
    Trajectory.objects.filter(pk=trajectory.pk).update(judging_since=timezone.now())  # it died judging it
    summary = recover_interrupted()
    item.refresh_from_db()
    assert item.status == "done" and summary["work_items"] == 0 and summary["redispatched"] == []
    assert CollectionRun.objects.get(pk=run.pk).status == "done"
    trajectory.refresh_from_db()  # judged now, not when the dead judge's claim runs out (15 min)
    assert summary["judged"] == 1 and trajectory.verdict != "pending" and trajectory.destination


def test_a_judge_whose_trajectory_was_taken_over_writes_nothing(farm_settings):
    """A host cut off mid-judging comes back after recovery judged its trajectory: its verdict is dropped."""
    from datetime import timedelta

    from flywheel.judging.pipeline import _judge, claim_for_judging
    from flywheel.models import Verdict, Vote

    _run, _item, trajectory, _device = holder_died_with(farm_settings, SUCCESS)
    cut_off = claim_for_judging(trajectory)
    assert claim_for_judging(trajectory) is None  # held: a second judge keeps off
    recovery = claim_for_judging(trajectory, now=cut_off + timedelta(seconds=1), take_over=True)
    assert recovery is not None
    assert _judge(trajectory, None, cut_off) is None
    assert not Verdict.objects.filter(trajectory=trajectory).exists() and not Vote.objects.filter(
        trajectory=trajectory).exists()
    assert _judge(trajectory, None, recovery) is not None
    trajectory.refresh_from_db()
    assert Verdict.objects.filter(trajectory=trajectory).count() == 1 and trajectory.destination


def test_an_item_is_stranded_when_its_phone_is_leased_again_to_someone_else(farm_settings):
    from datetime import timedelta

    from devices import leases
    from flywheel.collection.recovery import recover_interrupted

    run, item, trajectory, device = holder_died_with(farm_settings, None)
    leases.acquire(device, holder="semi-auto:trajectory:999", ttl=timedelta(seconds=60))  # a person took the phone
    summary = recover_interrupted()
    item.refresh_from_db()
    trajectory.refresh_from_db()
    assert trajectory.status == "interrupted" and trajectory.stop_reason == "interrupted: the worker stopped"
    assert trajectory.stop_kind == StopKind.WORKER_STOPPED
    assert item.status == "queued" and summary["work_items"] == 1
    assert summary["redispatched"] == [run.pk]  # handed out again at once: no driver holds the run
