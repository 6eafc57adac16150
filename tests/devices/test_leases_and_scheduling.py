"""Leases, device-pull scheduling, quarantine and spare rotation (database only, no phones)."""
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import close_old_connections, connection
from django.utils import timezone

from devices import health, leases, scheduling
from devices.models import Device, Lease
from devices.profiles import resolution_class, unmet_requirements


def make_device(serial, **fields):
    defaults = {"adb_server": "127.0.0.1:1", "resolution": "1080x2400",
                "installed_apps": ["com.android.settings", "com.sim.notes"],
                "accounts": ["com.google:user@gmail.com"]}
    defaults.update(fields)
    return Device.objects.create(serial=serial, **defaults)


@pytest.mark.django_db(transaction=True)
def test_100_concurrent_lease_requests_give_exactly_one_holder_per_phone():
    if connection.vendor != "postgresql":
        pytest.skip("the concurrency guarantee is tested on PostgreSQL (set DATABASE_URL)")
    phones = [make_device(f"p{i}") for i in range(5)]
    barrier = threading.Barrier(25)

    def request(n):
        phone = phones[n % len(phones)]
        try:
            if n < 25:
                barrier.wait(timeout=30)
            lease = leases.acquire(Device.objects.get(pk=phone.pk), holder=f"job-{n}")
            return phone.pk, lease.holder
        except leases.LeaseRefused:
            return phone.pk, None
        finally:
            close_old_connections()

    with ThreadPoolExecutor(max_workers=25) as pool:
        results = list(pool.map(request, range(100)))
    winners = {}
    for phone_pk, holder in results:
        if holder:
            winners.setdefault(phone_pk, []).append(holder)
    assert sorted(winners) == sorted(p.pk for p in phones)
    assert all(len(holders) == 1 for holders in winners.values()), winners
    for phone in phones:
        assert Lease.objects.filter(device=phone, released_at__isnull=True).count() == 1
        assert Device.objects.get(pk=phone.pk).status == "leased"


@pytest.mark.django_db
def test_lease_expires_unless_heartbeats_extend_it():
    phone = make_device("p1")
    lease = leases.acquire(phone, holder="session-a", ttl=timedelta(seconds=30))
    with pytest.raises(leases.LeaseRefused, match="held by session-a"):
        leases.acquire(phone, holder="session-b")
    assert leases.heartbeat(lease, ttl=timedelta(seconds=30))
    # The holder dies: no more heartbeats, and the expiry passes.
    Lease.objects.filter(pk=lease.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert not leases.heartbeat(lease)
    assert leases.expire_stale_leases() == 1
    assert Device.objects.get(pk=phone.pk).status == "idle"
    assert leases.acquire(phone, holder="session-b").holder == "session-b"


@pytest.mark.django_db(transaction=True)
def test_a_keeper_hands_its_connection_back_after_every_beat(monkeypatch):
    """Pooled (DATABASE_POOL_SIZE), a keeper holding its connection while its holder's thread waits
    for one stalls a host whose phones outnumber its connections: it gives it back after each beat.
    And the holder gives its own back before it joins the keeper, whose beat may be waiting for it."""
    phone = make_device("p1")
    lease = leases.acquire(phone, holder="worker-1", ttl=timedelta(seconds=30))
    beats, handed_back = [], []
    real_heartbeat = leases.heartbeat
    holder = threading.current_thread()
    monkeypatch.setattr(leases, "heartbeat", lambda *a, **k: beats.append(1) or real_heartbeat(*a, **k))
    monkeypatch.setattr(leases, "release_connection",
                        lambda: handed_back.append((threading.current_thread() is holder, len(beats))))
    with leases.kept_alive(lease, ttl=timedelta(seconds=30), every_s=0.05) as keeper:
        threading.Event().wait(0.4)
    assert not keeper.lost and len(beats) >= 3
    by_keeper = [n for by_holder, n in handed_back if not by_holder]
    assert by_keeper == list(range(1, len(beats) + 1)), "one hand-back right after each beat"
    assert [by_holder for by_holder, _ in handed_back].count(True) == 1, "the holder's, once, as it stops the keeper"


@pytest.mark.django_db
def test_release_and_forced_takeover():
    phone = make_device("p1")
    lease = leases.acquire(phone, holder="worker-1")
    taken = leases.acquire(Device.objects.get(pk=phone.pk), holder="admin", force=True)
    assert taken.holder == "admin" and Lease.objects.get(pk=lease.pk).released_at
    assert leases.release(taken) and not leases.release(taken)
    assert Device.objects.get(pk=phone.pk).status == "idle"


def test_requirements_against_readiness_profiles():
    profile = {"installed_apps": ["a", "b"], "accounts": ["com.google:x@gmail.com"],
               "resolution": "720x1600", "device_type": "phone", "risk_level": "medium"}
    assert unmet_requirements(profile, {"apps": ["a"], "resolution": "hd"}) == []
    assert unmet_requirements(profile, {"apps": ["c"], "accounts": ["com.google"],
                                        "resolution": "fhd", "max_risk_level": "low"}) == [
        "app c", "resolution fhd", "risk level ≤ low"]
    assert resolution_class("1440x3200") == "qhd" and resolution_class("1080x2340") == "fhd"


@pytest.mark.django_db
def test_an_idle_phone_pulls_the_next_item_its_profile_satisfies():
    small = make_device("small", resolution="720x1600", installed_apps=["com.android.settings"])
    big = make_device("big")
    needs_notes = scheduling.enqueue("collect", {"q": 1}, {"apps": ["com.sim.notes"]}, priority=5)
    anything = scheduling.enqueue("collect", {"q": 2})
    assert scheduling.pull_next(small) == anything
    item = scheduling.pull_next(big)
    assert item == needs_notes and item.device == big and item.status == "assigned"
    assert scheduling.pull_next(big) is None


@pytest.mark.django_db
def test_pull_with_lease_skips_held_phones():
    held, free = make_device("held"), make_device("free")
    leases.acquire(held, holder="someone")
    scheduling.enqueue("collect", {"q": 1})
    lease, item = scheduling.pull_work_with_lease("worker-1", devices=Device.objects.order_by("serial"))
    assert lease.device == free and item.device == free


@pytest.mark.django_db
def test_repeated_failures_quarantine_the_phone_and_a_spare_takes_its_work():
    broken, spare = make_device("broken"), make_device("spare")
    lease = leases.acquire(broken, holder="worker-1")
    item = scheduling.enqueue("collect", {"q": 1}, {"apps": ["com.sim.notes"]})
    assert scheduling.pull_next(broken) == item
    for _ in range(health.QUARANTINE_AFTER_FAILURES):
        health.record_failure(Device.objects.get(pk=broken.pk), "no answer")
    broken.refresh_from_db()
    assert broken.status == "quarantined" and broken.health["quarantined_by"] == "auto"
    assert Lease.objects.get(pk=lease.pk).released_at is not None
    item.refresh_from_db()
    assert item.status == "queued" and item.device is None and "quarantined" in item.note
    assert scheduling.pull_next(spare) == item
    # The phone comes back: a passing check re-admits it.
    health.record_success(broken, {"shell": "ok"})
    assert Device.objects.get(pk=broken.pk).status == "idle"


@pytest.mark.django_db
def test_an_admin_quarantine_is_not_lifted_by_a_passing_check():
    phone = make_device("p")
    health.quarantine(phone, by="admin:alice", reason="screen cracked")
    health.record_success(Device.objects.get(pk=phone.pk), {"shell": "ok"})
    assert Device.objects.get(pk=phone.pk).status == "quarantined"
