"""Celery tasks of the phone layer (beat runs them; pages run them on demand).

Phone I/O happens on the phone host: beat's discovery and health tasks fan out to each host's
queue, whose worker reaches its own ADB server (on one machine, `make up`'s worker serves all)."""
from celery import shared_task

from devices import health, hosts, leases, registry

# A fan-out a host did not take within this long is dropped: the next round supersedes it, and a
# host back from an outage should not replay every missed round.
FAN_OUT_EXPIRES_S = 50


def _fan_out(task, every_host=None):
    names = every_host if every_host is not None else hosts.serving_hosts()
    for name in names:
        task.apply_async((name,), queue=hosts.host_queue(name), expires=FAN_OUT_EXPIRES_S)
    return {"hosts": names}


@shared_task(name="devices.tasks.discover_devices")
def discover_devices():
    """Beat: every phone host finds its phones and records them (also one that fell silent: its
    discovery is how it rejoins)."""
    return _fan_out(discover_host, every_host=sorted(set(hosts.serving_hosts())
                                                      | set(hosts.PhoneHost.objects.values_list("name", flat=True))))


@shared_task(name="devices.tasks.discover_host")
def discover_host(address):
    """On the phone host: find the phones on its ADB server and record them."""
    return registry.discover_devices([address])


@shared_task(name="devices.tasks.check_health")
def check_health():
    """Beat: every live phone host checks its phones."""
    return _fan_out(check_host_health)


@shared_task(name="devices.tasks.check_host_health")
def check_host_health(address):
    """On the phone host: check its phones; quarantine repeat failures, re-admit recoveries."""
    return health.check_all(address)


@shared_task(name="devices.tasks.expire_leases")
def expire_leases():
    """Free phones whose holders stopped sending heartbeats."""
    return {"expired": leases.expire_stale_leases()}


@shared_task(name="devices.tasks.mark_silent_hosts")
def mark_silent_hosts():
    """Phones of a phone host that stopped answering are offline until it speaks again."""
    return {"silent": hosts.mark_silent_hosts()}
