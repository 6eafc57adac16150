"""Heartbeat health checks: offline/unhealthy marking, quarantine, spare rotation, re-admission."""
import logging

from django.db.models import F
from django.utils import timezone

from devices.leases import current_lease, release
from devices.models import Device, Lease
from devices.phone import PhoneConnection, PhoneUnavailable
from devices.scheduling import requeue_work_of

log = logging.getLogger(__name__)
QUARANTINE_AFTER_FAILURES = 3
AUTO = "auto"


def probe(phone: PhoneConnection) -> dict:
    """A passing check: the phone answers a shell, boots completed, reports its battery."""
    code, output = phone.shell_result("echo alive; getprop sys.boot_completed")
    lines = output.split()
    if code != 0 or not lines or lines[0] != "alive":
        raise PhoneUnavailable(f"shell check failed (exit {code}): {output[:200]!r}")
    if len(lines) > 1 and lines[1] != "1":
        raise PhoneUnavailable("boot not completed")
    return {"shell": "ok"}


def record_failure(device, error):
    """Count a failed check; quarantine after repeated failures and hand its work to spares."""
    Device.objects.filter(pk=device.pk).update(consecutive_failures=F("consecutive_failures") + 1)
    device.refresh_from_db()
    device.health = {"ok": False, "error": str(error), "checked_at": timezone.now().isoformat(),
                     "quarantined_by": device.health.get("quarantined_by", "")}
    if device.consecutive_failures >= QUARANTINE_AFTER_FAILURES and device.status != Device.Status.QUARANTINED:
        quarantine(device, by=AUTO, reason=f"{device.consecutive_failures} failed checks: {error}")
        return device
    if device.status in (Device.Status.IDLE, Device.Status.LEASED, Device.Status.OFFLINE):
        device.status = Device.Status.UNHEALTHY
    device.save(update_fields=["health", "status"])
    return device


def record_success(device, details):
    """A passing check re-admits phones that failed earlier (not ones an admin quarantined)."""
    manual_quarantine = (device.status == Device.Status.QUARANTINED
                         and device.health.get("quarantined_by", AUTO) != AUTO)
    device.consecutive_failures = 0
    device.last_seen = timezone.now()
    device.health = {"ok": True, "checked_at": device.last_seen.isoformat(), **details,
                     "quarantined_by": device.health.get("quarantined_by", "") if manual_quarantine else ""}
    if device.status in (Device.Status.OFFLINE, Device.Status.UNHEALTHY) or (device.status == Device.Status.QUARANTINED and not manual_quarantine):
        device.status = Device.Status.LEASED if current_lease(device) else "idle"
    device.save(update_fields=["consecutive_failures", "last_seen", "health", "status"])
    return device


def check_device(device):
    try:
        details = probe(PhoneConnection.for_device(device))
    except PhoneUnavailable as error:
        log.warning("health check failed for %s: %s", device, error)
        return record_failure(device, error)
    return record_success(device, details)


def quarantine(device, by, reason):
    """Take a phone out of service: its lease ends and its unfinished work goes to spares."""
    device.status = Device.Status.QUARANTINED
    device.health = {**device.health, "quarantined_by": by, "quarantine_reason": reason,
                     "quarantined_at": timezone.now().isoformat()}
    device.save(update_fields=["status", "health"])
    for lease in Lease.objects.filter(device=device, released_at__isnull=True):
        release(lease)
    Device.objects.filter(pk=device.pk).update(status=Device.Status.QUARANTINED)  # release() may have set idle
    moved = requeue_work_of(device, f"re-queued: {device.serial} quarantined ({reason})")
    log.warning("quarantined %s (%s); %d work item(s) re-queued", device, reason, moved)
    return moved


def readmit(device):
    """An admin returns a quarantined phone to service after a passing check."""
    device.health = {**device.health, "quarantined_by": AUTO}
    device.save(update_fields=["health"])
    return check_device(device)


def check_all(address=None):
    """Check every phone still in service (of one phone host, when `address` names it)."""
    summary = {"ok": 0, "failed": 0}
    devices = Device.objects.exclude(status=Device.Status.OFFLINE)
    if address is not None:
        devices = devices.filter(adb_server=address)
    for device in devices:
        result = check_device(device)
        summary["ok" if result.health.get("ok") else "failed"] += 1
    return summary
