"""The worker that drives a phone host's phones: it claims the host as it starts, says it is alive
every few seconds, and takes over at once what a predecessor it replaces left behind.

A worker serves the phone hosts whose queues it consumes (`collection.<name>`): `make up`'s one
worker serves every ADB server listed; a `phone-host` machine's worker serves its own.
"""
import ctypes
import ctypes.util
import logging
import os
import signal
import socket
import threading
import time
import uuid

from celery.signals import worker_process_init, worker_ready, worker_shutdown
from django.conf import settings
from django.db import close_old_connections, connection

from devices import hosts, registry
from devices.db_pool import release_connection
from flywheel.collection.recovery import reclaim_host_work

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1  # prctl(2)
_served: dict = {}  # {"names": [...], "instance": str, "stop": threading.Event}


def served_hosts(queue_names) -> list[str]:
    """The configured phone hosts whose collection queue this worker consumes."""
    return [name for name in settings.ADB_SERVERS if hosts.host_queue(name) in set(queue_names)]


def _consumed_queues(consumer) -> list[str]:
    try:
        return [queue.name for queue in consumer.task_consumer.queues]
    except AttributeError:  # no task consumer (a worker started without queues)
        return []


def _keep_alive(names, instance, stop):
    every_s, last_ok = settings.PHONE_HOST_HEARTBEAT_S, time.monotonic()
    while not stop.wait(every_s):
        try:
            if not hosts.heartbeat(names, instance):
                log.error("phone hosts %s are now served by another worker; this one stops saying it is alive",
                          ", ".join(names))
                return
            if time.monotonic() - last_ok > settings.PHONE_HOST_STALE_S:
                # Back after an outage long enough for its phones to be marked offline meanwhile.
                log.warning("phone hosts %s: reachable again; rediscovering their phones", ", ".join(names))
                registry.discover_devices(names)
            last_ok = time.monotonic()
            release_connection()  # pooled, held between beats it would be one the phones lack
        except Exception as error:  # the database is away (a link down): keep trying, it may come back
            log.warning("phone host heartbeat failed: %s", error)
            connection.close()
    connection.close()


def start_serving(names, instance=None):
    """Claim `names` (HostClaimed when a live worker elsewhere has one), take over what a previous
    worker left, and start the heartbeat. Returns the instance id."""
    instance = instance or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    taken_over = hosts.claim(names, instance)
    stop = threading.Event()
    _served.update(names=names, instance=instance, stop=stop)
    threading.Thread(target=_keep_alive, args=(names, instance, stop), name="phone-host-heartbeat",
                     daemon=True).start()
    log.info("serving phone hosts %s as %s", ", ".join(names), instance)
    if taken_over:  # judging the interrupted trajectories takes a while: the worker consumes meanwhile
        threading.Thread(target=_reclaim, args=(reclaim_host_work, taken_over), name="phone-host-reclaim",
                         daemon=True).start()
    return instance


def _reclaim(reclaim_host_work, names):
    try:
        reclaim_host_work(names)
    except Exception:
        log.exception("taking over the work of phone hosts %s failed; beat's recovery will", ", ".join(names))
    finally:
        connection.close()


@worker_process_init.connect
def _die_with_the_worker(**_):
    """A pool process dies with its worker. Killed with `kill -9` (an out-of-memory kill), the worker
    would otherwise leave its pool processes driving phones as orphans while its successor takes
    the same work over."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the lease checks before every input still hold
        return
    if os.getppid() == 1:  # the worker died before the line above took effect
        os._exit(1)


@worker_ready.connect
def _on_worker_ready(sender=None, **_):
    names = served_hosts(_consumed_queues(sender))
    if not names:
        return
    try:
        start_serving(names)
    except hosts.HostClaimed as error:
        # Two workers driving the same phones would fight over every phone: refuse to run at all.
        log.critical("%s", error)
        os._exit(3)
    finally:
        close_old_connections()


@worker_shutdown.connect
def _on_worker_shutdown(**_):
    if _served:
        _served["stop"].set()
        try:
            hosts.release(_served["names"], _served["instance"])
        except Exception as error:  # shutting down anyway
            log.warning("could not let go of phone hosts: %s", error)
