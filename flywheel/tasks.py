"""Celery tasks of the data engine."""
import socket

from celery import shared_task
from django.utils import timezone


@shared_task(name="flywheel.tasks.ping")
def ping(origin="unknown"):
    """A tiny real task: proves broker → worker → result backend works end to end."""
    return {"pong": origin, "worker_host": socket.gethostname(), "at": timezone.now().isoformat()}


@shared_task(name="flywheel.tasks.heartbeat")
def heartbeat():
    """Beat's periodic pulse; later issues hang lease expiry and pool metabolism off beat too."""
    return {"at": timezone.now().isoformat()}
