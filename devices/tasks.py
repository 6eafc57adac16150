"""Celery tasks of the phone layer (beat runs them; pages run them on demand)."""
from celery import shared_task

from devices import health, leases, registry


@shared_task(name="devices.tasks.discover_devices")
def discover_devices():
    """Find phones on every ADB server and record them."""
    return registry.discover_devices()


@shared_task(name="devices.tasks.check_health")
def check_health():
    """Heartbeat: check every known phone; quarantine repeat failures, re-admit recoveries."""
    return health.check_all()


@shared_task(name="devices.tasks.expire_leases")
def expire_leases():
    """Free phones whose holders stopped sending heartbeats."""
    return {"expired": leases.expire_stale_leases()}
