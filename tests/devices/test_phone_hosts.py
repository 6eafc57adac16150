"""Phone hosts: one live worker per host, silence judged on the database's clock, leases that
drifting clocks cannot expire, and a preflight that says what is wrong before anything starts."""
import os
import socket
import subprocess
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db.models.functions import Now
from django.utils import timezone

from devices import hosts, leases
from devices.models import Device, Lease, PhoneHost
from scripts.services import free_port, redis_server_binary
from tests.conftest import BIN, ROOT, process_env, stop

pytestmark = pytest.mark.django_db


def host_row(name, machine="elsewhere", pid=None, seen_ago_s=0):
    return PhoneHost.objects.create(name=name, machine=machine, instance=f"{machine}:{pid}:x", pid=pid,
                                    queue=hosts.host_queue(name), started_at=timezone.now(),
                                    last_seen=timezone.now() - timedelta(seconds=seen_ago_s))


def test_a_host_served_by_a_live_worker_elsewhere_is_refused_with_a_clear_message():
    host_row("rack-1:5037", machine="rack-1-machine")
    with pytest.raises(hosts.HostClaimed, match=r"'rack-1:5037' is already served .* on rack-1-machine.*PHONE_HOST_NAME"):
        hosts.claim(["rack-1:5037"], instance="me")
    assert PhoneHost.objects.get(name="rack-1:5037").instance != "me"


def test_a_silent_host_or_a_dead_worker_on_this_machine_is_taken_over():
    host_row("silent:5037", seen_ago_s=3600)
    dead = subprocess.Popen(["true"])
    dead.wait()
    host_row("restarted:5037", machine=socket.gethostname(), pid=dead.pid)
    assert hosts.claim(["silent:5037", "restarted:5037", "new:5037"], instance="me") == ["silent:5037", "restarted:5037"]
    assert set(PhoneHost.objects.values_list("instance", flat=True)) == {"me"}
    assert hosts.heartbeat(["silent:5037", "restarted:5037", "new:5037"], "me") == 3
    assert hosts.heartbeat(["silent:5037"], "someone-else") == 0


def test_a_live_worker_on_this_machine_is_not_replaced():
    host_row("busy:5037", machine=socket.gethostname(), pid=os.getpid())
    with pytest.raises(hosts.HostClaimed):
        hosts.claim(["busy:5037"], instance="me")


def test_work_goes_to_live_hosts_and_to_configured_servers_no_worker_registered_yet(settings):
    settings.ADB_SERVERS = ["local:1", "silent:2"]
    host_row("live:3")
    host_row("silent:2", seen_ago_s=3600)
    assert hosts.serving_hosts() == ["live:3", "local:1"]


def test_phones_of_a_silent_host_go_offline_and_others_stay():
    host_row("gone:5037", seen_ago_s=3600)
    host_row("here:5037")
    gone = [Device.objects.create(serial=f"g{i}", adb_server="gone:5037", status=status)
            for i, status in enumerate(["idle", "leased", "quarantined"])]
    here = Device.objects.create(serial="h0", adb_server="here:5037", status="idle")
    assert hosts.mark_silent_hosts() == ["gone:5037"]
    assert [Device.objects.get(pk=d.pk).status for d in gone] == ["offline", "offline", "quarantined"]
    assert Device.objects.get(pk=gone[0].pk).health["error"] == "its phone host stopped answering"
    assert Device.objects.get(pk=here.pk).status == "idle"


@pytest.mark.parametrize("skew", [timedelta(minutes=10), -timedelta(minutes=10)])
def test_a_skewed_clock_neither_expires_live_leases_nor_keeps_dead_ones(monkeypatch, skew):
    device = Device.objects.create(serial="skew", adb_server="a:1")
    lease = leases.acquire(device, holder="collection:run:1", ttl=timedelta(seconds=30))
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + skew)  # this host's clock is off
    assert leases.expire_stale_leases() == 0
    assert leases.current_lease(device) is not None and leases.heartbeat(lease, ttl=timedelta(seconds=30))
    assert leases.confirm(lease, ttl=timedelta(seconds=30))
    row = Lease.objects.annotate(db_now=Now()).get(pk=lease.pk)
    assert timedelta(seconds=25) < row.expires_at - row.db_now <= timedelta(seconds=30)  # the database's time
    Lease.objects.filter(pk=lease.pk).update(expires_at=Now())  # it ran out, on the database's clock
    assert leases.current_lease(device) is None and not leases.heartbeat(lease)
    assert leases.expire_stale_leases() == 1


def test_preflight_names_a_host_already_served_elsewhere():
    host_row("twin:5037", machine="twin-machine")
    with pytest.raises(CommandError, match="already served by .* on twin-machine.*PHONE_HOST_NAME"):
        call_command("preflight", "--phone-host", "twin:5037")
    call_command("preflight", "--phone-host", "fresh:5037")


def preflight(**env):
    return subprocess.run([str(BIN / "python"), "manage.py", "preflight", "--phone-host", "p:1"], cwd=ROOT,
                          env=process_env(**env), capture_output=True, text=True, timeout=60)


@pytest.mark.django_db(transaction=True)
def test_preflight_exits_non_zero_on_an_unreachable_database_or_a_wrong_redis_password(tmp_path, own_processes):
    dead_db = preflight(DATABASE_URL=f"postgres://postgres@127.0.0.1:{free_port()}/nowhere")
    assert dead_db.returncode == 1 and "The database does not answer" in dead_db.stderr
    binary = redis_server_binary()
    if binary is None:
        pytest.skip("no redis-server to start one with a password")
    port = free_port()
    server = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--requirepass", "right-password"], stdout=subprocess.DEVNULL)
    try:
        from tests.conftest import wait_for_port

        wait_for_port(port, server)
        wrong = preflight(REDIS_URL=f"redis://:wrong-password@127.0.0.1:{port}/0")
        assert wrong.returncode == 1 and "refused the password" in wrong.stderr
        assert "wrong-password" not in wrong.stderr + wrong.stdout  # never echoed
        missing = preflight(REDIS_URL=f"redis://127.0.0.1:{port}/0")
        assert missing.returncode == 1 and "wants a password" in missing.stderr
        right = preflight(REDIS_URL=f"redis://:right-password@127.0.0.1:{port}/0")
        assert right.returncode == 0, right.stderr
    finally:
        stop(server)


@pytest.mark.django_db(transaction=True)
def test_the_phone_host_role_refuses_to_half_start(tmp_path, own_processes):
    """A wrong database or a name another live host serves: the role says so and starts nothing."""
    def role(**env):
        return subprocess.run([str(BIN / "python"), "scripts/up.py", "phone-host"], cwd=ROOT, capture_output=True,
                              text=True, timeout=120, env=process_env(FLYWHEEL_VAR_DIR=str(tmp_path), FARM_DEVICES="2",
                                                                      ADB_SERVER=f"127.0.0.1:{free_port()}", **env))
    unreachable = role(DATABASE_URL=f"postgres://postgres@127.0.0.1:{free_port()}/nowhere", PHONE_HOST_NAME="r1")
    assert unreachable.returncode == 1 and "The database does not answer" in unreachable.stderr
    host_row("taken:5037", machine="other-machine")
    taken = role(PHONE_HOST_NAME="taken:5037")
    assert taken.returncode == 3 and "already served by" in taken.stderr
    assert not (tmp_path / "simfarm.log").exists() and not (tmp_path / "phone-host.log").exists()  # nothing started
