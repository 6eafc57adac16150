"""Device-pull scheduling: an idle phone pulls the next work item its profile satisfies."""
from django.db.models import Q
from django.utils import timezone

from devices.leases import LeaseRefused, acquire, release
from devices.models import Device, WorkItem
from devices.profiles import satisfies


def enqueue(kind, payload=None, requirements=None, priority=0, preferred_device=None):
    return WorkItem.objects.create(kind=kind, payload=payload or {}, requirements=requirements or {},
                                   priority=priority, preferred_device=preferred_device)


def _claim(item, device):
    """Atomically move a queued item to `device`; False when another phone got it first."""
    return WorkItem.objects.filter(pk=item.pk, status=WorkItem.Status.QUEUED).update(
        status=WorkItem.Status.ASSIGNED, device=device, assigned_at=timezone.now(),
        attempts=item.attempts + 1) == 1


def pull_next(device, kinds=None, scan_limit=200):
    """The next queued item this phone can do, claimed for it; None when there is none.

    Items that prefer another phone are left for it while that phone is usable.
    """
    profile = device.readiness_profile
    queued = WorkItem.objects.filter(status=WorkItem.Status.QUEUED).filter(
        Q(preferred_device__isnull=True) | Q(preferred_device=device)
        | ~Q(preferred_device__status__in=[Device.Status.IDLE, Device.Status.LEASED]))
    if kinds:
        queued = queued.filter(kind__in=kinds)
    for item in queued.order_by("-priority", "created_at")[:scan_limit]:
        if satisfies(profile, item.requirements) and _claim(item, device):
            item.refresh_from_db()
            return item
    return None


def pull_work_with_lease(holder, kinds=None, devices=None, user=None):
    """Find an idle phone that can take queued work, lease it and claim the item.

    Returns (lease, item) or (None, None). A worker calls this in its loop.
    """
    candidates = devices if devices is not None else Device.objects.filter(status=Device.Status.IDLE)
    for device in candidates:
        if not WorkItem.objects.filter(status=WorkItem.Status.QUEUED).exists():
            return None, None
        try:
            lease = acquire(device, holder=holder, user=user, purpose="work")
        except LeaseRefused:
            continue
        item = pull_next(device, kinds=kinds)
        if item is not None:
            return lease, item
        release(lease)
    return None, None


def finish(item, ok=True, note=""):
    """Done (or failed) by the phone it was assigned to; a no-op once recovery gave it to another
    phone (its holder was cut off meanwhile), so no item is finished twice."""
    return WorkItem.objects.filter(pk=item.pk, status=WorkItem.Status.ASSIGNED, device_id=item.device_id).update(
        status=WorkItem.Status.DONE if ok else "failed", finished_at=timezone.now(), note=note)


def requeue_work_of(device, reason):
    """Spare rotation: a phone's unfinished work goes back to the queue for a matching spare."""
    return WorkItem.objects.filter(device=device, status=WorkItem.Status.ASSIGNED).update(
        status=WorkItem.Status.QUEUED, device=None, note=reason)
