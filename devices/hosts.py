"""Phone hosts: which worker serves which ADB server, who is alive, and who may claim a host.

One worker per phone host, so two machines never drive the same phones: a host name already
served by a live worker elsewhere is refused. Liveness is judged on the database's clock.
"""
import logging
import os
import socket
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField, ExpressionWrapper, Value
from django.db.models.functions import Now
from django.utils import timezone

from devices.models import Device, PhoneHost

log = logging.getLogger(__name__)


class HostClaimed(Exception):
    """Another live worker already serves this phone host."""


def host_queue(address: str) -> str:
    """The Celery queue of one phone host: its worker drives that host's phones."""
    return "collection." + address.replace(":", "-")


def _seen_since(seconds: float):
    return ExpressionWrapper(Now() - Value(timedelta(seconds=seconds)), output_field=DateTimeField())


def live_hosts():
    return PhoneHost.objects.filter(last_seen__gt=_seen_since(settings.PHONE_HOST_STALE_S))


def serving_hosts() -> list[str]:
    """Where work for phones goes: every live phone host, and each configured ADB server that no
    worker has registered yet (one machine's worker registers them as it starts). A host that was
    registered and fell silent gets nothing until it speaks again."""
    live = set(live_hosts().values_list("name", flat=True))
    registered = set(PhoneHost.objects.values_list("name", flat=True))
    return sorted(live | {name for name in settings.ADB_SERVERS if name not in registered})


def _process_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def same_machine_dead_worker(row) -> bool:
    """A host row left by a worker on this machine whose process is gone (it may be replaced at once)."""
    return row.machine == socket.gethostname() and not _process_alive(row.pid)


def claim(names, instance: str) -> list[str]:
    """Record this worker (`instance`) as the one serving `names`; HostClaimed when a live worker
    elsewhere serves one of them. Returns the names a previous worker served (its work is to be
    reclaimed). A predecessor on this machine whose process is gone (killed, restarted by the
    supervisor) is replaced at once, without waiting for it to fall silent."""
    machine, pid = socket.gethostname(), os.getpid()
    taken_over = []
    with transaction.atomic():
        for name in names:
            row = PhoneHost.objects.select_for_update().filter(name=name).first()
            if row and row.instance != instance:
                fresh = PhoneHost.objects.filter(pk=row.pk, last_seen__gt=_seen_since(settings.PHONE_HOST_STALE_S)).exists()
                if fresh and not same_machine_dead_worker(row):
                    raise HostClaimed(
                        f"phone host {name!r} is already served by the worker {row.instance} on {row.machine} "
                        f"(seen {max(0, int((timezone.now() - row.last_seen).total_seconds()))} s ago). "
                        f"Two machines must not drive the same phones: give this host its own name "
                        f"(PHONE_HOST_NAME) or stop the other worker.")
                taken_over.append(name)
            PhoneHost.objects.update_or_create(name=name, defaults={
                "machine": machine, "instance": instance, "pid": pid,
                "queue": host_queue(name),
                "started_at": Now(), "last_seen": Now()})
    return taken_over


def heartbeat(names, instance: str) -> int:
    """This worker is alive; the number of hosts it still holds (0: another worker took them)."""
    return PhoneHost.objects.filter(name__in=names, instance=instance).update(last_seen=Now())


def mark_silent_hosts() -> list[str]:
    """Beat: phones of a host silent for PHONE_HOST_STALE_S are offline until it speaks again
    (its discovery then re-admits them); leases on them expire on their own."""
    silent = list(PhoneHost.objects.exclude(last_seen__gt=_seen_since(settings.PHONE_HOST_STALE_S))
                  .values_list("name", flat=True))
    if silent:
        marked = Device.objects.filter(adb_server__in=silent, status__in=[
            Device.Status.IDLE, Device.Status.LEASED]).update(
            status=Device.Status.OFFLINE, health={"ok": False, "error": "its phone host stopped answering",
                                                  "checked_at": timezone.now().isoformat()})
        if marked:
            log.warning("phone hosts %s are silent: %d phones marked offline", ", ".join(silent), marked)
    return silent


def release(names, instance: str) -> int:
    """A worker stopping cleanly lets go of its hosts (another may claim them at once)."""
    return PhoneHost.objects.filter(name__in=names, instance=instance).update(
        last_seen=ExpressionWrapper(Now() - Value(timedelta(days=1)), output_field=DateTimeField()))
