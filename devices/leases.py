"""Leases: exactly one holder controls a phone; a holder that dies frees it on expiry.

The database guarantees exclusivity (a partial unique index on open leases), so concurrent
requests from many processes can never both win.
"""
import logging
import threading
from contextlib import contextmanager
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, Value
from django.db.models.functions import Now
from django.utils import timezone

from devices.db_pool import release_connection
from devices.models import Device, Lease
from devices.profiles import satisfies
from devices.signals import lease_changed

DEFAULT_TTL = timedelta(seconds=60)
LEASABLE = ("idle", "leased")
KEEPALIVE_EVERY_S = 10.0   # at most; a third of the TTL when that is shorter

log = logging.getLogger(__name__)


def db_now_plus(ttl):
    """The database's clock plus `ttl`, as an SQL expression. Leases are started, extended and expired
    on the database's clock only: hosts whose clocks drift by minutes still agree on who is live."""
    return ExpressionWrapper(Now() + Value(ttl), output_field=DateTimeField())


class LeaseRefused(Exception):
    pass


def _announce(device_id, holder, change):
    """Tell listeners (live screens, the dashboard) once the change is committed."""
    transaction.on_commit(lambda: lease_changed.send(sender=Lease, device_id=device_id, holder=holder,
                                                     change=change))


def expire_stale_leases(device=None):
    """Release every open lease past its expiry (beat runs this; acquire does it per phone)."""
    stale = Lease.objects.filter(released_at__isnull=True, expires_at__lte=Now())
    if device is not None:
        stale = stale.filter(device=device)
    expired = list(stale.values_list("device_id", "holder"))
    count = stale.update(released_at=Now())
    Device.objects.filter(id__in=[device_id for device_id, _ in expired], status=Device.Status.LEASED).update(status=Device.Status.IDLE)
    for device_id, holder in expired:
        _announce(device_id, holder, "expired")
    return count


def acquire(device, holder, user=None, ttl=DEFAULT_TTL, purpose="", force=False):
    """Take the phone for `holder`, or raise LeaseRefused saying who holds it.

    `force` (admins only) ends the current holder's lease first.
    """
    if device.status not in LEASABLE and not force:
        raise LeaseRefused(f"{device.serial} is {device.get_status_display().lower()}")
    expire_stale_leases(device)
    if force:
        taken_from = Lease.objects.filter(device=device, released_at__isnull=True)
        for previous_holder in list(taken_from.values_list("holder", flat=True)):
            _announce(device.pk, previous_holder, "released")
        taken_from.update(released_at=Now())
    try:
        with transaction.atomic():
            lease = Lease.objects.create(device=device, holder=holder, user=user, purpose=purpose,
                                         expires_at=db_now_plus(ttl))
            lease.expires_at = timezone.now() + ttl  # for display; the row holds the database's time
    except IntegrityError:
        current = Lease.objects.filter(device=device, released_at__isnull=True).first()
        raise LeaseRefused(f"{device.serial} is held by {current.holder if current else 'someone'}")
    Device.objects.filter(pk=device.pk, status=Device.Status.IDLE).update(status=Device.Status.LEASED)
    _announce(device.pk, holder, "acquired")
    return lease



def acquire_fitting(requirements, holder, user=None, ttl=DEFAULT_TTL, purpose=""):
    """(device, lease) of the first idle phone whose readiness profile meets `requirements`, or
    (None, None) when none is free. A phone taken meanwhile by someone else is skipped."""
    for device in Device.objects.filter(status=Device.Status.IDLE).order_by("adb_server", "serial"):
        if not satisfies(device.readiness_profile, requirements):
            continue
        try:
            return device, acquire(device, holder=holder, user=user, ttl=ttl, purpose=purpose)
        except LeaseRefused:
            continue
    return None, None

def heartbeat(lease, ttl=DEFAULT_TTL):
    """Extend a live lease; False when it has already expired or been released.

    One conditional UPDATE (this lease, still open, not yet expired): what a holder runs right
    before acting, so a holder whose lease lapsed or was taken never acts."""
    extended = Lease.objects.filter(pk=lease.pk, released_at__isnull=True,
                                    expires_at__gt=Now()).update(expires_at=db_now_plus(ttl))
    if extended:
        lease.expires_at = timezone.now() + ttl  # for display; the row holds the database's time
    return bool(extended)


def confirm(lease, ttl=DEFAULT_TTL) -> bool:
    """Right before an input: is the lease still this holder's? A read while it has a good part of
    its life left (nothing but a release can end it sooner, and a release is what the read sees);
    a heartbeat once it runs short. Saves a write per input on the automatic lines."""
    margin = min(timedelta(seconds=10), ttl / 2)
    if Lease.objects.filter(pk=lease.pk, released_at__isnull=True, expires_at__gt=db_now_plus(margin)).exists():
        return True
    return heartbeat(lease, ttl=ttl)


class LeaseKeeper:
    """Heartbeats a lease from a background thread while its holder waits on something slow (a
    model call may take minutes; a lease lives DEFAULT_TTL). `lost` turns True, and the thread
    stops, once a heartbeat finds the lease released, expired or taken."""

    def __init__(self, lease, ttl=DEFAULT_TTL, every_s=None):
        self.lease, self.ttl = lease, ttl
        self.every_s = every_s or min(KEEPALIVE_EVERY_S, ttl.total_seconds() / 3)
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{lease.pk}-keeper", daemon=True)

    def _run(self):
        try:
            while not self._stop.wait(self.every_s):
                alive = heartbeat(self.lease, ttl=self.ttl)
                # Pooled, a connection held between beats would be one the holder's own thread waits
                # for: with as many keepers as pooled connections, the host stalled until its timeout.
                release_connection()
                if not alive:
                    self.lost = True
                    return
        except Exception:  # a database hiccup: the holder's own check before acting decides
            log.exception("keeping lease %s alive failed", self.lease.pk)
        finally:
            connection.close()  # Django's connections are per thread: this one dies with it

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        # Pooled, a beat in progress may be waiting for the very connection the holder's thread has:
        # joining it while holding that connection stalled a host until the pool's timeout (30 s)
        # and let every lease of the host run out meanwhile.
        release_connection()
        self._thread.join()


class _NoLease:
    lost = False


@contextmanager
def kept_alive(lease, ttl=DEFAULT_TTL, every_s=None):
    """`with kept_alive(lease) as keeper:` the lease is heartbeaten while the body runs; afterwards
    `keeper.lost` says whether it was lost meanwhile. No lease (None): nothing to keep."""
    if lease is None:
        yield _NoLease()
        return
    keeper = LeaseKeeper(lease, ttl, every_s).start()
    try:
        yield keeper
    finally:
        keeper.stop()


def release(lease):
    now = timezone.now()
    released = Lease.objects.filter(pk=lease.pk, released_at__isnull=True).update(released_at=now)
    if released:
        Device.objects.filter(pk=lease.device_id, status=Device.Status.LEASED).update(status=Device.Status.IDLE)
        _announce(lease.device_id, lease.holder, "released")
    lease.released_at = lease.released_at or now
    return bool(released)


def current_lease(device):
    return Lease.objects.live().filter(device=device).first()


def holds(device, holder):
    lease = current_lease(device)
    return lease is not None and lease.holder == holder
